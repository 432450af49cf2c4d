/* Winograd F(m x m, 3x3) convolution (Lavin & Gray, "Fast Algorithms for Convolutional Neural
 * Networks"), m = WINO_M: each m x m block of outputs of a 3x3, stride-1 window is computed from
 * a WT x WT tile of the input (WT = m + 2) with WE = WT^2 multiplies per (input, output)
 * channel pair instead of 9 m^2: F(2x2, 3x3) 16 instead of 36, F(4x4, 3x3) 36 instead of 144.
 *
 *   Y = A^T [ (G g G^T) . (B^T d B) ] A      (. : element by element, over WT x WT)
 *
 * The weight transform U = G g G^T is done once on the host (ops/nn/_winograd.py) and arrives
 * as u[G][WE][OG][CG]. The rest is three kernels, one program on a GPU (on a CPU device the
 * transforms alone, WINOGRAD_TRANSFORMS_ONLY, and the GEMM conv_cpu_blocked.cl's):
 *   winograd_input    d -> V = B^T d B for every tile and input channel:  v[G][WE][CG][NP]
 *   gemm_tiled        per (group, element e of the tile): M[e] = U[e] (OG x CG) x V[e]
 *                     (CG x NP), gemm.cl with the batch index = group * WE + e
 *   winograd_output   Y = A^T M A, the fused epilogue, and the NCHW store of up to m x m outputs
 * The images lie side by side along the GEMM's N: column n = image * T + tile, so a layer of
 * small planes (7x7: 16 tiles of 2x2 an image) makes one GEMM of NB * T columns per element,
 * not NB GEMMs of T (at batch 32 on an H100 the per-image GEMMs left ResNet-50's Winograd layers
 * at 1.02-1.59x cuDNN's time). The rows are NP = NB * T rounded up to a multiple of 4 long, so
 * that every float4 of V and U is aligned and wholly in or out (gemm.cl's GEMM_VEC_*,
 * gemm_async.cl's copies); the input transform writes zeros in V's padding columns, whose M
 * columns nobody reads.
 * T = TILES_Y * TILES_X tiles per image, tile (ty, tx) covering outputs m ty .. m ty + m - 1,
 * m tx .. m tx + m - 1 and reading inputs from (m ty - PY, m tx - PX): a partial tile at the
 * bottom/right edge reads zeros past the input and stores only the outputs that exist, so
 * pads_end needs nothing.
 *
 * Needs: WINO_M (2 or 4) as a #define, the sizes NB C IH IW O OH OW G CG OG PY PX (CONV_SIZES:
 * ops/nn/_sizes.py) and TILES_Y TILES_X as kernel arguments, after each kernel's buffers, and
 * gemm.cl's tile defines; it includes conv_epilogue.cl, and gemm.cl at its end.
 */
#include "conv_epilogue.cl"
#ifndef WINO_M
#define WINO_M 2
#endif
#define WT (WINO_M + 2)                  /* an input tile's side */
#define WE (WT * WT)                     /* its elements: GEMMs per group */
#define TILES (TILES_Y * TILES_X)
#define NT (NB * TILES)                  /* the GEMM's columns that are tiles */
#define NP ((NT + 3) / 4 * 4)            /* V's and M's rows: whole float4s */

/* ---- the batched GEMM front end for gemm.cl ---- */
#define M OG
#define N NP
#define K CG
#define A_K_FASTEST 1
#define B_N_FASTEST 1
#define WINOGRAD_SIZES CONV_SIZES, const int TILES_Y, const int TILES_X
#define GEMM_ARGS __global const float* restrict v, __global const float* restrict u, \
                  __global float* restrict mt WINOGRAD_SIZES
/* batch = group * WE + e */
#define A_AT(batch, m, k) u[((batch) * OG + (m)) * CG + (k)]
#define B_AT(batch, k, n) v[((batch) * CG + (k)) * NP + (n)]
#define STORE(batch, m, n, val) mt[((batch) * OG + (m)) * NP + (n)] = (val)

/* One side of each transform, on a row or column of the tile (the other side runs the same
   function on the result's rows): B^T x (WT values) for the input, A^T x (WT -> WINO_M) for
   the output. Only the nonzero terms of each matrix are summed. */
#if WINO_M == 2
/* B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1] */
inline void input_side(const float* x, float* r)
{
    r[0] = x[0] - x[2];
    r[1] = x[1] + x[2];
    r[2] = x[2] - x[1];
    r[3] = x[1] - x[3];
}
/* A^T = [1 1 1 0; 0 1 -1 -1] */
inline void output_side(const float* x, float* y)
{
    y[0] = x[0] + x[1] + x[2];
    y[1] = x[1] - x[2] - x[3];
}
#elif WINO_M == 4
/* B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0;
          0 4 0 -5 0 1] (interpolation points 0, -1, 1, -2, 2 and infinity) */
