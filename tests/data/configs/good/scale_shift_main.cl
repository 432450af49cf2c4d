__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void scale_shift(const __global INPUT0_TYPE* input0, const __global float* weights,
                 const __global float* biases, __global OUTPUT0_TYPE* output)
{
    const int x = get_global_id(0), y = get_global_id(1), bf = get_global_id(2);
    const int f = bf % INPUT0_DIMS[1];
    const int i = INPUT0_OFFSET + bf * INPUT0_PITCHES[1] + y * INPUT0_PITCHES[2] + x;
    output[OUTPUT0_OFFSET + bf * OUTPUT0_PITCHES[1] + y * OUTPUT0_PITCHES[2] + x] =
        scale_one(input0[i], weights[f], HAS_BIAS ? biases[f] : 0.0f);
}
