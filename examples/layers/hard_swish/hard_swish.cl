// Hard swish. Global (X*Y, F, B): the first dimension is split into y and x here.
__kernel void hard_swish_kernel(const __global INPUT0_TYPE* input0,
                                __global OUTPUT0_TYPE* output0)
{
    const uint xy = get_global_id(0);
    const uint f = get_global_id(1);
    const uint b = get_global_id(2);
    const uint x = xy % INPUT0_DIMS[3];
    const uint y = xy / INPUT0_DIMS[3];

    const float v = input0[input0_index(b, f, y, x)];
    output0[output0_index(b, f, y, x)] = (OUTPUT0_TYPE)(v * relu6(v + 3.0f) / HSWISH_UPPER);
}
