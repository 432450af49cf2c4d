// Two inputs with numpy broadcasting, one output, one work-item per output element:
//     out[i] = STORE(OP(LOAD_A(a[A_INDEX(i)]), LOAD_B(b[B_INDEX(i)])))
// A_INDEX/B_INDEX are `(i)` for an input of the output's shape, else the broadcast index map
// with the output's dims and the input's strides (0 on broadcast axes) baked in.
//
// Baked by ops/eltwise.py: COUNT, A_TYPE, B_TYPE, OUT_TYPE, A_INDEX(i), B_INDEX(i), OP(a, b),
// and optionally LOAD_A, LOAD_B, STORE (type conversions; default: none / a C cast).
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

// Python (floor) division of integers, as OpenVINO's Divide with python_division=true.
// Division by zero gives 0 instead of trapping the device.
#define FLOOR_DIV(T, a, b) ((b) == 0 ? (T)0 : \
    (T)((a) / (b) - ((((a) % (b)) != 0) && (((a) < 0) != ((b) < 0)))))
#define TRUNC_DIV(T, a, b) ((b) == 0 ? (T)0 : (T)((a) / (b)))

inline void binary_one(__global const A_TYPE* restrict a, __global const B_TYPE* restrict b,
                       __global OUT_TYPE* restrict out, const uint i)
{
    const A_TYPE va = a[A_INDEX(i)];
    const B_TYPE vb = b[B_INDEX(i)];
    out[i] = STORE(OP(LOAD_A(va), LOAD_B(vb)));
}

// PER_ITEM consecutive outputs per work item: as unary_map.cl
__kernel void binary_map(__global const A_TYPE* restrict a, __global const B_TYPE* restrict b,
                         __global OUT_TYPE* restrict out)
{
#if PER_ITEM == 1
    const uint i = get_global_id(0);
    if (i < COUNT)
        binary_one(a, b, out, i);
#else
    const uint first = get_global_id(0) * PER_ITEM;
    if (first + PER_ITEM <= COUNT) {
        #pragma unroll
        for (uint k = 0; k < PER_ITEM; ++k)
            binary_one(a, b, out, first + k);
    } else {
        for (uint i = first; i < COUNT; ++i)
            binary_one(a, b, out, i);
    }
#endif
}
