/* Direct convolution with output channels blocked in registers: each work item computes OCB
 * output channels of one group at PXB consecutive output pixels along x.
 *
 * For convolutions with few output channels per group (a TCN's 25 -> 25 channels, kernel 7),
 * where the implicit GEMM pads M = OG up to its tile, runs few work-groups at batch 1 and
 * spends its time in a short, barriered K loop. Here each input value read is used OCB times
 * (PXB times fewer reads of each weight), the weights of the block sit in __local memory once
 * per work-group, and every work item of a group reads the same weight address (a broadcast),
 * so the main loop has no barrier at all. OCB trades registers for input reuse; PXB trades
 * work items for weight reuse (the tuner times both, ops/conv.py).
 *
 * Each output sums its terms in conv_direct.cl's order (c, then ky, then kx, one fp32 chain):
 * the two kernels agree to rounding. A term outside the image adds 0 * w, which leaves the
 * chain as it is for finite weights (conv_direct.cl skips the tap: an inf or NaN weight at a
 * padded tap gives NaN here and not there, and a sum of -0 may come out +0).
 * NDRange: (ceil(OW / PXB) rounded up to LX, OH, N * G * ceil(OG / OCB)); local (LX, 1, 1).
 * Needs the defines of conv_direct.cl, and OCB (a multiple of 4), PXB, LX. The fused epilogue
 * is conv_epilogue.cl's.
 */
#include "conv_epilogue.cl"
#define WINDOW (CG * KH * KW)             /* weights per output channel */
#define BLOCKS ((OG + OCB - 1) / OCB)     /* channel blocks per group */
#if OCB % 4
#error OCB must be a multiple of 4 (the weights are read as float4)
#endif

__kernel __attribute__((reqd_work_group_size(LX, 1, 1)))
void conv_direct_ocb(__global const float* restrict input,
                     __global const float* restrict weights,
                     __global float* restrict output EPILOGUE_ARGS CONV_SIZES,
                     __local float4* restrict block_weights)
{
    /* block_weights: [WINDOW][OCB], the channel fastest: one window position's OCB weights
       are one vector read (an argument: WINDOW is the layer's) */
    const int z = get_global_id(2);
    const int img = z / (G * BLOCKS), g = z / BLOCKS % G, o0 = z % BLOCKS * OCB;

    /* Read in the weights' own order (consecutive work items, consecutive addresses) and
       transpose on the way into __local; channels past OG are zero, so the main loop needs
       no channel guard */
    __global const float* w = weights + (g * OG + o0) * WINDOW;
    const int present = min(OCB, OG - o0) * WINDOW;
    __local float* wl = (__local float*)block_weights;
    #pragma unroll 4
    for (int i = get_local_id(0); i < OCB * WINDOW; i += LX)
        wl[i % WINDOW * OCB + i / WINDOW] = i < present ? w[i] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);

    const int ox0 = get_global_id(0) * PXB, oy = get_global_id(1);
    if (ox0 >= OW)               /* the edge of the last work-group (no barrier follows) */
        return;
    __global const float* in = input + (img * C + g * CG) * IH * IW;
    const int iy0 = oy * SY - PY, ix0 = ox0 * SX - PX;
    float acc[OCB][PXB];
    #pragma unroll
    for (int j = 0; j < OCB; ++j) {
        #pragma unroll
        for (int p = 0; p < PXB; ++p)
            acc[j][p] = 0.0f;
    }
    /* unrolled over channels too: at batch 1 a work item's time is its chain of input reads,
       and only an unrolled loop lets the compiler issue several channels' reads at once */
    #pragma unroll 5
    for (int c = 0; c < CG; ++c) {
        #pragma unroll
        for (int ky = 0; ky < KH; ++ky) {
            const int iy = iy0 + ky * DY;
            if ((uint)iy >= (uint)IH)        /* the same for the whole work-group */
                continue;
            __global const float* row = in + (c * IH + iy) * IW;
            __local const float4* wk = block_weights + (c * KH + ky) * KW * (OCB / 4);
            #pragma unroll
            for (int kx = 0; kx < KW; ++kx) {
                float x[PXB];
                #pragma unroll
                for (int p = 0; p < PXB; ++p) {
                    const int ix = ix0 + p * SX + kx * DX;
                    /* one unsigned compare covers both "negative" and "past the end" */
                    x[p] = (uint)ix < (uint)IW ? row[ix] : 0.0f;
                }
                #pragma unroll
                for (int j = 0; j < OCB / 4; ++j) {
                    const float4 wv = wk[kx * (OCB / 4) + j];
                    #pragma unroll
                    for (int p = 0; p < PXB; ++p) {
                        acc[4 * j][p] = mad(x[p], wv.x, acc[4 * j][p]);
                        acc[4 * j + 1][p] = mad(x[p], wv.y, acc[4 * j + 1][p]);
                        acc[4 * j + 2][p] = mad(x[p], wv.z, acc[4 * j + 2][p]);
                        acc[4 * j + 3][p] = mad(x[p], wv.w, acc[4 * j + 3][p]);
                    }
                }
            }
        }
    }
    /* a guard rather than a break: a loop with an exit is not unrolled, and acc[j] must
       stay in registers */
    #pragma unroll
    for (int j = 0; j < OCB; ++j) {
        const int o = g * OG + o0 + j;
        #pragma unroll
        for (int p = 0; p < PXB; ++p) {
            if (o0 + j < OG && ox0 + p < OW) {
                const int at = ((img * O + o) * OH + oy) * OW + ox0 + p;
                output[at] = EPILOGUE(at, o, acc[j][p]);
            }
        }
    }
}
