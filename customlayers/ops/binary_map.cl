// Two inputs with numpy broadcasting, one output, one work-item per output element:
//     out[i] = STORE(OP(LOAD_A(a[A_INDEX(i)]), LOAD_B(b[B_INDEX(i)])))
// A_INDEX/B_INDEX are `(i)` for an input of the output's shape, else (A_VIEW, B_VIEW) the
// broadcast view of the arguments a_view, b_view (view_index.cl): the output's dims and the
// input's strides (0 on broadcast axes). They and `count` are arguments, not defines: one
// program serves every shape and broadcast of an op.
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
#define A_INDEX(i) view_index(a_view, i)
#define A_PARAM , __constant const int* restrict a_view
#define A_ARG , a_view
#else
#define A_INDEX(i) (i)
#define A_PARAM
#define A_ARG
#endif
#ifdef B_VIEW
#define B_INDEX(i) view_index(b_view, i)
#define B_PARAM , __constant const int* restrict b_view
#define B_ARG , b_view
#else
#define B_INDEX(i) (i)
#define B_PARAM
#define B_ARG
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

inline void binary_one(__global const A_TYPE* restrict a, __global const B_TYPE* restrict b,
                       __global OUT_TYPE* restrict out, const uint i A_PARAM B_PARAM)
{
    const A_VALUE va = READ_A(a, A_INDEX(i));
    const B_VALUE vb = READ_B(b, B_INDEX(i));
    WRITE_OUT(out, i, STORE(OP(LOAD_A(va), LOAD_B(vb))));
}

// PER_ITEM consecutive outputs per work item: as unary_map.cl
__kernel void binary_map(__global const A_TYPE* restrict a, __global const B_TYPE* restrict b,
                         __global OUT_TYPE* restrict out, const uint count A_PARAM B_PARAM)
{
#if PER_ITEM == 1
    const uint i = get_global_id(0);
    if (i < count)
        binary_one(a, b, out, i A_ARG B_ARG);
#else
    const uint first = get_global_id(0) * PER_ITEM;
    if (first + PER_ITEM <= count) {
        #pragma unroll
        for (uint k = 0; k < PER_ITEM; ++k)
            binary_one(a, b, out, first + k A_ARG B_ARG);
    } else {
        for (uint i = first; i < count; ++i)
            binary_one(a, b, out, i A_ARG B_ARG);
    }
#endif
}
