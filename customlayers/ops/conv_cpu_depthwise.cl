/* Depthwise convolution (one input channel per group: CG == 1) for CPU OpenCL (PoCL): one work
 * item computes RB output rows of one output plane, as float8 runs along the row.
 * It first stages the SR input rows those outputs read into a private, zero-padded block of SR
 * rows x SW floats (the window's padding becomes zeros there, so the inner loop has no bounds
 * check), then for each output row and each run of 8 outputs sums KH x KW vector FMAs: a
 * vector load of the staged row times one broadcast weight.
 * conv_cpu.cl's one-pixel work items took PoCL 3-4 ns per output here: the
 * bounds checks in their window kept its work-group vectorizer from vectorizing them.
 * IN_CHANNEL(c) maps an input channel to the plane read; a ShuffleChannels folded into this
 * convolution (passes/fusion.py) makes it the shuffle's channel permutation.
 * NDRange: (ceil(OH/RB), NB * O), local (1, 1): no work-item loop around the item.
 * Needs: the window KH KW, STRIDE_X (SX when it is 1 or 2, whose runs load as vectors; else 0)
 * and MAX_STAGED (floats a work item may stage) as #defines; the sizes (CONV_SIZES: C O OG IH IW
 * OH OW SY SX DY DX PY PX, ops/nn/_sizes.py) then RB SR SW VX (rows per item, staged rows and
 * their width, runs of 8 per output row) as kernel arguments after the buffers;
 * IN_CHANNEL(c), the epilogue.
 */
#include "conv_epilogue.cl"
#ifndef IN_CHANNEL    /* a folded ShuffleChannels defines the plane read for channel c */
#define IN_CHANNEL(c) (c)
#endif
/* the input columns a staged row holds (a window may stop short of the input's last ones) */
#define COPIED (IW < SW - PX ? IW : SW - PX)

#if STRIDE_X == 1
#define LOAD_RUN(p) vload8(0, p)
#elif STRIDE_X == 2
/* the even lanes of 16 floats as one shuffle of two float8 loads (vload16(...).even is a
 * float16 value, which changes the ABI without AVX-512: PoCL warns on every build) */
#define LOAD_RUN(p) __builtin_shufflevector(vload8(0, p), vload8(1, p), 0, 2, 4, 6, 8, 10, 12, 14)
#else
#define LOAD_RUN(p) ((float8)((p)[0], (p)[SX], (p)[2 * SX], (p)[3 * SX], (p)[4 * SX], \
                              (p)[5 * SX], (p)[6 * SX], (p)[7 * SX]))
#endif

__kernel void conv_cpu_depthwise(__global const float* restrict input,
                                 __global const float* restrict weights,
                                 __global float* restrict output EPILOGUE_ARGS CONV_SIZES,
                                 const int RB, const int SR, const int SW, const int VX)
{
    const int z = get_global_id(1);
    const int o = z % O, img = z / O;
    const int oy0 = get_global_id(0) * RB;
    const int rows = min(RB, OH - oy0);
    __global const float* in = input + (img * C + IN_CHANNEL(o / OG)) * (IH * IW);
    float w[KH * KW];
    for (int k = 0; k < KH * KW; ++k)
        w[k] = weights[o * (KH * KW) + k];

    float staged[MAX_STAGED];             /* SR rows of SW floats (the host checks they fit) */
    const int iy0 = oy0 * SY - PY;
    for (int r = 0; r < SR; ++r) {
        float* dst = staged + r * SW;
        const int iy = iy0 + r;
        if ((uint)iy >= (uint)IH) {
            for (int x = 0; x < SW; ++x)
                dst[x] = 0.0f;
            continue;
        }
        __global const float* src = in + iy * IW;
        for (int x = 0; x < PX; ++x)
            dst[x] = 0.0f;
        for (int x = 0; x < COPIED; ++x)      /* one bound: LLVM vectorizes the copy */
            dst[PX + x] = src[x];
        for (int x = PX + IW; x < SW; ++x)
            dst[x] = 0.0f;
    }

    for (int r = 0; r < rows; ++r) {
        const int oy = oy0 + r;
        const int out_row = ((img * O + o) * OH + oy) * OW;
        for (int run = 0; run < VX; ++run) {
            const float* at = staged + r * SY * SW + run * 8 * SX;
            float8 acc = (float8)0.0f;
            #pragma unroll
            for (int ky = 0; ky < KH; ++ky) {
                #pragma unroll
                for (int kx = 0; kx < KW; ++kx)
                    acc = mad(LOAD_RUN(at + ky * DY * SW + kx * DX), (float8)w[ky * KW + kx],
                              acc);
            }
            const int x0 = run * 8, n = min(8, OW - x0);
#if !FUSED_RESIDUAL && !FUSED_GELU
            /* (a Gelu's epilogue is a function of one float: it takes the lanes below) */
            if (n == 8) {      /* a whole run: bias and ReLU on the vector, one vector store */
                vstore8(EPILOGUE(0, o, acc), 0, output + out_row + x0);
                continue;
            }
#endif
            float lanes[8];
            vstore8(acc, 0, lanes);
            for (int i = 0; i < n; ++i) {
                const int idx = out_row + x0 + i;
                output[idx] = EPILOGUE(idx, o, lanes[i]);
            }
        }
    }
}
