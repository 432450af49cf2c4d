/* 3-D convolution (NCDHW input, OIDHW weights; grouped ones are the same memory as GOIDHW):
 * one work item per output element, the window read from global memory. Correctness first:
 * 3-D layers are rare in the models this runs, so there is no tiled variant.
 * NDRange: (OW, OH, N * O * OD). Needs: C O G CG OG, ID IH IW, OD OH OW, KD KH KW,
 * SZ SY SX (strides), DZ DY DX (dilations), PZ PY PX (pads at the start of each axis), all
 * kernel arguments (CONV_SIZES, ops/nn/_sizes.py), and the FUSED_* defines of conv_epilogue.cl.
 */
#include "conv_epilogue.cl"
__kernel void conv3d_direct(__global const float* restrict input,
                            __global const float* restrict weights,
                            __global float* restrict output EPILOGUE_ARGS CONV_SIZES)
{
    const int ox = get_global_id(0), oy = get_global_id(1), z = get_global_id(2);
    if (ox >= OW || oy >= OH)
        return;
    /* z = (img * O + o) * OD + oz */
    const int oz = z % OD, plane = z / OD;
    const int img = plane / O, o = plane % O, g = o / OG;
    __global const float* w = weights + o * (CG * KD * KH * KW);
    __global const float* in = input + (img * C + g * CG) * (ID * IH * IW);
    const int iz0 = oz * SZ - PZ, iy0 = oy * SY - PY, ix0 = ox * SX - PX;
    float acc = 0.0f;
    for (int c = 0; c < CG; ++c) {
        for (int kz = 0; kz < KD; ++kz) {
            const int iz = iz0 + kz * DZ;
            if ((uint)iz >= (uint)ID)
                continue;
            for (int ky = 0; ky < KH; ++ky) {
                const int iy = iy0 + ky * DY;
                if ((uint)iy >= (uint)IH)
                    continue;
                for (int kx = 0; kx < KW; ++kx) {
                    const int ix = ix0 + kx * DX;
                    if ((uint)ix < (uint)IW)
                        acc = mad(in[((c * ID + iz) * IH + iy) * IW + ix],
                                  w[((c * KD + kz) * KH + ky) * KW + kx], acc);
                }
            }
        }
    }
    {
        const int at = (z * OH + oy) * OW + ox;
        output[at] = EPILOGUE(at, o, acc);
    }
}
