// Three element-wise kernels for one layer type; the config's <Where mode=...> picks one.
// Work item (i, f, b) with i over the Y*X pixels of a BFYX plane.
#define INDEX() ((get_global_id(2) * get_global_size(1) + get_global_id(1)) \
                 * get_global_size(0) + get_global_id(0))

__kernel void act_relu(__global const float* restrict src, __global float* restrict dst)
{
    const size_t i = INDEX();
    dst[i] = fmax(src[i], 0.0f);
}

__kernel void act_leaky(__global const float* restrict src, __global float* restrict dst,
                        float slope)
{
    const size_t i = INDEX();
    const float v = src[i];
    dst[i] = v >= 0.0f ? v : v * slope;
}

__kernel void act_clamp(__global const float* restrict src, __global float* restrict dst,
                        float lo, float hi)
{
    const size_t i = INDEX();
    dst[i] = clamp(src[i], lo, hi);
}
