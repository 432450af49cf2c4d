/* ConvolutionBackpropData (transposed convolution), one work-item per output element.
 * Output (n, oc, oy, ox) gathers every input (ic, iy, ix) and tap (ky, kx) with
 * oy = iy * SY - PY + ky * DY (same for x): for each tap, iy is solved for and skipped unless
 * it is a whole, in-range index. No atomics, no scatter; dense NCHW f32.
 * Needs: COUNT N IC OC IH IW OH OW KH KW SY SX DY DX PY PX. Weights: IC x OC x KH x KW.
 */
__kernel void deconv(__global const float* restrict input, __global const float* restrict weights,
                     __global float* restrict output)
{
    const uint i = get_global_id(0);
    if (i >= COUNT)
        return;
    const int ox = i % OW, oy = (i / OW) % OH, oc = (i / (OW * OH)) % OC, n = i / (OW * OH * OC);
    float sum = 0.0f;
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
            __global const float* in = input + ((n * IC) * IH + iy) * IW + ix;
            __global const float* w = weights + (oc * KH + ky) * KW + kx;
            for (int ic = 0; ic < IC; ++ic)
                sum += in[ic * IH * IW] * w[ic * OC * KH * KW];
        }
    }
    output[i] = sum;
}
