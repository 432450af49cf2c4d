// ScatterElements and ScatterND (ops/index/scatter.py): the output starts as a copy of the
// data (scatter_copy), then the updates are applied in the order ONNX lists them, so that
// duplicate indices reduce deterministically (with reduction none, the last one wins):
//   - scatter_elements: one work-item per line of the updates along the axis (no two lines
//     reach the same output element), walking the line in order;
//   - scatter_nd: one work-item per element of the slice an index tuple names, walking the
//     tuples in order.
// A negative index counts from the end of its axis; an update whose index is still out of range
// is skipped: no write outside the buffer (documented in _launch.py).
//
// Baked: DATA_TYPE, IDX_TYPE, and REDUCE(a, b): the old value a combined with the update b.

__kernel void scatter_copy(__global const DATA_TYPE* restrict data,
                           __global DATA_TYPE* restrict out, const int count)
{
    const int i = get_global_id(0);
    if (i < count) out[i] = data[i];
}

// meta: [rank update dims][rank data strides]
__kernel void scatter_elements(__global const IDX_TYPE* restrict indices,
                               __global const DATA_TYPE* restrict updates,
                               __global DATA_TYPE* restrict out,
                               __global const int* restrict meta,
                               const int lines, const int rank, const int axis,
                               const int axis_dim)
{
    const int line = get_global_id(0);
    if (line >= lines) return;
    // the line's coordinates: every axis but `axis`, in update order
    int rest = line;
    long u = 0, o = 0, u_step = 1;
    long u_stride = 1;
    for (int d = rank - 1; d >= 0; --d) {
        const int n = meta[d];
        if (d == axis) { u_step = u_stride; u_stride *= n; continue; }
        const int c = rest % n;
        rest /= n;
        u += (long)c * u_stride;
        o += (long)c * meta[rank + d];
        u_stride *= n;
    }
    const int length = meta[axis];
    const long o_step = meta[rank + axis];
    for (int j = 0; j < length; ++j, u += u_step) {
        long k = (long)indices[u];
        if (k < 0) k += axis_dim;
        if (k < 0 || k >= axis_dim) continue;
        const long at = o + k * o_step;
        out[at] = REDUCE(out[at], updates[u]);
    }
}

// meta: [m dims of data's first axes][m strides of them]; slice: elements each tuple names
__kernel void scatter_nd(__global const IDX_TYPE* restrict indices,
                         __global const DATA_TYPE* restrict updates,
                         __global DATA_TYPE* restrict out,
                         __global const int* restrict meta,
                         const int slice, const int tuples, const int m)
{
    const int j = get_global_id(0);
    if (j >= slice) return;
    for (int p = 0; p < tuples; ++p) {
        long at = j;
        int inside = 1;
        for (int t = 0; t < m; ++t) {
            const int n = meta[t];
            long k = (long)indices[(long)p * m + t];
            if (k < 0) k += n;
            inside &= (k >= 0 && k < n);
            at += k * meta[m + t];
        }
        if (inside) out[at] = REDUCE(out[at], updates[(long)p * slice + j]);
    }
}

// TensorScatter (a KV cache's update): one work-item per update element [outer, seq, inner],
// written at position write_indices[batch] + t of the cache's axis (of `max_len`), modulo
// max_len when `circular`; a position past the axis (linear mode) is skipped. seq <= max_len,
// so no two updates of one batch meet.
__kernel void tensor_scatter(__global const DATA_TYPE* restrict updates,
                             __global const IDX_TYPE* restrict write_indices,
                             __global DATA_TYPE* restrict out,
                             const int count, const int seq, const int inner,
                             const int max_len, const int per_batch, const int circular,
                             const int has_indices)
{
    const int i = get_global_id(0);
    if (i >= count) return;
    const int r = i % inner, t = (i / inner) % seq, o = i / inner / seq;
    long at = (has_indices ? (long)write_indices[o / per_batch] : 0) + t;
    if (circular) at = ((at % max_len) + max_len) % max_len;
    if (at < 0 || at >= max_len) return;
    out[((long)o * max_len + at) * inner + r] = updates[i];
}
