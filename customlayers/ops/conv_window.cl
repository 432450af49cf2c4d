/* One input channel's share of a direct convolution's output: acc plus the KH x KW window of
 * plane `c` of `in` (the group's planes) at (iy0, ix0) times the channel's weights `w`, in
 * (ky, kx) order, skipping taps outside the image. conv_direct.cl and conv_direct_split.cl sum
 * their channels with it, so both add each output's terms in this order.
 * KH KW are #defines (the loops unroll); the input's size and the dilations are the kernel's
 * arguments, passed on by CONV_WINDOW_SIZES.
 */
#if SIZES_BAKED    /* a GPU's program: the sizes are #defines (ops/nn/_sizes.py: baked) */
#define CONV_WINDOW_SIZES
#define CONV_WINDOW_PARAMS
#else
#define CONV_WINDOW_SIZES , IH, IW, DY, DX
#define CONV_WINDOW_PARAMS , const int IH, const int IW, const int DY, const int DX
#endif
inline float conv_window(__global const float* restrict in, __global const float* restrict w,
                         int c, int iy0, int ix0, float acc CONV_WINDOW_PARAMS)
{
    #pragma unroll
    for (int ky = 0; ky < KH; ++ky) {
        const int iy = iy0 + ky * DY;
        /* one unsigned compare covers both "negative" and "past the end" */
        if ((uint)iy >= (uint)IH)
            continue;
        #pragma unroll
        for (int kx = 0; kx < KW; ++kx) {
            const int ix = ix0 + kx * DX;
            if ((uint)ix < (uint)IW)
                acc = mad(in[(c * IH + iy) * IW + ix], w[(c * KH + ky) * KW + kx], acc);
        }
    }
    return acc;
}
