/* Tree reductions over the WG items of a work-group through `scratch` (WG floats of __local
 * memory); every item gets the result. Each pairs the items' values in the same fixed order,
 * so the kernels that share a row's max and sum (softmax.cl, matmul_softmax.cl) agree bit for
 * bit given the same values. Every item of the group must call them.
 */
inline float group_max(__local float* scratch, float v)
{
    const int t = get_local_id(0);
    scratch[t] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int step = WG / 2; step > 0; step >>= 1) {
        if (t < step)
            scratch[t] = fmax(scratch[t], scratch[t + step]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float result = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);        /* scratch is free again for the next reduction */
    return result;
}

inline float group_sum(__local float* scratch, float v)
{
    const int t = get_local_id(0);
    scratch[t] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int step = WG / 2; step > 0; step >>= 1) {
        if (t < step)
            scratch[t] += scratch[t + step];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float result = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return result;
}
