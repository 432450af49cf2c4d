/* ConvolutionBackpropData (transposed convolution), one work-item per output element.
 * Output (n, oc, oz, oy, ox) gathers every input (ic, iz, iy, ix) of its group and tap
 * (kz, ky, kx) with oy = iy * SY - PY + ky * DY (same for z and x): for each tap, iy is solved
 * for and skipped unless it is a whole, in-range index. No atomics, no scatter; dense f32.
 * 1-D and 2-D run with depth (and height) 1.
 * The sizes are the argument `geo`, in this order: COUNT N IC OC ID IH IW OD OH OW KD KH KW SZ
 * SY SX DZ DY DX PZ PY PX ICG OCG (ICG, OCG: input and output channels per group), so one
 * program serves every layer. Weights: IC x OCG x KD x KH x KW.
 */
/* the sizes as private constants, read once at the top of each kernel (a name that read the
 * buffer at each use would be loaded again after every store to the output) */
#define DECONV_GEOMETRY(g) const int \
    N = g[1], IC = g[2], OC = g[3], ID = g[4], IH = g[5], IW = g[6], \
    OD = g[7], OH = g[8], OW = g[9], KD = g[10], KH = g[11], KW = g[12], \
    SZ = g[13], SY = g[14], SX = g[15], DZ = g[16], DY = g[17], DX = g[18], \
    PZ = g[19], PY = g[20], PX = g[21], ICG = g[22], OCG = g[23]; \
    const uint COUNT = (uint)g[0]
__kernel void deconv(__global const float* restrict input, __global const float* restrict weights,
                     __global float* restrict output, __constant const int* restrict geo)
{
    DECONV_GEOMETRY(geo);
    const uint i = get_global_id(0);
    if (i >= COUNT)
        return;
    const int ox = i % OW, oy = (i / OW) % OH, oz = (i / (OW * OH)) % OD;
    const int oc = (i / (OW * OH * OD)) % OC, n = i / (OW * OH * OD * OC);
    const int g = oc / OCG, ocg = oc % OCG;
    float sum = 0.0f;
    for (int kz = 0; kz < KD; ++kz) {
        const int tz = oz + PZ - kz * DZ;
        if (tz < 0 || tz % SZ)
            continue;
        const int iz = tz / SZ;
        if (iz >= ID)
            continue;
        for (int ky = 0; ky < KH; ++ky) {
            const int ty = oy + PY - ky * DY;
            if (ty < 0 || ty % SY)
                continue;
            const int iy = ty / SY;
            if (iy >= IH)
                continue;
            for (int kx = 0; kx < KW; ++kx) {
                const int tx = ox + PX - kx * DX;
                if (tx < 0 || tx % SX)
                    continue;
                const int ix = tx / SX;
                if (ix >= IW)
                    continue;
                __global const float* in =
                    input + (((n * IC + g * ICG) * ID + iz) * IH + iy) * IW + ix;
                __global const float* w =
                    weights + (((g * ICG * OCG + ocg) * KD + kz) * KH + ky) * KW + kx;
                for (int ic = 0; ic < ICG; ++ic)
                    sum += in[ic * ID * IH * IW] * w[ic * OCG * KD * KH * KW];
            }
        }
    }
    output[i] = sum;
}
