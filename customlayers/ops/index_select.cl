// ArgMax/ArgMin and TopK (ops/index/select.py) along one axis of a tensor seen as
// [outer, n, inner]; the sizes and the direction are kernel arguments.
//
// Baked: DATA_TYPE, INDEX_TYPE (of the indices written).

// One work-item per output element (outer x inner): the first (or, with `last`, the last)
// index of the largest (`largest`) or smallest value along the axis.
__kernel void arg_reduce(__global const DATA_TYPE* restrict data,
                         __global INDEX_TYPE* restrict out,
                         const int count, const int n, const int inner,
                         const int largest, const int last)
{
    const int i = get_global_id(0);
    if (i >= count) return;
    const long base = (long)(i / inner) * n * inner + i % inner;
    DATA_TYPE best = data[base];
    int at = 0;
    for (int j = 1; j < n; ++j) {
        const DATA_TYPE x = data[base + (long)j * inner];
        if ((largest ? x > best : x < best) || (last && x == best)) {
            best = x;
            at = j;
        }
    }
    out[i] = (INDEX_TYPE)at;
}

// TopK's order, a total one as ONNX Runtime's: NaN above every number, NaNs equal among
// themselves (plain comparisons with a NaN are all false: ranks collided, slots of the output
// stayed unwritten, and a pick after a NaN found nothing). For integers x != x is false.
#define TK_GT(y, x) ((y) > (x) || ((y) != (y) && (x) == (x)))
#define TK_LT(y, x) TK_GT(x, y)
#define TK_EQ(y, x) ((y) == (x) || ((y) != (y) && (x) != (x)))

// One work-item per input element: its rank in its line, the number of elements that come
// before it in ONNX's order (larger, or smaller with `largest` 0; among equal values the lower
// index first). The k first ranks are written, sorted, at their rank.
__kernel void top_k(__global const DATA_TYPE* restrict data,
                    __global DATA_TYPE* restrict values,
                    __global INDEX_TYPE* restrict indices,
                    const int count, const int n, const int inner, const int k,
                    const int largest)
{
    const int i = get_global_id(0);
    if (i >= count) return;
    const int r = i % inner, j = (i / inner) % n, o = i / inner / n;
    const long base = (long)o * n * inner + r;
    const DATA_TYPE x = data[i];
    int rank = 0;
    for (int m = 0; m < n && rank < k; ++m) {
        const DATA_TYPE y = data[base + (long)m * inner];
        rank += (largest ? TK_GT(y, x) : TK_LT(y, x)) || (TK_EQ(y, x) && m < j);
    }
    if (rank >= k) return;
    const long at = ((long)o * k + rank) * inner + r;
    values[at] = x;
    indices[at] = (INDEX_TYPE)j;
}

// TopK for a small k: one work-item per line (outer x inner) picks the k elements in k passes,
// each the first in ONNX's order among those after the one picked before: O(k n) per line
// where top_k ranks every element against its whole line, O(n n).
__kernel void top_k_lines(__global const DATA_TYPE* restrict data,
                          __global DATA_TYPE* restrict values,
                          __global INDEX_TYPE* restrict indices,
                          const int lines, const int n, const int inner, const int k,
                          const int largest)
{
    const int line = get_global_id(0);
    if (line >= lines) return;
    const int o = line / inner, r = line % inner;
    const long base = (long)o * n * inner + r;
    DATA_TYPE last = (DATA_TYPE)0;
    int last_at = -1;
    for (int rank = 0; rank < k; ++rank) {
        int at = -1;
        DATA_TYPE best = (DATA_TYPE)0;
        for (int m = 0; m < n; ++m) {
            const DATA_TYPE y = data[base + (long)m * inner];
            // after the last pick: worse than it, or equal and of a higher index
            const int after = last_at < 0 || (largest ? TK_LT(y, last) : TK_GT(y, last)) ||
                              (TK_EQ(y, last) && m > last_at);
            if (after && (at < 0 || (largest ? TK_GT(y, best) : TK_LT(y, best)))) {
                best = y;
                at = m;
            }
        }
        const long out = ((long)o * k + rank) * inner + r;
        values[out] = best;
        indices[out] = (INDEX_TYPE)at;
        last = best;
        last_at = at;
    }
}
