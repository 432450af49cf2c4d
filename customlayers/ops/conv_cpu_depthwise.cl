/* Convolution with few output channels per group (depthwise: OG = CG = 1) for CPU devices.
 * One work item computes RB output rows of one output channel, reading the zero-padded input
 * copy of conv_cpu_pad (conv_cpu_blocked.cl) so that the window needs no checks; with the
 * window loops unrolled (KH, KW, CG are constants) the loop over the row is straight-line code
 * that LLVM's loop vectorizer turns into float8 arithmetic (stride-2 reads as interleaved
 * loads). Groups of one item: PoCL adds no work-item loop around it.
 * NDRange: (ceil(OH/RB), NB * O), local (1, 1). Needs conv_cpu_blocked's defines and RB.
 */
__kernel void conv_cpu_depthwise(__global const float* restrict input,
                                 __global const float* restrict weights,
                                 __global float* restrict output EPILOGUE_ARGS)
{
    const int z = get_global_id(1);
    const int o = z % O, img = z / O, g = o / OG;
    __global const float* x = input + (img * C + g * CG) * (IHP * IWP);
    __global const float* w = weights + o * (CG * KH * KW);
    const int y_end = min(OH, ((int)get_global_id(0) + 1) * RB);
    for (int oy = get_global_id(0) * RB; oy < y_end; ++oy) {
        __global const float* xr = x + oy * SY * IWP;
        __global float* out = output + ((img * O + o) * OH + oy) * OW;
        for (int ox = 0; ox < OW; ++ox) {
            float acc = 0.0f;
            #pragma unroll
            for (int c = 0; c < CG; ++c)
                #pragma unroll
                for (int ky = 0; ky < KH; ++ky)
                    #pragma unroll
                    for (int kx = 0; kx < KW; ++kx)
                        acc = fma(xr[(c * IHP + ky * DY) * IWP + ox * SX + kx * DX],
                                  w[(c * KH + ky) * KW + kx], acc);
            out[ox] = EPILOGUE(o, acc);
        }
    }
}
