/* MaxPool / AvgPool: one work item per output element, the window read from global memory
 * (each input element is read by at most (KH/SY)*(KW/SX) neighbours, which caches serve).
 * NDRange: (OW, OH, N * C). Needs: IH IW OH OW KH KW SY SX DY DX PY PX, POOL_MAX or POOL_AVG,
 * for AvgPool COUNT_PAD (divide by the whole window, padding included), for MaxPool with an
 * index output WITH_INDICES, INDEX_T and AXIS_SPAN (indices are flat from the `axis` dim on).
 * A window with no input element in it (possible with rounding_type=ceil) gives 0.
 */
__kernel void pool(__global const float* restrict input, __global float* restrict output
#if WITH_INDICES
                   , __global INDEX_T* restrict indices
#endif
                   )
{
    const int ox = get_global_id(0), oy = get_global_id(1), z = get_global_id(2);
    if (ox >= OW || oy >= OH)
        return;
    __global const float* in = input + z * (IH * IW);
    const int iy0 = oy * SY - PY, ix0 = ox * SX - PX;
    const int out_at = (z * OH + oy) * OW + ox;
#if POOL_MAX
    float best = -INFINITY;
    int best_at = -1;
#else
    float sum = 0.0f;
    int count = 0;
#endif
    /* unrolling a large window (60x80 in ONNX's conformance cases) takes PoCL minutes */
#if KH * KW <= 64
    #pragma unroll
#endif
    for (int ky = 0; ky < KH; ++ky) {
        const int iy = iy0 + ky * DY;
        if ((uint)iy >= (uint)IH)
            continue;
#if KH * KW <= 64
        #pragma unroll
#endif
        for (int kx = 0; kx < KW; ++kx) {
            const int ix = ix0 + kx * DX;
            if ((uint)ix >= (uint)IW)
                continue;
            const float v = in[iy * IW + ix];
#if POOL_MAX
            if (best_at < 0 || v > best) {
                best = v;
                best_at = iy * IW + ix;
            }
#else
            sum += v;
            ++count;
#endif
        }
    }
#if POOL_MAX
    output[out_at] = best_at < 0 ? 0.0f : best;
#if WITH_INDICES
    indices[out_at] = best_at < 0 ? (INDEX_T)0
                                  : (INDEX_T)(((long)z * (IH * IW) + best_at) % AXIS_SPAN);
#endif
#else
    const int divisor = COUNT_PAD ? KH * KW : count;
    output[out_at] = count ? sum / (float)divisor : 0.0f;
#endif
}
