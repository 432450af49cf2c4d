// Per-channel affine transform. weights and biases are the layer's Data blobs: 1-D buffers
// of F values, bound after the real input (they are INPUT1 and INPUT2 to the JIT).
#if NUM_INPUTS != 3
#error "expected the input and two Data blobs"
#endif

__kernel void scale_shift_kernel(const __global INPUT0_TYPE* input0,
                                 const __global INPUT1_TYPE* weights,
                                 const __global INPUT2_TYPE* biases,
                                 __global OUTPUT0_TYPE* output0)
{
    const uint x = get_global_id(0);
    const uint y = get_global_id(1);
    const uint bf = get_global_id(2);
    const uint f = bf % OUTPUT0_DIMS[1];
    const uint b = bf / OUTPUT0_DIMS[1];

    const INPUT0_TYPE v = input0[INPUT0_OFFSET + b * INPUT0_PITCHES[0] + f * INPUT0_PITCHES[1]
                                 + y * INPUT0_PITCHES[2] + x * INPUT0_PITCHES[3]];
    output0[OUTPUT0_OFFSET + b * OUTPUT0_PITCHES[0] + f * OUTPUT0_PITCHES[1]
            + y * OUTPUT0_PITCHES[2] + x * OUTPUT0_PITCHES[3]] =
        (OUTPUT0_TYPE)(v * weights[INPUT1_OFFSET + f] + biases[INPUT2_OFFSET + f]);
}
