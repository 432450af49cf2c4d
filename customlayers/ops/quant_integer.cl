// MatMulInteger and ConvInteger (ops/quant/integer.py): int8/uint8 operands minus their zero
// points, products summed in int (exact: no float anywhere), one work-item per output element.
// The dims are kernel arguments. Baked: A_TYPE, B_TYPE (the operands' C types), AZP_TYPE,
// BZP_TYPE.

// out[b, m, n] = sum_k (a[b, m, k] - azp[m or 0]) * (w[b, k, n] - bzp[n or 0]); a batch index
// b reads A at b * a_batch and B at b * b_batch (0: the operand is broadcast)
__kernel void matmul_integer(__global const A_TYPE* restrict a, __global const B_TYPE* restrict w,
                             __global const AZP_TYPE* restrict azp,
                             __global const BZP_TYPE* restrict bzp, __global int* restrict out,
                             const int batches, const int M, const int N, const int K,
                             const long a_batch, const long b_batch, const int azp_step,
                             const int bzp_step)
{
    const long i = get_global_id(0);
    if (i >= (long)batches * M * N) return;
    const int n = (int)(i % N);
    const int m = (int)((i / N) % M);
    const long b = i / ((long)M * N);
    __global const A_TYPE* row = a + b * a_batch + (long)m * K;
    __global const B_TYPE* col = w + b * b_batch + n;
    const int za = (int)azp[m * azp_step], zb = (int)bzp[n * bzp_step];
    int acc = 0;
    for (int k = 0; k < K; ++k)
        acc += ((int)row[k] - za) * ((int)col[(long)k * N] - zb);
    out[i] = acc;
}

// out[n, oc, oy, ox] = sum over the group's channels and the window of
// (x - xzp) * (w[oc] - wzp[oc or 0]); padding reads the zero point (contributes 0)
__kernel void conv_integer(__global const A_TYPE* restrict x, __global const B_TYPE* restrict w,
                           __global const AZP_TYPE* restrict xzp,
                           __global const BZP_TYPE* restrict wzp, __global int* restrict out,
                           __constant const int* restrict g)
{
    // g: N, C, H, W, OC, OH, OW, KH, KW, SY, SX, DY, DX, PY, PX, GROUP, WZP_STEP
    const int N = g[0], C = g[1], H = g[2], W = g[3], OC = g[4], OH = g[5], OW = g[6];
    const int KH = g[7], KW = g[8], SY = g[9], SX = g[10], DY = g[11], DX = g[12];
    const int PY = g[13], PX = g[14], GROUP = g[15], WZP_STEP = g[16];
    const long i = get_global_id(0);
    if (i >= (long)N * OC * OH * OW) return;
    const int ox = (int)(i % OW), oy = (int)((i / OW) % OH);
    const int oc = (int)((i / ((long)OW * OH)) % OC);
    const int n = (int)(i / ((long)OW * OH * OC));
    const int cg = C / GROUP, c0 = (oc / (OC / GROUP)) * cg;
    const int zx = (int)xzp[0], zw = (int)wzp[oc * WZP_STEP];
    int acc = 0;
    for (int c = 0; c < cg; ++c) {
        __global const A_TYPE* plane = x + ((long)n * C + c0 + c) * H * W;
        __global const B_TYPE* taps = w + ((long)oc * cg + c) * KH * KW;
        for (int ky = 0; ky < KH; ++ky) {
            const int iy = oy * SY - PY + ky * DY;
            if (iy < 0 || iy >= H) continue;
            for (int kx = 0; kx < KW; ++kx) {
                const int ix = ox * SX - PX + kx * DX;
                if (ix < 0 || ix >= W) continue;
                acc += ((int)plane[(long)iy * W + ix] - zx) * ((int)taps[ky * KW + kx] - zw);
            }
        }
    }
    out[i] = acc;
}
