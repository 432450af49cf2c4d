/* MaxPool / AvgPool: one work item per output element, the window read from global memory
 * (each input element is read by at most (KH/SY)*(KW/SX) neighbours, which caches serve).
 * NDRange: (OW, OH, N * C * OD). The geometry is the argument `geo` (pool_geometry.cl names its
 * entries ID IH IW OD OH OW KD KH KW SZ SY SX DZ DY DX PZ PY PX EZ EY EX; a 1-D or 2-D window
 * has the leading ones at 1, pads at 0), so one program serves every shape. Defines: POOL_MAX
 * (else average), for AvgPool COUNT_PAD (divide by the window's taps inside [-P, E): padding
 * included, up to EZ EY EX, the end of pads_end or past every window), for MaxPool with an
 * index output WITH_INDICES and INDEX_T (indices are flat from the `axis` dim on: the argument
 * axis_span). A window with no input element in it (possible with rounding_type=ceil) gives 0.
 * DATA_T: the element type of a MaxPool's input and output (ONNX's int8 and uint8 too; an
 * AvgPool is float).
 */
#include "pool_geometry.cl"
#ifndef DATA_T
#define DATA_T float
#endif
/* The taps of a window axis (k taps from i0, d apart) inside [lo, hi): what an AvgPool that
 * counts padding divides by (hi is where pads_end ends, or past every window) */
inline int taps_within(int i0, int k, int d, int lo, int hi)
{
    int n = 0;
    for (int j = 0; j < k; ++j)
        n += i0 + j * d >= lo && i0 + j * d < hi;
    return n;
}

__kernel void pool(__global const DATA_T* restrict input, __global DATA_T* restrict output,
                   __constant const int* restrict geo
#if WITH_INDICES
                   , __global INDEX_T* restrict indices, const long axis_span
#endif
                   )
{
    POOL_GEOMETRY(geo);
    const int ox = get_global_id(0), oy = get_global_id(1), z = get_global_id(2);
    if (ox >= OW || oy >= OH)
        return;
    const int plane = z / OD, oz = z % OD;       /* z = (n * C + c) * OD + oz */
    __global const DATA_T* in = input + plane * (ID * IH * IW);
    const int iz0 = oz * SZ - PZ, iy0 = oy * SY - PY, ix0 = ox * SX - PX;
    const int out_at = (z * OH + oy) * OW + ox;
#if POOL_MAX
    DATA_T best = (DATA_T)0;      /* the first tap inside the input replaces it */
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
        for (int kx = 0; kx < KW; ++kx) {
            const int ix = ix0 + kx * DX;
            if ((uint)ix >= (uint)IW)
                continue;
            const int at = (iz * IH + iy) * IW + ix;
            const DATA_T v = in[at];
#if POOL_MAX
            if (best_at < 0 || v > best) {
                best = v;
                best_at = at;
            }
#else
            sum += v;
            ++count;
#endif
        }
    }
    }
#if POOL_MAX
    output[out_at] = best_at < 0 ? (DATA_T)0 : best;
#if WITH_INDICES
    indices[out_at] = best_at < 0 ? (INDEX_T)0
                                  : (INDEX_T)(((long)plane * (ID * IH * IW) + best_at) % axis_span);
#endif
#else
    const int divisor = COUNT_PAD ? taps_within(iz0, KD, DZ, -PZ, EZ) *
        taps_within(iy0, KH, DY, -PY, EY) * taps_within(ix0, KW, DX, -PX, EX) : count;
    output[out_at] = count ? sum / (float)divisor : 0.0f;
#endif
}
