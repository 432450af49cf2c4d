/* Convolution as an implicit GEMM, one GEMM per group in the third NDRange dimension, the NB
 * images side by side along N:
 *   out[o][p] = sum_k weights[o][k] * patch[k][p]
 *   m = output channel within the group, n = pixel oy*OW+ox of image n / PLANE, k = (c, ky, kx)
 * The patch matrix is never stored: B_AT gathers it from the input (zero outside the image).
 * Needs: the sizes NB C IH IW (input), O OH OW (output), G CG OG (groups, channels per group),
 * SY SX, DY DX (dilations), PY PX (pads_begin) as kernel arguments (CONV_SIZES, the parameter
 * list: ops/nn/_sizes.py), the window KH KW and SINGLE_IMAGE (NB == 1) as #defines, and the
 * tile geometry of gemm.cl.
 * A fused epilogue (passes/fusion.py) adds a per-channel bias and/or a ReLU where the result is
 * stored: conv_epilogue.cl defines EPILOGUE_ARGS and EPILOGUE(channel, value).
 */
#include "conv_epilogue.cl"
#define M OG
#define PLANE (OH * OW)
/* the images side by side along N: a layer with small planes (7x7: 49 pixels) fills whole
   tiles instead of leaving a quarter of each one empty; one image needs no division */
#define N (NB * PLANE)
#if !SINGLE_IMAGE
#define IMG(n) ((n) / PLANE)
#define PIX(n) ((n) % PLANE)
#else
#define IMG(n) 0
#define PIX(n) (n)
#endif
#define K (CG * KH * KW)
#define A_K_FASTEST 1
#define B_N_FASTEST 1
#define GEMM_ARGS __global const float* restrict input, __global const float* restrict weights, \
                  __global float* restrict output EPILOGUE_ARGS CONV_SIZES

/* the sizes conv_patch reads, passed on from the kernel's arguments */
#if SIZES_BAKED    /* a GPU's program: the sizes are #defines (ops/nn/_sizes.py: baked) */
#define PATCH_SIZES
#define PATCH_PARAMS
#else
#define PATCH_SIZES , C, IH, IW, OH, OW, CG, SY, SX, DY, DX, PY, PX
#define PATCH_PARAMS , const int C, const int IH, const int IW, const int OH, const int OW, \
                     const int CG, const int SY, const int SX, const int DY, const int DX, \
                     const int PY, const int PX
#endif
inline float conv_patch(__global const float* restrict input, int batch, int k, int n
                        PATCH_PARAMS)
{
    const int img = IMG(n), g = batch, p = PIX(n);   /* a GEMM per group */
    const int c = k / (KH * KW), r = k % (KH * KW);
    const int ky = r / KW, kx = r % KW;
    const int oy = p / OW, ox = p % OW;
    const int iy = oy * SY - PY + ky * DY;
    const int ix = ox * SX - PX + kx * DX;
    /* one unsigned compare covers both "negative" and "past the end" */
    if ((uint)iy >= (uint)IH || (uint)ix >= (uint)IW)
        return 0.0f;
    return input[((img * C + g * CG + c) * IH + iy) * IW + ix];
}

#define A_AT(batch, m, k) weights[((batch) * OG + (m)) * K + (k)]
#if CONV_1X1
/* a 1x1 window with stride 1 and no padding: the patch matrix is the input itself (a plain
   GEMM: no window arithmetic per element, only the image's place) */
#define B_AT(batch, k, n) \
    input[(IMG(n) * C + (batch) * CG + (k)) * PLANE + PIX(n)]
#elif CONV_1X1_STRIDED
/* a 1x1 window with a stride and no padding (ResNet's downsampling shortcut): every patch
   value is an input element, pixel (oy SY, ox SX) of its plane; an lvalue, so that
   gemm_async.cl can copy it from its address */
#define B_AT(batch, k, n) \
    input[(IMG(n) * C + (batch) * CG + (k)) * (IH * IW) + PIX(n) / OW * SY * IW + \
          PIX(n) % OW * SX]
#else
#define B_AT(batch, k, n) conv_patch(input, (batch), (k), (n) PATCH_SIZES)
#endif
#define OUT_AT(batch, m, n) ((IMG(n) * O + (batch) * OG + (m)) * PLANE + PIX(n))
#define STORE(batch, m, n, v) \
    output[OUT_AT(batch, m, n)] = EPILOGUE(OUT_AT(batch, m, n), (batch) * OG + (m), (v))

/* the GEMM core, after the front end above defines what it needs */
#include "gemm.cl"
