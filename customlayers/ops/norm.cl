/* LRN: out = x / (BIAS + SCALE * sum(window of x^2))^BETA, SCALE = alpha / size^len(axes).
 * The window spans [i - HALFn, i + HALFn] (clipped to the tensor) along each axis n listed in
 * the layer's axes input, and only i along the others (HALFn = 0).
 * One work item per element; NDRange: (D3, D2, D0 * D1). The sizes are the argument `geo`
 * (D0..D3, HALF0..HALF3), BIAS, SCALE and BETA arguments too: one program serves every LRN.
 */
#define BIAS bias
#define SCALE scale
#define BETA beta
/* the sizes as private constants, read once at the top of each kernel (a name that read the
 * buffer at each use would be loaded again after every store to the output) */
#define LRN_GEOMETRY(g) const int \
    D0 = g[0], D1 = g[1], D2 = g[2], D3 = g[3], HALF0 = g[4], HALF1 = g[5], \
    HALF2 = g[6], HALF3 = g[7]
__kernel void lrn(__global const float* restrict input, __global float* restrict output,
                  __constant const int* restrict geo, const float bias, const float scale,
                  const float beta)
{
    LRN_GEOMETRY(geo);
    const int i3 = get_global_id(0), i2 = get_global_id(1), z = get_global_id(2);
    const int i0 = z / D1, i1 = z % D1;
    float sum = 0.0f;
    for (int a = max(i0 - HALF0, 0); a <= min(i0 + HALF0, D0 - 1); ++a)
        for (int b = max(i1 - HALF1, 0); b <= min(i1 + HALF1, D1 - 1); ++b)
            for (int c = max(i2 - HALF2, 0); c <= min(i2 + HALF2, D2 - 1); ++c)
                for (int d = max(i3 - HALF3, 0); d <= min(i3 + HALF3, D3 - 1); ++d) {
                    const float v = input[((a * D1 + b) * D2 + c) * D3 + d];
                    sum = mad(v, v, sum);
                }
    const int at = (z * D2 + i2) * D3 + i3;
    output[at] = input[at] * pow(BIAS + SCALE * sum, -BETA);
}

/* CPU devices, no window along the last axis (HALF3 == 0: across channels, as every LRN of
 * the models): one work item per (i0, i1, i2) row, the row as float8 runs, so the squares, the
 * sums and pow() run on 8 lanes at once (one item per output, with pow() per item, took PoCL
 * 150 ns per output: Inception v1's two LRNs were 60% of its time).
 * NDRange: (D2, D0 * D1), local (1, 1).
 * BETA_3_4 (beta == 0.75, the models' value): x^-0.75 as rsqrt(x) * rsqrt(sqrt(x)), within a
 * few ulp like pow() (whose OpenCL bound is 16 ulp) and several times faster on PoCL. */
#if BETA_3_4
#define POW_MINUS_BETA(x) (rsqrt(x) * rsqrt(sqrt(x)))
#else
#define POW_MINUS_BETA(x) pow((x), -BETA)
#endif
__kernel void lrn_cpu(__global const float* restrict input, __global float* restrict output,
                      __constant const int* restrict geo, const float bias, const float scale,
                      const float beta)
{
    LRN_GEOMETRY(geo);
    const int i2 = get_global_id(0), z = get_global_id(1);
    const int i0 = z / D1, i1 = z % D1;
    const int a0 = max(i0 - HALF0, 0), a1 = min(i0 + HALF0, D0 - 1);
    const int b0 = max(i1 - HALF1, 0), b1 = min(i1 + HALF1, D1 - 1);
    const int c0 = max(i2 - HALF2, 0), c1 = min(i2 + HALF2, D2 - 1);
    __global const float* row = input + (z * D2 + i2) * D3;
    __global float* out = output + (z * D2 + i2) * D3;
    int x = 0;
    /* float8 runs; a row of 8 or more whose length is not a multiple of 8 ends with a run
       moved back to end at its last element, over outputs already stored (the same values
       again: each output depends on its own column only), not up to 7 scalar ones, whose
       pow() cost as much as the runs (Inception v1's 55-wide rows: 6 runs and 7 scalars) */
    for (; x < D3 && D3 >= 8; x += 8) {
        x = min(x, D3 - 8);
        float8 sum = (float8)0.0f;
        for (int a = a0; a <= a1; ++a)
            for (int b = b0; b <= b1; ++b)
                for (int c = c0; c <= c1; ++c) {
                    const float8 v = vload8(0, input + ((a * D1 + b) * D2 + c) * D3 + x);
                    sum = mad(v, v, sum);
                }
        vstore8(vload8(0, row + x) * POW_MINUS_BETA((float8)BIAS + (float8)SCALE * sum),
                0, out + x);
    }
    for (; x < D3; ++x) {                   /* rows shorter than 8 */
        float sum = 0.0f;
        for (int a = a0; a <= a1; ++a)
            for (int b = b0; b <= b1; ++b)
                for (int c = c0; c <= c1; ++c) {
                    const float v = input[((a * D1 + b) * D2 + c) * D3 + x];
                    sum = mad(v, v, sum);
                }
        out[x] = row[x] * POW_MINUS_BETA(BIAS + SCALE * sum);
    }
}
