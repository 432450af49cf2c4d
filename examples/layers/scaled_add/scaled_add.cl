// Weighted sum of two same-shaped tensors. The default global size is one dimension, the
// output's element count, so the work item splits its id into b, f, y, x itself. The two inputs
// may come in different formats: each is addressed through its own pitches.
__kernel void scaled_add_kernel(const __global INPUT0_TYPE* a,
                                const __global INPUT1_TYPE* b_in,
                                __global OUTPUT0_TYPE* out)
{
    uint i = get_global_id(0);
    const uint x = i % OUTPUT0_DIMS[3]; i /= OUTPUT0_DIMS[3];
    const uint y = i % OUTPUT0_DIMS[2]; i /= OUTPUT0_DIMS[2];
    const uint f = i % OUTPUT0_DIMS[1];
    const uint b = i / OUTPUT0_DIMS[1];

    const INPUT0_TYPE va = a[INPUT0_OFFSET + b * INPUT0_PITCHES[0] + f * INPUT0_PITCHES[1]
                             + y * INPUT0_PITCHES[2] + x * INPUT0_PITCHES[3]];
    const INPUT1_TYPE vb = b_in[INPUT1_OFFSET + b * INPUT1_PITCHES[0] + f * INPUT1_PITCHES[1]
                                + y * INPUT1_PITCHES[2] + x * INPUT1_PITCHES[3]];
    out[OUTPUT0_OFFSET + b * OUTPUT0_PITCHES[0] + f * OUTPUT0_PITCHES[1]
        + y * OUTPUT0_PITCHES[2] + x * OUTPUT0_PITCHES[3]] =
        (OUTPUT0_TYPE)(va * weights[0] + vb * weights[1]);
}