inline void input_side(const float* x, float* r)
{
    r[0] = 4.0f * x[0] - 5.0f * x[2] + x[4];
    r[1] = -4.0f * (x[1] + x[2]) + x[3] + x[4];
    r[2] = 4.0f * (x[1] - x[2]) - x[3] + x[4];
    r[3] = 2.0f * (x[3] - x[1]) - x[2] + x[4];
    r[4] = 2.0f * (x[1] - x[3]) - x[2] + x[4];
    r[5] = 4.0f * x[1] - 5.0f * x[3] + x[5];
}
/* A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1] */
inline void output_side(const float* x, float* y)
{
    const float p = x[1] + x[2], q = x[1] - x[2], s = x[3] + x[4], d = x[3] - x[4];
    y[0] = x[0] + p + s;
    y[1] = q + 2.0f * d;
    y[2] = p + 4.0f * s;
    y[3] = q + 8.0f * d + x[5];
}
#else
#error "conv_winograd.cl: WINO_M (the output block) must be 2 or 4"
#endif

/* V = B^T d B for one tile and input channel. NDRange: (NP, CG, G); columns past NT get
   zeros. */
__kernel void winograd_input(__global const float* restrict input, __global float* restrict v
                             WINOGRAD_SIZES)
{
    const int col = get_global_id(0), c = get_global_id(1), g = get_global_id(2);
    if (col >= NP)
        return;
    __global float* out = v + (g * WE * CG + c) * NP + col;
    if (col >= NT) {
        #pragma unroll
        for (int e = 0; e < WE; ++e)
            out[e * CG * NP] = 0.0f;
        return;
    }
    const int img = col / TILES, t = col % TILES;
    const int iy0 = t / TILES_X * WINO_M - PY, ix0 = t % TILES_X * WINO_M - PX;
    __global const float* in = input + (img * C + g * CG + c) * IH * IW;
    float d[WT][WT];
    #pragma unroll
    for (int i = 0; i < WT; ++i) {
        const int iy = iy0 + i;
        #pragma unroll
        for (int j = 0; j < WT; ++j) {
            const int ix = ix0 + j;
            /* one unsigned compare covers both "in the padding before" and "past the end" */
            d[i][j] = ((uint)iy < (uint)IH && (uint)ix < (uint)IW) ? in[iy * IW + ix] : 0.0f;
        }
    }
    float r[WT][WT];             /* B^T d: each column */
    #pragma unroll
    for (int j = 0; j < WT; ++j) {
        float x[WT], y[WT];
        #pragma unroll
        for (int i = 0; i < WT; ++i)
            x[i] = d[i][j];
        input_side(x, y);
        #pragma unroll
        for (int i = 0; i < WT; ++i)
            r[i][j] = y[i];
    }
    #pragma unroll
    for (int i = 0; i < WT; ++i) {  /* (B^T d) B: each row; element e = WT i + j */
        float y[WT];
        input_side(r[i], y);
        #pragma unroll
        for (int j = 0; j < WT; ++j)
            out[(WT * i + j) * CG * NP] = y[j];
    }
}

/* Y = A^T M A for one tile and output channel, then the epilogue. NDRange: (NT, OG, G). */
__kernel void winograd_output(__global const float* restrict mt,
                              __global float* restrict output EPILOGUE_ARGS WINOGRAD_SIZES)
{
    const int col = get_global_id(0), o = get_global_id(1), g = get_global_id(2);
    if (col >= NT)
        return;
    const int img = col / TILES, t = col % TILES, channel = g * OG + o;
    __global const float* in = mt + (g * WE * OG + o) * NP + col;
    float m[WT][WT];
    #pragma unroll
    for (int e = 0; e < WE; ++e)
        m[e / WT][e % WT] = in[e * OG * NP];
    float r[WINO_M][WT];         /* A^T M: each column */
    #pragma unroll
    for (int j = 0; j < WT; ++j) {
        float x[WT], y[WINO_M];
        #pragma unroll
        for (int i = 0; i < WT; ++i)
            x[i] = m[i][j];
        output_side(x, y);
        #pragma unroll
        for (int i = 0; i < WINO_M; ++i)
            r[i][j] = y[i];
    }
    const int oy0 = t / TILES_X * WINO_M, ox0 = t % TILES_X * WINO_M;
    #pragma unroll
    for (int i = 0; i < WINO_M; ++i) {  /* (A^T M) A: each row */
        const int oy = oy0 + i;
        float y[WINO_M];
        output_side(r[i], y);
        #pragma unroll
        for (int j = 0; j < WINO_M; ++j) {
            const int ox = ox0 + j;
            if (oy < OH && ox < OW) {
                const int at = ((img * O + channel) * OH + oy) * OW + ox;
                output[at] = EPILOGUE(at, channel, y[j]);
            }
        }
    }
}

/* the GEMM core, after the front end above defines what it needs */
/* (a CPU device runs the batched GEMM as conv_cpu_blocked.cl's grouped 1x1 convolution, in a
   program of its own: ops/nn/_winograd.py's CpuWinogradVariant; it builds the transforms
   alone) */
#if !WINOGRAD_TRANSFORMS_ONLY
#include "gemm.cl"
#endif
