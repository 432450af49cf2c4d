/* MaxPool / AvgPool for CPU devices: one work item pools RB output rows of one plane, looping
 * over the row itself, in groups of one work item. pooling.cl's one item per output element
 * took PoCL 10 ns per output (SqueezeNet's first MaxPool: 16-30 ms, half the model's time): its
 * per-item window checks do not vectorize across items, and the work-item loop around them
 * costs more than the window. Here the item is plain scalar code with no loop around it.
 * NDRange: (ceil(OH/RB), N * C * OD), local (1, 1). Needs pooling.cl's defines and
 * arguments (the geometry `geo` with RB, its entry 21).
 */
/* Outputs whose windows lie inside the input along the row are pooled in runs of 8 as float8
 * (of 4 as float4 where a row has fewer than 8 such outputs: Inception's 6x6 planes), the
 * last run of a row's inside outputs moved back to end at the last one, overlapping the one
 * before it: Inception's 13x13 and 27x27 MaxPools of stride 1 had 3-6 scalar outputs a row.
 * The taps' loads of a run are contiguous (stride 2: the even lanes of 15 or 7 floats, never a
 * float past the last tap), and each tap updates all lanes with the scalar code's own rule
 * (max: the first tap, then a strictly greater one, so a NaN met first stays and a later NaN
 * is skipped; avg: the sum in the same order), so every output equals the scalar path's bit
 * for bit. An AvgPool's rows must lie inside the input; a MaxPool's rows only need one row
 * inside, the others clamped into the input (dilation 1: a clamped row repeats one of the
 * window's own inside rows, never strictly greater, and the first row is then the first inside
 * one, as pool_one's order has it): the top and bottom rows of a plane are runs too, not
 * scalar windows (Inception v1's MaxPools, on PoCL: 4.2 ms against 0.5 for OpenVINO before).
 * 2-D windows of stride 1 or 2 without indices only (a MaxPool's unused index output is
 * dropped before compiling).
 */
#include "pool_geometry.cl"
/* the first and last output columns whose windows lie inside the row */
#define OX_INSIDE_FIRST ((PX + SX - 1) / SX)
#define OX_INSIDE_LAST ((IW - KW + PX) / SX)
/* a run's taps: contiguous (sx 1) or every other float of 15 or 7 (sx 2) */
#define LOAD_RUN8(p, sx) ((sx) == 1 ? vload8(0, p) : __builtin_shufflevector(vload8(0, p), \
                                              vload8(0, (p) + 7), 0, 2, 4, 6, 9, 11, 13, 15))
#define LOAD_RUN4(p, sx) ((sx) == 1 ? vload4(0, p) : __builtin_shufflevector(vload4(0, p), \
                                              vload4(0, (p) + 3), 0, 2, 5, 7))

/* A run of outputs (a float8 or float4 `vec`, its loads LOAD) of a window of kh x kw taps
 * from column `col` (the first output's first tap) of the rows iy0 + ky * dy, each clamped into
 * [0, ih) (a no-op for an AvgPool, whose rows lie inside), `iw` floats apart. Always inlined:
 * called with constant kh, kw, sx (the common windows below) its loops unroll into straight
 * code as a build for one window did; with the layer's own values it is the loop over any
 * window. */
#if POOL_MAX
#define RUN_FIRST(vec, LOAD, p, sx) LOAD(p, sx)
#define RUN_ADD(best, v) ((best) = select((best), (v), isgreater((v), (best))))
#define RUN_END(vec, best, kh, kw) (best)
#else
#define RUN_FIRST(vec, LOAD, p, sx) ((vec)0.0f + LOAD(p, sx))
#define RUN_ADD(best, v) ((best) += (v))
#define RUN_END(vec, best, kh, kw) ((best) / (float)((kh) * (kw)))
#endif
/* (RUN_FIRST of a value already loaded) */
#define LOAD_T0(v, unused) (v)
#define POOL_RUN(name, vec, LOAD) \
__attribute__((always_inline)) \
inline vec name(__global const float* in, const int iy0, const int col, const int kh, \
                const int kw, const int dy, const int ih, const int iw, const int sx) \
{ \
    vec best = RUN_FIRST(vec, LOAD, in + clamp(iy0, 0, ih - 1) * iw + col, sx); \
    for (int ky = 0; ky < kh; ++ky) { \
        __global const float* row = in + clamp(iy0 + ky * dy, 0, ih - 1) * iw + col; \
        for (int kx = 0; kx < kw; ++kx) { \
            if (ky == 0 && kx == 0) \
                continue; \
            const vec v = LOAD(row + kx, sx); \
            RUN_ADD(best, v); \
        } \
    } \
    return RUN_END(vec, best, kh, kw); \
}
POOL_RUN(pool_run8, float8, LOAD_RUN8)
POOL_RUN(pool_run4, float4, LOAD_RUN4)

