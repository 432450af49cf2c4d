/* Winograd F(2x2, 3x3) convolution (Lavin & Gray, "Fast Algorithms for Convolutional Neural
 * Networks"): each 2x2 block of outputs of a 3x3, stride-1 window is computed from a 4x4 tile of
 * the input with 16 multiplies per (input, output) channel pair instead of 36.
 *
 *   Y = A^T [ (G g G^T) . (B^T d B) ] A      (. : element by element, over 4x4)
 *
 * The weight transform U = G g G^T is done once on the host (ops/nn/_winograd.py) and arrives
 * as u[G][16][OG][CG]. The rest is three kernels, one program:
 *   winograd_input    d -> V = B^T d B for every tile and input channel:  v[G][16][CG][NP]
 *   gemm_tiled        per (group, element e of the 4x4): M[e] = U[e] (OG x CG) x V[e] (CG x NP),
 *                     gemm.cl with the batch index = group * 16 + e
 *   winograd_output   Y = A^T M A, the fused epilogue, and the NCHW store of up to 2x2 outputs
 * The images lie side by side along the GEMM's N: column n = image * T + tile, so a layer of
 * small planes (7x7: 16 tiles an image) makes one GEMM of NB * T columns per element, not NB
 * GEMMs of T (at batch 32 on an H100 the per-image GEMMs left ResNet-50's 7x7 layers at 0.44x
 * cuDNN). The rows are NP = NB * T rounded up to a multiple of 4 long, so that every float4
 * of V and U is aligned and wholly in or out (gemm.cl's GEMM_VEC_*, gemm_async.cl's copies);
 * the input transform writes zeros in V's padding columns, whose M columns nobody reads.
 * T = TILES_Y * TILES_X tiles per image, tile (ty, tx) covering outputs 2ty..2ty+1, 2tx..2tx+1
 * and reading inputs from (2ty - PY, 2tx - PX): a partial tile at the bottom/right edge reads
 * zeros past the input and stores only the outputs that exist, so pads_end needs nothing.
 *
 * Needs: the sizes NB C IH IW O OH OW G CG OG PY PX (CONV_SIZES: ops/nn/_sizes.py) and TILES_Y
 * TILES_X as kernel arguments, after each kernel's buffers, and gemm.cl's tile defines; it
 * includes conv_epilogue.cl, and gemm.cl at its end.
 */
#include "conv_epilogue.cl"
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
/* batch = group * 16 + e */
#define A_AT(batch, m, k) u[((batch) * OG + (m)) * CG + (k)]
#define B_AT(batch, k, n) v[((batch) * CG + (k)) * NP + (n)]
#define STORE(batch, m, n, val) mt[((batch) * OG + (m)) * NP + (n)] = (val)

/* V = B^T d B, B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
 * NDRange: (NP, CG, G); columns past NT get zeros. */
__kernel void winograd_input(__global const float* restrict input, __global float* restrict v
                             WINOGRAD_SIZES)
{
    const int col = get_global_id(0), c = get_global_id(1), g = get_global_id(2);
    if (col >= NP)
        return;
    __global float* out = v + (g * 16 * CG + c) * NP + col;
    if (col >= NT) {
        #pragma unroll
        for (int e = 0; e < 16; ++e)
            out[e * CG * NP] = 0.0f;
        return;
    }
    const int img = col / TILES, t = col % TILES;
    const int iy0 = t / TILES_X * 2 - PY, ix0 = t % TILES_X * 2 - PX;
    __global const float* in = input + (img * C + g * CG + c) * IH * IW;
    float d[4][4];
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int iy = iy0 + i;
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int ix = ix0 + j;
            /* one unsigned compare covers both "in the padding before" and "past the end" */
            d[i][j] = ((uint)iy < (uint)IH && (uint)ix < (uint)IW) ? in[iy * IW + ix] : 0.0f;
        }
    }
    float r[4][4];               /* B^T d: combine rows */
    #pragma unroll
    for (int j = 0; j < 4; ++j) {
        r[0][j] = d[0][j] - d[2][j];
        r[1][j] = d[1][j] + d[2][j];
        r[2][j] = d[2][j] - d[1][j];
        r[3][j] = d[1][j] - d[3][j];
    }
    #pragma unroll
    for (int i = 0; i < 4; ++i) {  /* (B^T d) B: combine columns; element e = 4i + j */
        out[(4 * i + 0) * CG * NP] = r[i][0] - r[i][2];
        out[(4 * i + 1) * CG * NP] = r[i][1] + r[i][2];
        out[(4 * i + 2) * CG * NP] = r[i][2] - r[i][1];
        out[(4 * i + 3) * CG * NP] = r[i][1] - r[i][3];
    }
}

/* Y = A^T M A, A^T = [1 1 1 0; 0 1 -1 -1], then the epilogue.
 * NDRange: (NT, OG, G). */
__kernel void winograd_output(__global const float* restrict mt,
                              __global float* restrict output EPILOGUE_ARGS WINOGRAD_SIZES)
{
    const int col = get_global_id(0), o = get_global_id(1), g = get_global_id(2);
    if (col >= NT)
        return;
    const int img = col / TILES, t = col % TILES, channel = g * OG + o;
    __global const float* in = mt + (g * 16 * OG + o) * NP + col;
    float m[4][4];
    #pragma unroll
    for (int e = 0; e < 16; ++e)
        m[e / 4][e % 4] = in[e * OG * NP];
    float r[2][4];               /* A^T M: combine rows */
    #pragma unroll
    for (int j = 0; j < 4; ++j) {
        r[0][j] = m[0][j] + m[1][j] + m[2][j];
        r[1][j] = m[1][j] - m[2][j] - m[3][j];
    }
    const int oy0 = t / TILES_X * 2, ox0 = t % TILES_X * 2;
    #pragma unroll
    for (int i = 0; i < 2; ++i) {  /* (A^T M) A: combine columns */
        const int oy = oy0 + i;
        const float y[2] = {r[i][0] + r[i][1] + r[i][2], r[i][1] - r[i][2] - r[i][3]};
        #pragma unroll
        for (int j = 0; j < 2; ++j) {
            const int ox = ox0 + j;
            if (oy < OH && ox < OW) {
                const int at = ((img * O + channel) * OH + oy) * OW + ox;
                output[at] = EPILOGUE(at, channel, y[j]);
            }
        }
    }
}

/* the GEMM core, after the front end above defines what it needs */
#include "gemm.cl"
