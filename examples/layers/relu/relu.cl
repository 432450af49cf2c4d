// ReLU / leaky ReLU. One work item per (x, y, b*f): OpenCL has three dimensions, so batch and
// feature share the third. Every access goes through PITCHES and OFFSET: the same code then
// serves BFYX, BYXF, YXFB, FYXB and padded tensors.
__kernel void example_relu_kernel(const __global INPUT0_TYPE* input0,
                                  __global OUTPUT0_TYPE* output0)
{
    const uint x = get_global_id(0);
    const uint y = get_global_id(1);
    const uint bf = get_global_id(2);
    const uint f = bf % OUTPUT0_DIMS[1];
    const uint b = bf / OUTPUT0_DIMS[1];

    const uint in_id = INPUT0_OFFSET + b * INPUT0_PITCHES[0] + f * INPUT0_PITCHES[1]
                     + y * INPUT0_PITCHES[2] + x * INPUT0_PITCHES[3];
    const uint out_id = OUTPUT0_OFFSET + b * OUTPUT0_PITCHES[0] + f * OUTPUT0_PITCHES[1]
                      + y * OUTPUT0_PITCHES[2] + x * OUTPUT0_PITCHES[3];

    const INPUT0_TYPE value = input0[in_id];
    // neg_slope comes from the layer's negative_slope attribute (a #define); cast it so a
    // literal such as 0.1 (a double) does not promote the arithmetic.
    output0[out_id] = value < 0 ? value * (INPUT0_TYPE)(neg_slope) : value;
}
