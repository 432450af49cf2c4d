/* LpNormalization: each row along one axis of a tensor viewed as [OUTER, L, INNER] divided by
 * its L1 norm (P == 1: the sum of |x|) or L2 norm (P == 2: the root of the sum of squares).
 * One work item per (outer, inner) row. Baked: T (float or double); p and the dims are kernel
 * arguments (one program for both p: its branch is the same for every item).
 * A row of zeros stays zeros (ONNX's reference: 0 where the norm is 0, not 0 / 0).
 */
__kernel void lp_normalize(__global const T* restrict input, __global T* restrict output,
                           const int L, const int INNER, const int rows, const int p)
{
    const int id = get_global_id(0);
    if (id >= rows)
        return;
    const int base = id / INNER * (L * INNER) + id % INNER;
    T s = (T)0;
    for (int i = 0; i < L; ++i) {
        const T v = input[base + i * INNER];
        s += p == 1 ? fabs(v) : v * v;
    }
    if (p == 2)
        s = sqrt(s);
    for (int i = 0; i < L; ++i)
        output[base + i * INNER] = s == (T)0 ? (T)0 : input[base + i * INNER] / s;
}
