/* Direct convolution for CPU devices (PoCL and the like): work item = one output pixel of one
 * output row, for OCB output channels at once. A CPU OpenCL compiler vectorizes across the work
 * items of dimension 0 (neighbouring output columns): input loads are then contiguous vector
 * loads (stride 1) and each weight is one scalar broadcast to the vector, with OCB accumulators
 * in registers. No __local memory and no barriers, which CPU devices emulate at a cost.
 * NDRange: (ceil(OW/8)*8, OH, NB * G * ceil(OG/OCB)). Needs KH KW, OCB and CONV_SIZES (the size
 * parameters: ops/nn/_sizes.py).
 */
#include "conv_epilogue.cl"
#ifndef IN_CHANNEL    /* a folded ShuffleChannels defines the plane read for channel c */
#define IN_CHANNEL(c) (c)
#endif
#define OCBLOCKS ((OG + OCB - 1) / OCB)

__kernel void conv_cpu(__global const float* restrict input,
                       __global const float* restrict weights,
                       __global float* restrict output EPILOGUE_ARGS CONV_SIZES)
{
    const int ox_raw = get_global_id(0), oy = get_global_id(1), z = get_global_id(2);
    const int ox = min(ox_raw, OW - 1);          /* tail items compute a copy, store nothing */
    const int ob = z % OCBLOCKS, g = z / OCBLOCKS % G, img = z / (OCBLOCKS * G);
    const int o0 = g * OG + ob * OCB;            /* first output channel of this item */
    __global const float* in = input + (img * C + IN_CHANNEL(g * CG)) * IH * IW;
    __global const float* w = weights + o0 * (CG * KH * KW);
    const int iy0 = oy * SY - PY, ix0 = ox * SX - PX;
    float acc[OCB];
    #pragma unroll
    for (int j = 0; j < OCB; ++j)
        acc[j] = 0.0f;
    for (int c = 0; c < CG; ++c) {
        for (int ky = 0; ky < KH; ++ky) {
            const int iy = iy0 + ky * DY;
            if ((uint)iy >= (uint)IH)
                continue;
            __global const float* row = in + (c * IH + iy) * IW;
            #pragma unroll
            for (int kx = 0; kx < KW; ++kx) {
                const int ix = ix0 + kx * DX;
                const int inside = (uint)ix < (uint)IW;
                const float v = inside ? row[clamp(ix, 0, IW - 1)] : 0.0f;
                const int wk = (c * KH + ky) * KW + kx;
                #pragma unroll
                for (int j = 0; j < OCB; ++j)
                    acc[j] = mad(v, w[j * (CG * KH * KW) + wk], acc[j]);
            }
        }
    }
    if (ox_raw >= OW)
        return;
    #pragma unroll
    for (int j = 0; j < OCB; ++j) {
        const int o = o0 + j;
        if (ob * OCB + j < OG)
            {
                const int at = ((img * O + o) * OH + oy) * OW + ox;
                output[at] = EPILOGUE(at, o, acc[j]);
            }
    }
}