/* pool_run8 of a 3-wide window at stride 2 (the models' first MaxPools), each row's three
 * taps from two float16 loads (floats 0-15 and 1-16 of the row: the taps' own extent) and
 * their even and odd lanes, not six float8 loads: the same taps in the same order */
#define EVEN16 0, 2, 4, 6, 8, 10, 12, 14
#define ODD16 1, 3, 5, 7, 9, 11, 13, 15
__attribute__((always_inline))
inline float8 pool_run8_3s2(__global const float* in, const int iy0, const int col,
                            const int kh, const int dy, const int ih, const int iw)
{
    float8 best;
    for (int ky = 0; ky < kh; ++ky) {
        __global const float* row = in + clamp(iy0 + ky * dy, 0, ih - 1) * iw + col;
        const float16 a = vload16(0, row), b = vload16(0, row + 1);
        const float8 t0 = __builtin_shufflevector(a, a, EVEN16);
        const float8 t1 = __builtin_shufflevector(a, a, ODD16);
        const float8 t2 = __builtin_shufflevector(b, b, ODD16);
        if (ky == 0)
            best = RUN_FIRST(float8, LOAD_T0, t0, 0);
        else
            RUN_ADD(best, t0);
        RUN_ADD(best, t1);
        RUN_ADD(best, t2);
    }
    return RUN_END(float8, best, kh, 3);
}
/* (float4 runs: pool_run4's loads) */
__attribute__((always_inline))
inline float4 pool_run4_3s2(__global const float* in, const int iy0, const int col,
                            const int kh, const int dy, const int ih, const int iw)
{
    return pool_run4(in, iy0, col, kh, 3, dy, ih, iw, 2);
}

#if POOL_MAX
/* A MaxPool 3x3 of stride 1 and pads 1 (OW == IW: Inception's), a row's first (`left`) or last
 * N outputs as one run: the tap outside the row is the edge column again, by a shuffle of the
 * run's own loads (a clamped tap, as max_clamped's: the same result bit for bit), not N
 * scalar windows. Needs IW > N; rows clamped as pool_run's. */
#define EDGE_RUN(name, vec, LOAD, N, L0, R2) \
__attribute__((always_inline)) \
inline vec name(__global const float* in, const int iy0, const int ih, const int iw, \
                const int left) \
{ \
    vec best; \
    for (int ky = 0; ky < 3; ++ky) { \
        __global const float* row = in + clamp(iy0 + ky, 0, ih - 1) * iw; \
        const vec mid = LOAD(0, left ? row : row + iw - N); \
        const vec t0 = left ? __builtin_shufflevector(mid, mid, L0) : LOAD(0, row + iw - N - 1); \
        const vec t2 = left ? LOAD(0, row + 1) : __builtin_shufflevector(mid, mid, R2); \
        if (ky == 0) \
            best = t0; \
        else \
            RUN_ADD(best, t0); \
        RUN_ADD(best, mid); \
        RUN_ADD(best, t2); \
    } \
    return best; \
}
/* the lanes of the first tap of a left run, of the last tap of a right run */
#define LEFT8 0, 0, 1, 2, 3, 4, 5, 6
#define RIGHT8 1, 2, 3, 4, 5, 6, 7, 7
#define LEFT4 0, 0, 1, 2
#define RIGHT4 1, 2, 3, 3
EDGE_RUN(edge_run8, float8, vload8, 8, LEFT8, RIGHT8)
EDGE_RUN(edge_run4, float4, vload4, 4, LEFT4, RIGHT4)
#endif

/* a run of N (8 or 4) outputs from ox: the models' windows unrolled (a loop over a window
   known only at run time made SqueezeNet's MaxPools 1.5x slower on PoCL); any other: the loop */
