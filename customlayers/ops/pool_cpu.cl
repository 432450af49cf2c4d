/* MaxPool / AvgPool for CPU devices: one work item pools RB output rows of one plane, looping
 * over the row itself, in groups of one work item. pooling.cl's one item per output element
 * took PoCL 10 ns per output (SqueezeNet's first MaxPool: 16-30 ms, half the model's time): its
 * per-item window checks do not vectorize across items, and the work-item loop around them
 * costs more than the window. Here the item is plain scalar code with no loop around it.
 * NDRange: (ceil(OH/RB), N * C * OD), local (1, 1). Needs pooling.cl's defines and RB.
 */
__kernel void pool_cpu(__global const float* restrict input, __global float* restrict output
#if WITH_INDICES
                       , __global INDEX_T* restrict indices
#endif
                       )
{
    const int z = get_global_id(1);
    const int plane = z / OD, oz = z % OD;
    __global const float* in = input + plane * (ID * IH * IW);
    const int iz0 = oz * SZ - PZ;
#if WITH_INDICES
    /* AXIS_SPAN is a whole number of planes: the plane's part of the index, taken modulo once
     * here, plus an offset inside the plane never reaches it (a 64-bit modulo per output cost
     * more than the window) */
    const INDEX_T plane_base = (INDEX_T)(((long)plane * (ID * IH * IW)) % AXIS_SPAN);
#endif
    const int y_end = min(OH, ((int)get_global_id(0) + 1) * RB);
    for (int oy = get_global_id(0) * RB; oy < y_end; ++oy) {
        const int iy0 = oy * SY - PY;
        __global float* out = output + (z * OH + oy) * OW;
        for (int ox = 0; ox < OW; ++ox) {
            const int ix0 = ox * SX - PX;
#if POOL_MAX
            float best = -INFINITY;
            int best_at = -1;
#else
            float sum = 0.0f;
            int count = 0;
#endif
            for (int kz = 0; kz < KD; ++kz) {
                const int iz = iz0 + kz * DZ;
                if ((uint)iz >= (uint)ID)
                    continue;
                for (int ky = 0; ky < KH; ++ky) {
                    const int iy = iy0 + ky * DY;
                    if ((uint)iy >= (uint)IH)
                        continue;
                    __global const float* row = in + (iz * IH + iy) * IW;
                    for (int kx = 0; kx < KW; ++kx) {
                        const int ix = ix0 + kx * DX;
                        if ((uint)ix >= (uint)IW)
                            continue;
                        const float v = row[ix];
#if POOL_MAX
                        /* as pooling.cl: the first element, then strictly greater ones (NaN
                         * first stays, NaN later is skipped) */
                        if (best_at < 0 || v > best) {
                            best = v;
                            best_at = (iz * IH + iy) * IW + ix;
                        }
#else
                        sum += v;
                        ++count;
#endif
                    }
                }
            }
#if POOL_MAX
            out[ox] = best_at < 0 ? 0.0f : best;
#if WITH_INDICES
            indices[(z * OH + oy) * OW + ox] = best_at < 0 ? (INDEX_T)0
                                                           : plane_base + (INDEX_T)best_at;
#endif
#else
            const int divisor = COUNT_PAD ? KD * KH * KW : count;
            out[ox] = count ? sum / (float)divisor : 0.0f;
#endif
        }
    }
}
