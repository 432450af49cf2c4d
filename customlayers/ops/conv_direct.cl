/* Direct convolution: one work item per output element, the window read from global memory.
 * Used where the GEMM view is too thin to tile (depthwise: one output channel per group), where
 * the work is memory-bound anyway.
 * NDRange: (OW, OH, N * O). Needs KH KW and CONV_SIZES (the size parameters: ops/nn/_sizes.py), conv_window.cl is
 * included.
 */
#include "conv_epilogue.cl"
#include "conv_window.cl"
#ifndef IN_CHANNEL    /* a folded ShuffleChannels defines the plane read for channel c */
#define IN_CHANNEL(c) (c)
#endif
__kernel void conv_direct(__global const float* restrict input,
                          __global const float* restrict weights,
                          __global float* restrict output EPILOGUE_ARGS CONV_SIZES)
{
    const int ox = get_global_id(0), oy = get_global_id(1), z = get_global_id(2);
    if (ox >= OW || oy >= OH)
        return;
    const int img = z / O, o = z % O, g = o / OG;
    __global const float* w = weights + o * (CG * KH * KW);
    __global const float* in = input + (img * C + IN_CHANNEL(g * CG)) * IH * IW;
    const int iy0 = oy * SY - PY, ix0 = ox * SX - PX;
    float acc = 0.0f;
    /* unrolled over channels too, so that the compiler can issue several channels' reads at
       once: a small batch leaves a GPU idle, and each item's chain of reads is its time */
    #pragma unroll 5
    for (int c = 0; c < CG; ++c)
        acc = conv_window(in, w, c, iy0, ix0, acc CONV_WINDOW_SIZES);
    const int at = (z * OH + oy) * OW + ox;
    output[at] = EPILOGUE(at, o, acc);
}
