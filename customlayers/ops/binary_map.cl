// Two inputs with numpy broadcasting, one output, one work-item per output element:
//     out[i] = STORE(OP(LOAD_A(a[..]), LOAD_B(b[..])))
// An input of the output's shape is read at i; with A_VIEW or B_VIEW an input is read through
// the broadcast view of the argument a_view or b_view (view_index.cl: the output's dims and the
// input's strides, 0 on broadcast axes), by rows of `count` outputs on a 2-D range (runs of a
// row, rows). Sizes and views are arguments, not defines: one program serves every shape and
// broadcast of an op.
//
// Defined by ops/_program.py: A_TYPE, B_TYPE, OUT_TYPE, A_VIEW, B_VIEW, OP(a, b),
// and optionally LOAD_A, LOAD_B, STORE (type conversions; default: none / a C cast), and
// READ_A/A_VALUE, READ_B/B_VALUE, WRITE_OUT: a half tensor read and written through
// vload_half/vstore_half_rte as float (as unary_map.cl).
#ifndef READ_A
#define READ_A(p, k) ((p)[k])
#define A_VALUE A_TYPE
#endif
#ifndef READ_B
#define READ_B(p, k) ((p)[k])
#define B_VALUE B_TYPE
#endif
#ifndef WRITE_OUT
#define WRITE_OUT(p, k, v) ((p)[k] = (v))
#endif
#ifndef LOAD_A
#define LOAD_A(v) (v)
#endif
#ifndef PER_ITEM
#define PER_ITEM 1
#endif
#ifndef LOAD_B
#define LOAD_B(v) (v)
#endif
#ifndef STORE
#define STORE(v) ((OUT_TYPE)(v))
#endif
#include "view_index.cl"
#ifdef A_VIEW
#define A_PARAM , __constant const int* restrict a_view
#else
#define A_PARAM
#endif
#ifdef B_VIEW
#define B_PARAM , __constant const int* restrict b_view
#else
#define B_PARAM
#endif

// Integer division and remainder. A zero divisor gives 0, and a divisor of -1 is a negation
// (the remainder 0): the most negative value divided by -1 overflows, which traps x86 CPUs.
// TRUNC_* round toward zero (C, ONNX), FLOOR_* toward minus infinity (Python, OpenVINO's
// Divide with python_division=true and FloorMod: the remainder takes the divisor's sign).
#define MINUS_ONE(T, b) ((T)-1 < (T)0 && (b) == (T)-1)
#define TRUNC_DIV(T, a, b) ((b) == 0 ? (T)0 : MINUS_ONE(T, b) ? (T)(0 - (a)) : (T)((a) / (b)))
#define TRUNC_MOD(T, a, b) ((b) == 0 || MINUS_ONE(T, b) ? (T)0 : (T)((a) % (b)))
#define FLOOR_DIV(T, a, b) (TRUNC_DIV(T, a, b) - \
    (T)(TRUNC_MOD(T, a, b) != 0 && (((a) < 0) != ((b) < 0))))
#define FLOOR_MOD(T, a, b) (TRUNC_MOD(T, a, b) + \
    (TRUNC_MOD(T, a, b) != 0 && ((TRUNC_MOD(T, a, b) < 0) != ((b) < 0)) ? (b) : (T)0))
// the same remainder of floats: fmod's, moved to the divisor's sign
#define FLOAT_FLOOR_MOD(a, b) (fmod(a, b) != 0 && ((fmod(a, b) < 0) != ((b) < 0)) \
    ? fmod(a, b) + (b) : fmod(a, b))

// An integer power, exact (ONNX Runtime's double pow is exact where the result fits; float's
// pow is not past 2**24). Wraps as unsigned arithmetic does on overflow. A negative exponent
// leaves the integer part of 1 / a**-b: 0, except for a base of 1 or -1.
inline long int_pow(long a, long b)
{
    if (b < 0)
        return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
    ulong result = 1, base = (ulong)a;
    for (ulong e = (ulong)b; e != 0; e >>= 1) {
        if (e & 1)
            result *= base;
        base *= base;
    }
    return (long)result;
}

#if defined(A_VIEW) || defined(B_VIEW)
inline void binary_one(__global const A_TYPE* restrict a, __global const B_TYPE* restrict b,
                       __global OUT_TYPE* restrict out, const uint i, const int ai, const int bi)
{
    const A_VALUE va = READ_A(a, ai);
    const B_VALUE vb = READ_B(b, bi);
    WRITE_OUT(out, i, STORE(OP(LOAD_A(va), LOAD_B(vb))));
}

// n outputs of the row from `first`, the inputs `sa` and `sb` apart; VIEW_RUN: a whole run
#define VIEW_LOOP(n, sa, sb) \
    for (uint j = 0; j < (n); ++j) \
        binary_one(a, b, out, base + first + j, a0 + (int)(first + j) * (sa), \
                   b0 + (int)(first + j) * (sb))
#define VIEW_RUN(sa, sb) _Pragma("unroll") VIEW_LOOP(PER_ITEM, sa, sb)

// a run of PER_ITEM outputs of row get_global_id(1), each `count` (the row's length) long; an
// input without a view is dense: its row starts at row * count, step 1
__kernel void binary_map(__global const A_TYPE* restrict a, __global const B_TYPE* restrict b,
                         __global OUT_TYPE* restrict out, const uint count A_PARAM B_PARAM)
{
    const uint row = get_global_id(1), first = get_global_id(0) * PER_ITEM;
    if (first >= count)
        return;
    const uint base = row * count;
#ifdef A_VIEW
    const int a0 = view_row(a_view, row), as = a_view[2];
#else
    const int a0 = (int)base, as = 1;
#endif
#ifdef B_VIEW
    const int b0 = view_row(b_view, row), bs = b_view[2];
#else
    const int b0 = (int)base, bs = 1;
#endif
    /* the common steps as constants, so that each loop reads contiguous runs or one value
     * and vectorizes (a step known only at run time left PoCL 3x slower on a bias Add) */
    if (first + PER_ITEM <= count) {
        if ((as == 1) & (bs == 0))
            VIEW_RUN(1, 0);
        else if ((as == 0) & (bs == 1))
            VIEW_RUN(0, 1);
        else if ((as == 1) & (bs == 1))
            VIEW_RUN(1, 1);
        else
            VIEW_RUN(as, bs);
    } else {
        VIEW_LOOP(count - first, as, bs);
    }
}
#else
inline void binary_dense(__global const A_TYPE* restrict a, __global const B_TYPE* restrict b,
                         __global OUT_TYPE* restrict out, const uint i)
{
    const A_VALUE va = READ_A(a, i);
    const B_VALUE vb = READ_B(b, i);
    WRITE_OUT(out, i, STORE(OP(LOAD_A(va), LOAD_B(vb))));
}

// PER_ITEM consecutive outputs per work item: as unary_map.cl
__kernel void binary_map(__global const A_TYPE* restrict a, __global const B_TYPE* restrict b,
                         __global OUT_TYPE* restrict out, const uint count)
{
#if PER_ITEM == 1
    const uint i = get_global_id(0);
    if (i < count)
        binary_dense(a, b, out, i);
#else
    const uint first = get_global_id(0) * PER_ITEM;
    if (first + PER_ITEM <= count) {
        #pragma unroll
        for (uint k = 0; k < PER_ITEM; ++k)
            binary_dense(a, b, out, first + k);
    } else {
        for (uint i = first; i < count; ++i)
            binary_dense(a, b, out, i);
    }
#endif
}
#endif
