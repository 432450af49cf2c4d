// Einsum of one or two operands (ops/index/einsum.py): one work-item per output element,
// which walks the contracted labels (those not in the output) and sums the products. Each
// label has a size and a stride in each operand (0 where the operand lacks it or broadcasts
// it; the sum of both axes' strides where the operand repeats it: a diagonal).
//
// meta: per label, output labels first: [size, stride in A, stride in B].
// Baked: DATA_TYPE.
__kernel void einsum(__global const DATA_TYPE* restrict a,
                     __global const DATA_TYPE* restrict b,
                     __global DATA_TYPE* restrict out,
                     __global const int* restrict meta,
                     const int count, const int n_out, const int n_all, const int contracted,
                     const int two)
{
    const int i = get_global_id(0);
    if (i >= count) return;
    long base_a = 0, base_b = 0;
    int rest = i;
    for (int l = n_out - 1; l >= 0; --l) {
        const int c = rest % meta[3 * l];
        rest /= meta[3 * l];
        base_a += (long)c * meta[3 * l + 1];
        base_b += (long)c * meta[3 * l + 2];
    }
    DATA_TYPE acc = (DATA_TYPE)0;
    for (int s = 0; s < contracted; ++s) {
        long at_a = base_a, at_b = base_b;
        int r = s;
        for (int l = n_all - 1; l >= n_out; --l) {
            const int c = r % meta[3 * l];
            r /= meta[3 * l];
            at_a += (long)c * meta[3 * l + 1];
            at_b += (long)c * meta[3 * l + 2];
        }
        acc += two ? a[at_a] * b[at_b] : a[at_a];
    }
    out[i] = acc;
}
