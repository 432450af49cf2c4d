// Ops that make a tensor from indices or positions (ops/index/make.py): OneHot, Range, Eye,
// Trilu and ReverseSequence. One work-item per output element; sizes are kernel arguments.
//
// Baked: DATA_TYPE (the output's element type), IDX_TYPE (an index input's, where one is read).
#ifndef IDX_TYPE
#define IDX_TYPE long
#endif

// OneHot: out is the indices' shape with `depth` inserted before `inner` elements; out is
// on_value where the index equals the position on that axis, else off_value. A negative index
// counts from the end with `wrap` (ONNX), else matches nothing (OpenVINO).
__kernel void one_hot(__global const IDX_TYPE* restrict indices,
                      __global const DATA_TYPE* restrict on_value,
                      __global const DATA_TYPE* restrict off_value,
                      __global DATA_TYPE* restrict out,
                      const int count, const int depth, const int inner, const int wrap)
{
    const int i = get_global_id(0);
    if (i >= count) return;
    const int r = i % inner, d = (i / inner) % depth, o = i / inner / depth;
    long k = (long)indices[(long)o * inner + r];
    if (k < 0 && wrap) k += depth;
    out[i] = k == d ? on_value[0] : off_value[0];
}

// Range: out[i] = start + i * step (the count was worked out when the plan was compiled).
__kernel void range(__global const DATA_TYPE* restrict start,
                    __global const DATA_TYPE* restrict step,
                    __global DATA_TYPE* restrict out, const int count)
{
    const int i = get_global_id(0);
    if (i < count) out[i] = start[0] + (DATA_TYPE)i * step[0];
}

// Eye: ones on the diagonal `k` (column - row == k) of every [rows, cols] matrix.
__kernel void eye(__global DATA_TYPE* restrict out, const int count, const int rows,
                  const int cols, const int k)
{
    const int i = get_global_id(0);
    if (i >= count) return;
    const int c = i % cols, r = (i / cols) % rows;
    out[i] = (DATA_TYPE)(c - r == k);
}

// Trilu: x where column - row >= k (upper) or <= k (lower) in the last two axes, else 0; k is
// data (an i64 tensor of one element), so a k computed at run time needs no new program.
__kernel void trilu(__global const DATA_TYPE* restrict x, __global const long* restrict k,
                    __global DATA_TYPE* restrict out, const int count, const int rows,
                    const int cols, const int upper)
{
    const int i = get_global_id(0);
    if (i >= count) return;
    const long diagonal = (long)(i % cols) - (long)((i / cols) % rows);
    const int keep = upper ? diagonal >= k[0] : diagonal <= k[0];
    out[i] = keep ? x[i] : (DATA_TYPE)0;
}

// ReverseSequence: along the time axis, the first lengths[b] elements of batch b reversed, the
// rest kept; a length outside 0..time_dim is clamped into it.
__kernel void reverse_sequence(__global const DATA_TYPE* restrict x,
                               __global const IDX_TYPE* restrict lengths,
                               __global DATA_TYPE* restrict out, const int count,
                               const int batch_stride, const int batch_dim,
                               const int time_stride, const int time_dim)
{
    const int i = get_global_id(0);
    if (i >= count) return;
    const int b = (i / batch_stride) % batch_dim, t = (i / time_stride) % time_dim;
    const long length = clamp((long)lengths[b], 0L, (long)time_dim);
    out[i] = t < length ? x[i + (length - 1 - 2 * t) * time_stride] : x[i];
}
