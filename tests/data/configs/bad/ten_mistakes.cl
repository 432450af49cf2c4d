__kernel void real_kernel(const __global float* in, __global float* out)
{
    out[get_global_id(0)] = in[get_global_id(0)];
}
