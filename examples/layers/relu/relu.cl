// ReLU / leaky ReLU. One work item per 4 neighbours along x, (y, b*f): OpenCL has three
// dimensions, so batch and feature share the third. Every access goes through PITCHES and OFFSET:
// the same code then serves BFYX, BYXF, YXFB, FYXB and padded tensors.
// Where both tensors are dense and of one layout, and X is a multiple of 4, the 4 values are
// one vector load and one vector store (a memory-bound layer runs at the speed of its loads).
// All the conditions below are compile-time constants: the compiler keeps one of the two paths.
#define VEC4_(t) t##4
#define VEC4(t) VEC4_(t)
#define DENSE (INPUT0_OFFSET == 0 && OUTPUT0_OFFSET == 0 && OUTPUT0_DIMS[3] % 4 == 0 \
               && INPUT0_PITCHES[3] == 1 && OUTPUT0_PITCHES[3] == 1 \
               && INPUT0_PITCHES[0] == OUTPUT0_PITCHES[0] \
               && INPUT0_PITCHES[1] == OUTPUT0_PITCHES[1] \
               && INPUT0_PITCHES[2] == OUTPUT0_PITCHES[2])

__kernel void example_relu_kernel(const __global INPUT0_TYPE* input0,
                                  __global OUTPUT0_TYPE* output0)
{
    const uint x0 = get_global_id(0) * 4;
    const uint y = get_global_id(1);
    const uint bf = get_global_id(2);
    const uint f = bf % OUTPUT0_DIMS[1];
    const uint b = bf / OUTPUT0_DIMS[1];
    // neg_slope comes from the layer's negative_slope attribute (a #define); cast it so a
    // literal such as 0.1 (a double) does not promote the arithmetic.
    const INPUT0_TYPE slope = (INPUT0_TYPE)(neg_slope);

    const uint in_id = INPUT0_OFFSET + b * INPUT0_PITCHES[0] + f * INPUT0_PITCHES[1]
                     + y * INPUT0_PITCHES[2] + x0 * INPUT0_PITCHES[3];
    const uint out_id = OUTPUT0_OFFSET + b * OUTPUT0_PITCHES[0] + f * OUTPUT0_PITCHES[1]
                      + y * OUTPUT0_PITCHES[2] + x0 * OUTPUT0_PITCHES[3];
    if (DENSE) {
        const VEC4(INPUT0_TYPE) value = vload4(0, input0 + in_id);
        vstore4(value < 0 ? value * slope : value, 0, output0 + out_id);
        return;
    }
    for (uint i = 0; i < 4 && x0 + i < OUTPUT0_DIMS[3]; ++i) {
        const INPUT0_TYPE value = input0[in_id + i * INPUT0_PITCHES[3]];
        output0[out_id + i * OUTPUT0_PITCHES[3]] = value < 0 ? value * slope : value;
    }
}
