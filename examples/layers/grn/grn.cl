// GRN: one work item per (x, y, b) walks the feature axis twice, first to sum the squares,
// then to scale. Indexing through pitches keeps it format- and padding-agnostic.
__kernel void grn_kernel(const __global INPUT0_TYPE* input0, __global OUTPUT0_TYPE* output0)
{
    const uint x = get_global_id(0);
    const uint y = get_global_id(1);
    const uint b = get_global_id(2);

    const uint in_base = INPUT0_OFFSET + b * INPUT0_PITCHES[0] + y * INPUT0_PITCHES[2]
                       + x * INPUT0_PITCHES[3];
    const uint out_base = OUTPUT0_OFFSET + b * OUTPUT0_PITCHES[0] + y * OUTPUT0_PITCHES[2]
                        + x * OUTPUT0_PITCHES[3];

    float sum = 0.0f;
    for (uint f = 0; f < INPUT0_DIMS[1]; ++f) {
        const float v = input0[in_base + f * INPUT0_PITCHES[1]];
        sum += v * v;
    }
    const float scale = 1.0f / sqrt(sum + (float)(BIAS));
    for (uint f = 0; f < INPUT0_DIMS[1]; ++f) {
        output0[out_base + f * OUTPUT0_PITCHES[1]] =
            (OUTPUT0_TYPE)(input0[in_base + f * INPUT0_PITCHES[1]] * scale);
    }
}
