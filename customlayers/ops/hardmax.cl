/* Hardmax over one axis of a tensor viewed as [OUTER, L, INNER]: 1 where the row has its largest
 * value, 0 elsewhere; of equal largest values the first wins (ONNX opset 13). One work item per
 * (outer, inner) row. Baked: T (float or double); dims are kernel arguments.
 */
__kernel void hardmax(__global const T* restrict input, __global T* restrict output,
                      const int L, const int INNER, const int rows)
{
    const int id = get_global_id(0);
    if (id >= rows)
        return;
    const int base = id / INNER * (L * INNER) + id % INNER;
    int best = 0;
    T m = input[base];
    for (int i = 1; i < L; ++i) {
        const T v = input[base + i * INNER];
        if (v > m) {
            m = v;
            best = i;
        }
    }
    for (int i = 0; i < L; ++i)
        output[base + i * INNER] = i == best ? (T)1 : (T)0;
}