#define POOL_RUN_AT(N) do { \
    const int col = ox * SX - PX; \
    float##N best; \
    if (KH == 3 && KW == 3 && SX == 2) \
        best = pool_run##N##_3s2(in, iy0, col, 3, DY, IH, IW); \
    else if (KH == 3 && KW == 3 && SX == 1) \
        best = pool_run##N(in, iy0, col, 3, 3, DY, IH, IW, 1); \
    else if (KH == 2 && KW == 2 && SX == 2) \
        best = pool_run##N(in, iy0, col, 2, 2, DY, IH, IW, 2); \
    else \
        best = pool_run##N(in, iy0, col, KH, KW, DY, IH, IW, SX); \
    vstore##N(best, 0, out + ox); \
} while (0)

/* The taps of a window axis (k taps from i0, d apart) inside [lo, hi): what an AvgPool that
 * counts padding divides by (hi is where pads_end ends, or past every window) */
inline int taps_within(int i0, int k, int d, int lo, int hi)
{
    int n = 0;
    for (int j = 0; j < k; ++j)
        n += i0 + j * d >= lo && i0 + j * d < hi;
    return n;
}

/* One output from the window of kd x kh x kw taps at (iz0, iy0, ix0), by the taps inside the
 * input. Always inlined: called with the common windows as constants (below) its loops unroll
 * as a build for one window did; with the layer's own values it serves any window. */
