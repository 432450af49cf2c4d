// a leaky ReLU: out = x > 0 ? x : x * neg_slope
__kernel void example_relu_kernel(const __global INPUT0_TYPE* input0,
                                  __global OUTPUT0_TYPE* output)
{
    const uint idx = get_global_id(0);
    const INPUT0_TYPE v = input0[idx];
    output[idx] = v > 0 ? v : v * neg_slope;
}
