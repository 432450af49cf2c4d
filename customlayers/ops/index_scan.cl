// CumSum and CumProd (ops/index/scan.py) along one axis of a tensor seen as [outer, n, inner]:
// one work-item per line (outer x inner), walking it in order (or backwards with `reverse`);
// with `exclusive` each output holds what came before its element, not including it.
//
// Baked: DATA_TYPE (also the type of the running value, as ONNX Runtime accumulates),
// COMBINE(a, b), IDENTITY.
__kernel void cumulate(__global const DATA_TYPE* restrict data,
                       __global DATA_TYPE* restrict out,
                       const int lines, const int n, const int inner,
                       const int exclusive, const int reverse)
{
    const int line = get_global_id(0);
    if (line >= lines) return;
    const long base = (long)(line / inner) * n * inner + line % inner;
    DATA_TYPE acc = IDENTITY;
    for (int t = 0; t < n; ++t) {
        const long at = base + (long)(reverse ? n - 1 - t : t) * inner;
        const DATA_TYPE x = data[at];
        if (exclusive) { out[at] = acc; acc = COMBINE(acc, x); }
        else { acc = COMBINE(acc, x); out[at] = acc; }
    }
}