__attribute__((always_inline))
inline void pool_one(__global const float* restrict in, __global float* restrict out,
#if WITH_INDICES
                     __global INDEX_T* restrict index, const INDEX_T plane_base,
#endif
                     __constant const int* restrict geo, const int iz0, const int iy0,
                     const int ix0, const int kd, const int kh, const int kw)
{
    POOL_GEOMETRY(geo);
#if POOL_MAX
    float best = -INFINITY;
    int best_at = -1;
#else
    float sum = 0.0f;
    int count = 0;
#endif
    for (int kz = 0; kz < kd; ++kz) {
        const int iz = iz0 + kz * DZ;
        if ((uint)iz >= (uint)ID)
            continue;
        for (int ky = 0; ky < kh; ++ky) {
            const int iy = iy0 + ky * DY;
            if ((uint)iy >= (uint)IH)
                continue;
            __global const float* row = in + (iz * IH + iy) * IW;
            for (int kx = 0; kx < kw; ++kx) {
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
    *out = best_at < 0 ? 0.0f : best;
#if WITH_INDICES
    *index = best_at < 0 ? (INDEX_T)0 : plane_base + (INDEX_T)best_at;
#endif
#else
    const int divisor = COUNT_PAD ? taps_within(iz0, kd, DZ, -PZ, EZ) *
        taps_within(iy0, kh, DY, -PY, EY) * taps_within(ix0, kw, DX, -PX, EX) : count;
    *out = count ? sum / (float)divisor : 0.0f;
#endif
}

#if POOL_MAX
/* One MaxPool output of a 2-D window (dilation 1) with at least one tap inside the input, its
 * taps' coordinates clamped into the input instead of checked: a clamped tap repeats one of
 * the window's own inside taps (the window spans the edge it crosses), the first clamped tap
 * is the first inside one, and a repeat of a tap already seen never wins "strictly greater"
 * (nor turns a NaN first into another value), so the result is pool_one's bit for bit, with
 * no branch per tap (the edges of every row, and planes narrower than a run: Inception's
 * 13x13 and 6x6, took 100 cycles an output through pool_one). Always inlined, called with
 * the common windows as constants. */
__attribute__((always_inline))
inline float max_clamped(__global const float* restrict in, const int iy0, const int ix0,
                         const int kh, const int kw, const int ih, const int iw)
{
    float best = in[clamp(iy0, 0, ih - 1) * iw + clamp(ix0, 0, iw - 1)];
    for (int ky = 0; ky < kh; ++ky) {
        __global const float* row = in + clamp(iy0 + ky, 0, ih - 1) * iw;
        for (int kx = 0; kx < kw; ++kx) {
            const float v = row[clamp(ix0 + kx, 0, iw - 1)];
            best = v > best ? v : best;
        }
    }
    return best;
}
#endif

/* pool_one of output ox of row oy in pool_cpu */
#if WITH_INDICES
#define POOL_ONE(kd, kh, kw) pool_one(in, out + ox, indices + (z * OH + oy) * OW + ox, \
                                      plane_base, geo, iz0, iy0, ix0, kd, kh, kw)
#else
#define POOL_ONE(kd, kh, kw) pool_one(in, out + ox, geo, iz0, iy0, ix0, kd, kh, kw)
#endif

__kernel void pool_cpu(__global const float* restrict input, __global float* restrict output,
                       __constant const int* restrict geo
#if WITH_INDICES
                       , __global INDEX_T* restrict indices, const long axis_span
#endif
                       )
{
    POOL_GEOMETRY(geo);
    const int z = get_global_id(1);
    const int plane = z / OD, oz = z % OD;
    __global const float* in = input + plane * (ID * IH * IW);
    const int iz0 = oz * SZ - PZ;
#if WITH_INDICES
    /* axis_span is a whole number of planes: the plane's part of the index, taken modulo once
     * here, plus an offset inside the plane never reaches it (a 64-bit modulo per output cost
     * more than the window) */
    const INDEX_T plane_base = (INDEX_T)(((long)plane * (ID * IH * IW)) % axis_span);
#endif
    const int y_end = min(OH, ((int)get_global_id(0) + 1) * RB);
    for (int oy = get_global_id(0) * RB; oy < y_end; ++oy) {
        const int iy0 = oy * SY - PY;
        __global float* out = output + (z * OH + oy) * OW;
#if !WITH_INDICES
        /* a 2-D window over the input's plane (a depth of 1 whose one slice is the input's,
           not a pad: iz0 0), of dilation 1 along the row */
        const bool plane = KD == 1 && ID == 1 && iz0 == 0 && DX == 1;
        /* a MaxPool's rows clamped into the input (dilation 1, a row inside), in its runs and
           its scalar windows alike (max_clamped) */
        const bool clamp_rows = POOL_MAX && plane && DY == 1 && iy0 + KH > 0 && iy0 < IH;
        /* whether this row's outputs inside along the row go as runs (see the top) */
        const bool runs = plane && (SX == 1 || SX == 2) &&
            (POOL_MAX ? clamp_rows : iy0 >= 0 && iy0 + (KH - 1) * DY < IH);
        const int inside = OX_INSIDE_LAST - OX_INSIDE_FIRST + 1;
        /* a MaxPool 3x3 of stride 1 and pads 1: the row's edges as runs too (EDGE_RUN) */
        const int edge_runs = POOL_MAX && runs && KH == 3 && KW == 3 && SX == 1 && PX == 1 &&
                              OW == IW ? (IW > 8 ? 8 : IW > 4 ? 4 : 0) : 0;
#endif
        for (int ox = 0; ox < OW; ++ox) {
#if !WITH_INDICES
#if POOL_MAX
            /* the left run, and the right one as soon as it covers every output left (13
               wide: 2 runs, not the left, an inside one and the right) */
            if (edge_runs && (ox == 0 || OW - ox <= edge_runs)) {
                const int left = ox == 0;
                if (edge_runs == 8) {
                    ox = left ? 0 : OW - 8;
                    vstore8(edge_run8(in, iy0, IH, IW, left), 0, out + ox);
                    ox += 7;
                } else {
                    ox = left ? 0 : OW - 4;
                    vstore4(edge_run4(in, iy0, IH, IW, left), 0, out + ox);
                    ox += 3;
                }
                continue;
            }
#endif
            if (runs && ox >= OX_INSIDE_FIRST && ox <= OX_INSIDE_LAST && inside >= 4) {
                /* the row's last inside outputs: a run ending at the last, over outputs this
                   item already stored (the same values again), not up to 7 scalar windows */
                if (inside >= 8) {
                    ox = min(ox, OX_INSIDE_LAST - 7);
                    POOL_RUN_AT(8);
                    ox += 7;
                } else {
                    ox = min(ox, OX_INSIDE_LAST - 3);
                    POOL_RUN_AT(4);
                    ox += 3;
                }
                continue;
            }
#endif
            const int ix0 = ox * SX - PX;
#if POOL_MAX && !WITH_INDICES
            if (clamp_rows && ix0 + KW > 0 && ix0 < IW) {
                if (KH == 3 && KW == 3)
                    out[ox] = max_clamped(in, iy0, ix0, 3, 3, IH, IW);
                else if (KH == 2 && KW == 2)
                    out[ox] = max_clamped(in, iy0, ix0, 2, 2, IH, IW);
                else
                    out[ox] = max_clamped(in, iy0, ix0, KH, KW, IH, IW);
                continue;
            }
#endif
            if (KD == 1 && KH == 3 && KW == 3)
                POOL_ONE(1, 3, 3);
            else if (KD == 1 && KH == 2 && KW == 2)
                POOL_ONE(1, 2, 2);
            else
                POOL_ONE(KD, KH, KW);
        }
    }
}
