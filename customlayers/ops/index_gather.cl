// GatherElements and GatherND (ops/index/gather.py): one work-item per output element. The
// shapes come as kernel arguments (`meta`, a small constant buffer of ints, and scalars), so
// one program serves every shape of one element type.
//
// Indices are read as long; a negative index counts from the end of its axis (ONNX). An index
// still out of range reads 0: the access is never made outside the buffer (documented in
// gather.py).
//
// Baked: DATA_TYPE, IDX_TYPE (the element types).
#ifndef IDX_TYPE
#define IDX_TYPE long
#endif

// GatherElements: out has the shape of the indices; out[c] = data[c with c[axis] = idx[c]].
// meta: [rank out dims][rank data strides]; axis_dim: data's size on the axis.
__kernel void gather_elements(__global const DATA_TYPE* restrict data,
                              __global const IDX_TYPE* restrict indices,
                              __global DATA_TYPE* restrict out,
                              __global const int* restrict meta,
                              const int count, const int rank, const int axis,
                              const int axis_dim)
{
    const int i = get_global_id(0);
    if (i >= count) return;
    long k = (long)indices[i];
    if (k < 0) k += axis_dim;
    if (k < 0 || k >= axis_dim) { out[i] = (DATA_TYPE)0; return; }
    int rest = i;
    long offset = 0;
    for (int d = rank - 1; d >= 0; --d) {
        const int n = meta[d];
        const int c = d == axis ? (int)k : rest % n;
        rest /= n;
        offset += (long)c * meta[rank + d];
    }
    out[i] = data[offset];
}

// GatherND with batch_dims b: the indices are [batch..., rest..., m]; out element i is
// (p, j): p the index tuple (of `tuples`), j the element of the slice it selects (of `inner`).
// The tuple names data's axes b..b+m-1 within the batch p / per_batch.
// meta: [m dims of data's axes b..][m strides of them]; batch_stride: data elements per batch.
__kernel void gather_nd(__global const DATA_TYPE* restrict data,
                        __global const IDX_TYPE* restrict indices,
                        __global DATA_TYPE* restrict out,
                        __global const int* restrict meta,
                        const int count, const int inner, const int m,
                        const int per_batch, const int batch_stride)
{
    const int i = get_global_id(0);
    if (i >= count) return;
    const int p = i / inner, j = i % inner;
    long offset = (long)(p / per_batch) * batch_stride + j;
    for (int t = 0; t < m; ++t) {
        const int n = meta[t];
        long k = (long)indices[(long)p * m + t];
        if (k < 0) k += n;
        if (k < 0 || k >= n) { out[i] = (DATA_TYPE)0; return; }
        offset += k * meta[m + t];
    }
    out[i] = data[offset];
}

// Compress with a condition known when the plan is compiled: the positions it picks along
// the axis (`picked`, ascending) gathered; the input seen as [outer, axis_dim, inner].
__kernel void gather_picked(__global const DATA_TYPE* restrict data,
                            __global DATA_TYPE* restrict out,
                            __global const int* restrict picked,
                            const int count, const int inner, const int n_picked,
                            const int axis_dim)
{
    const int i = get_global_id(0);
    if (i >= count) return;
    const int r = i % inner, p = (i / inner) % n_picked, o = i / inner / n_picked;
    out[i] = data[((long)o * axis_dim + picked[p]) * inner + r];
}
