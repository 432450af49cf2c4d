/* LRN: out = x / (BIAS + SCALE * sum(window of x^2))^BETA, SCALE = alpha / size^len(axes).
 * The window spans [i - HALFn, i + HALFn] (clipped to the tensor) along each axis n listed in
 * the layer's axes input, and only i along the others (HALFn = 0).
 * One work item per element; NDRange: (D3, D2, D0 * D1). Needs D0..D3, HALF0..HALF3, BIAS,
 * SCALE, BETA.
 */
__kernel void lrn(__global const float* restrict input, __global float* restrict output)
{
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
