// One input, one output, one work-item per output element:
//     out[i] = STORE(FN(LOAD(in[SRC_INDEX(i)])))
// Used by the activations (SRC_INDEX(i) = i), Convert, and every op that is a linear view of
// its input (Transpose, Slice, Tile, Broadcast, ShuffleChannels, Pad).
//
// Defined by the binder (ops/_program.py): IN_TYPE, OUT_TYPE, SRC_INDEX(i) (input element read
// for output element i: `(i)` or an op's own expression, which with SRC_TABLE may read the
// argument src_view), and optionally
//   LOAD(v)       value -> compute type (default: as is)
//   FN(x)         the elementwise function (default: identity)
//   STORE(v)      compute type -> OUT_TYPE (default: a C cast)
//   IN_BOUNDS(i)  0 where output element i lies outside the input (Pad), which then gets FILL
//   READ_IN(p, k), IN_VALUE, WRITE_OUT(p, k, v)  how an element is read (as an IN_VALUE) and
//                 written: a half tensor through vload_half/vstore_half_rte as float, which
//                 every device has (half values and arithmetic need cl_khr_fp16)
//   SRC_VIEW      the input read through a linear view instead (view_index.cl, the argument
//                 src_view): rows of `count` outputs, a 2-D range (runs of a row, rows)
// The argument `count` (output elements) and the view are arguments, not defines: one program
// serves every shape of an op.
#include "view_index.cl"
#ifdef SRC_TABLE
#define VIEW_PARAM , __constant const int* restrict src_view
#define VIEW_ARG , src_view
#else
#define VIEW_PARAM
#define VIEW_ARG
#endif
#ifndef READ_IN
#define READ_IN(p, k) ((p)[k])
#define IN_VALUE IN_TYPE
#endif
#ifndef WRITE_OUT
#define WRITE_OUT(p, k, v) ((p)[k] = (v))
#endif
#ifndef LOAD
#define LOAD(v) (v)
#endif
#ifndef PER_ITEM
#define PER_ITEM 1
#endif
#ifndef FN
#define FN(x) (x)
#endif
#ifndef STORE
#define STORE(v) ((OUT_TYPE)(v))
#endif

#include "erf.cl"

// Pad's index maps: a coordinate j outside 0..n-1 mirrored back inside. Periodic, so pads
// wider than the tensor still land inside.
inline int reflect_index(int j, int n)      // mirror at the edge element: 2 1 | 0 1 2 | 1 0
{
    if (n == 1) return 0;
    const int period = 2 * (n - 1);
    j = abs(j) % period;
    return j < n ? j : period - j;
}

inline int symmetric_index(int j, int n)    // mirror between elements: 1 0 | 0 1 2 | 2 1
{
    const int period = 2 * n;
    if (j < 0) j = -j - 1;
    j %= period;
    return j < n ? j : period - 1 - j;
}

inline int wrap_index(int j, int n)         // periodic: 1 2 | 0 1 2 | 0 1
{
    j %= n;
    return j < 0 ? j + n : j;
}

#ifdef PAD_MAP
// Pad's source index for output element i, or -1 where i lies in a constant padding:
// src_view is [rank, out dims[rank], pads_begin[rank], in dims[rank], in strides[rank]] (an
// argument: one program per mode serves every Pad); PAD_MAP(j, n) maps a coordinate j outside
// 0..n-1 back inside (EDGE_PAD, reflect_index, symmetric_index, wrap_index), or is
// CONSTANT_PAD (a j outside stays outside).
#define CONSTANT_PAD(j, n) (j)
#define EDGE_PAD(j, n) clamp((j), 0, (n) - 1)
inline int pad_source(__constant const int* v, uint i)
{
    const int rank = v[0];
    int at = 0;
    for (int k = rank - 1; k >= 0; --k) {
        const uint d = (uint)v[1 + k];
        const int n = v[1 + 2 * rank + k];
        int j = (int)(i % d) - v[1 + rank + k];
        if ((uint)j >= (uint)n)      /* only a coordinate in the padding is mapped */
            j = PAD_MAP(j, n);
        i /= d;
        if ((uint)j >= (uint)n)
            return -1;
        at += j * v[1 + 3 * rank + k];
    }
    return at;
}
#endif

inline void unary_one(__global const IN_TYPE* restrict in, __global OUT_TYPE* restrict out,
                      const uint i VIEW_PARAM)
{
#ifdef IN_BOUNDS
    if (!(IN_BOUNDS(i))) { WRITE_OUT(out, i, FILL); return; }
#endif
    const IN_VALUE v = READ_IN(in, SRC_INDEX(i));
    WRITE_OUT(out, i, STORE(FN(LOAD(v))));
}

// PER_ITEM consecutive outputs per work item (CPU devices, ops/_program.py: items_per_work_item):
// a whole run is a loop of known length that LLVM unrolls and vectorizes, where one output per
// item left PoCL 4-7x slower than a float8 kernel on a ReLU
#ifdef SRC_VIEW
// a run of PER_ITEM outputs of row get_global_id(1), each `count` (the row's length) long
inline void unary_view_one(__global const IN_TYPE* restrict in, __global OUT_TYPE* restrict out,
                           const uint i, const int at)
{
    const IN_VALUE v = READ_IN(in, at);
    WRITE_OUT(out, i, STORE(FN(LOAD(v))));
}

__kernel void unary_map(__global const IN_TYPE* restrict in, __global OUT_TYPE* restrict out,
                        const uint count, __constant const int* restrict src_view)
{
    const uint row = get_global_id(1), first = get_global_id(0) * PER_ITEM;
    if (first >= count)
        return;
    const int start = view_row(src_view, row), step = src_view[2];
    const uint base = row * count;
    if (first + PER_ITEM <= count) {
        #pragma unroll
        for (uint j = 0; j < PER_ITEM; ++j) {
            const uint k = first + j;
            unary_view_one(in, out, base + k, start + (int)k * step);
        }
    } else {
        for (uint k = first; k < count; ++k)
            unary_view_one(in, out, base + k, start + (int)k * step);
    }
}
#else
__kernel void unary_map(__global const IN_TYPE* restrict in, __global OUT_TYPE* restrict out,
                        const uint count VIEW_PARAM)
{
#if PER_ITEM == 1
    const uint i = get_global_id(0);
    if (i < count)
        unary_one(in, out, i VIEW_ARG);
#else
    const uint first = get_global_id(0) * PER_ITEM;
    if (first + PER_ITEM <= count) {
        #pragma unroll
        for (uint k = 0; k < PER_ITEM; ++k)
            unary_one(in, out, first + k VIEW_ARG);
    } else {
        for (uint i = first; i < count; ++i)
            unary_one(in, out, i VIEW_ARG);
    }
#endif
}
#endif
