/* SoftMax over one axis of a tensor viewed as [OUTER, L, INNER].
 *
 * ROW_PER_GROUP (INNER == 1: the classifier's [N, classes]): one work-group of WG items per row;
 * the max and the sum are tree reductions in __local memory (group_reduce.cl, included
 * below). NDRange: (OUTER * WG).
 * Otherwise one work item per (outer, inner) walks its row; neighbouring items take
 * neighbouring inner positions, so reads coalesce. NDRange: (OUTER * INNER).
 * Subtracting the row's max keeps exp() from overflowing.
 * OUTER, L, INNER are the arguments outer, length, inner: one program per form (and
 * LOG_SOFTMAX) serves every shape and axis.
 * LOG_SOFTMAX 1 (LogSoftmax): each output is (x - max) - log(sum), exact where log(softmax)
 * would underflow to -inf; OUTPUT(x, m, inv, logsum) writes either.
 */
#include "group_reduce.cl"
#if LOG_SOFTMAX
#define OUTPUT(x, m, inv, logsum) (((x) - (m)) - (logsum))
#else
#define OUTPUT(x, m, inv, logsum) (exp((x) - (m)) * (inv))
#endif
#if ROW_PER_GROUP
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void softmax(__global const float* restrict input, __global float* restrict output,
             const int outer, const int length, const int inner)
{
    __local float scratch[WG];
    const int t = get_local_id(0);
    const int row = get_group_id(0);
    __global const float* in = input + row * length;
    __global float* out = output + row * length;

    float m = -INFINITY;
    for (int i = t; i < length; i += WG)
        m = fmax(m, in[i]);
    m = group_max(scratch, m);

    float s = 0.0f;
    for (int i = t; i < length; i += WG)
        s += exp(in[i] - m);
    s = group_sum(scratch, s);
    const float inv = 1.0f / s, logsum = log(s);
    for (int i = t; i < length; i += WG)
        out[i] = OUTPUT(in[i], m, inv, logsum);
}
#elif ROW_PER_ITEM
/* CPU devices, inner == 1: one work item per row, the max, the sum and the scaling as float8
 * runs (a work-group tree of barriers is what a CPU OpenCL runtime emulates at the highest
 * cost). NDRange: (outer), local (1). */
__kernel void softmax(__global const float* restrict input, __global float* restrict output,
                      const int outer, const int length, const int inner)
{
    const int row = get_global_id(0);
    __global const float* in = input + row * length;
    __global float* out = output + row * length;
    float8 m8 = (float8)(-INFINITY);
    int i = 0;
    for (; i + 8 <= length; i += 8)
        m8 = fmax(m8, vload8(0, in + i));
    float4 m4 = fmax(m8.lo, m8.hi);
    float m = fmax(fmax(m4.x, m4.y), fmax(m4.z, m4.w));
    for (; i < length; ++i)
        m = fmax(m, in[i]);
    float8 s8 = (float8)0.0f;
    for (i = 0; i + 8 <= length; i += 8)
        s8 += exp(vload8(0, in + i) - m);
    const float4 s4 = s8.lo + s8.hi;
    float s = (s4.x + s4.y) + (s4.z + s4.w);
    for (; i < length; ++i)
        s += exp(in[i] - m);
    const float inv = 1.0f / s, logsum = log(s);
    for (i = 0; i + 8 <= length; i += 8)
        vstore8(OUTPUT(vload8(0, in + i), m, inv, logsum), 0, out + i);
    for (; i < length; ++i)
        out[i] = OUTPUT(in[i], m, inv, logsum);
}
#else
__kernel void softmax(__global const float* restrict input, __global float* restrict output,
                      const int outer, const int length, const int inner)
{
    const int id = get_global_id(0);
    if (id >= outer * inner)
        return;
    const int base = id / inner * (length * inner) + id % inner;
    float m = -INFINITY;
    for (int i = 0; i < length; ++i)
        m = fmax(m, input[base + i * inner]);
    float s = 0.0f;
    for (int i = 0; i < length; ++i)
        s += exp(input[base + i * inner] - m);
    const float inv = 1.0f / s, logsum = log(s);
    for (int i = 0; i < length; ++i)
        output[base + i * inner] = OUTPUT(input[base + i * inner], m, inv, logsum);
}
#endif
