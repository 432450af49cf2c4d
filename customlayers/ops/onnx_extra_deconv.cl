/* ConvolutionBackpropData (transposed convolution), one work-item per output element.
 * Output (n, oc, oz, oy, ox) gathers every input (ic, iz, iy, ix) of its group and tap
 * (kz, ky, kx) with oy = iy * SY - PY + ky * DY (same for z and x): for each tap, iy is solved
 * for and skipped unless it is a whole, in-range index. No atomics, no scatter; dense f32.
 * 1-D and 2-D run with depth (and height) 1.
 * The sizes are the argument `geo`, in this order: COUNT N IC OC ID IH IW OD OH OW KD KH KW SZ
 * SY SX DZ DY DX PZ PY PX ICG OCG (ICG, OCG: input and output channels per group), so one
 * program serves every layer. Weights: IC x OCG x KD x KH x KW.
 */
#define COUNT ((uint)geo[0])
#define N geo[1]
#define IC geo[2]
#define OC geo[3]
#define ID geo[4]
#define IH geo[5]
#define IW geo[6]
#define OD geo[7]
#define OH geo[8]
#define OW geo[9]
#define KD geo[10]
#define KH geo[11]
#define KW geo[12]
#define SZ geo[13]
#define SY geo[14]
#define SX geo[15]
#define DZ geo[16]
#define DY geo[17]
#define DX geo[18]
#define PZ geo[19]
#define PY geo[20]
#define PX geo[21]
#define ICG geo[22]
#define OCG geo[23]
__kernel void deconv(__global const float* restrict input, __global const float* restrict weights,
                     __global float* restrict output, __constant const int* geo)
{
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
