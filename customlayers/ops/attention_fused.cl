/* Scaled dot-product attention in one launch (ops/attention/fused.py's FusedAttention):
 * softmax(Q K^T * SCALE + MASK) V over the last axis, for the MatMul, scale, mask Add, Softmax,
 * MatMul chain that exporters write (passes/attention_folding.py), without writing the scores.
 *
 * One work item per query row, BQ rows per work-group: the row's q (times SCALE) and its output
 * stay in registers while blocks of BK keys and their values pass through __local memory, read
 * by every item of the group at the same address (a broadcast: no bank conflicts). The softmax
 * is the online one (a running max m and sum l; the output rescaled by exp(m_old - m_new) when
 * the max grows), so one pass over the keys suffices. A row whose scores are all -inf ends as
 * 0 / 0 = NaN, as Softmax then MatMul give; a NaN or +inf score makes the row NaN, as they do.
 *
 * Every tensor is read through a 4-D view (batch 1, batch 2, row, column) of its buffer: an
 * offset and four strides (Q: b1 b2 s d; K: b1 b2 t d; V: b1 b2 t dv; Y: b1 b2 s dv; the mask:
 * b1 b2 s t, 0 along an axis it broadcasts), so that the head split and merge of the exporters
 * (Reshape, Transpose, Gather of q/k/v from one projection) are read where they lie.
 *
 * NDRange: (B1 * B2 * ceil(S / BQ) * BQ), local (BQ). Defines: BQ, BK, D, DV (head sizes),
 * HAS_MASK (an additive float mask).
 */
#define D4 ((D + 3) / 4)
#define DV4 ((DV + 3) / 4)

__kernel __attribute__((reqd_work_group_size(BQ, 1, 1)))
void attention_fused(__global const float* restrict q, __global const float* restrict k,
                     __global const float* restrict v, __global const float* restrict mask,
                     __global float* restrict y,
                     const int S, const int T, const int B2,
                     const int qo, const int qb1, const int qb2, const int qs, const int qd,
                     const int ko, const int kb1, const int kb2, const int kt, const int kd,
                     const int vo, const int vb1, const int vb2, const int vt, const int vd,
                     const int yo, const int yb1, const int yb2, const int ys, const int yd,
                     const int mo, const int mb1, const int mb2, const int ms, const int mt,
                     const float scale, const float out_scale)
{
    __local float4 keys[BK * D4];
    __local float4 values[BK * DV4];
    const int lid = get_local_id(0);
    const int blocks = (S + BQ - 1) / BQ;
    const int group = get_group_id(0);
    const int bh = group / blocks;
    const int b1 = bh / B2, b2 = bh % B2;
    const int row = (group % blocks) * BQ + lid;
    const int r = min(row, S - 1);      /* past the last row: read the last, write nothing */

    __global const float* qrow = q + qo + b1 * qb1 + b2 * qb2 + r * qs;
    float4 qr[D4];
#pragma unroll
    for (int i = 0; i < D4; ++i) {
        float e[4];
#pragma unroll
        for (int c = 0; c < 4; ++c)
            e[c] = 4 * i + c < D ? qrow[(4 * i + c) * qd] * scale : 0.0f;
        qr[i] = (float4)(e[0], e[1], e[2], e[3]);
    }
    float4 acc[DV4];
#pragma unroll
    for (int i = 0; i < DV4; ++i)
        acc[i] = (float4)(0.0f);
    float m = -INFINITY, l = 0.0f;

    __global const float* kbase = k + ko + b1 * kb1 + b2 * kb2;
    __global const float* vbase = v + vo + b1 * vb1 + b2 * vb2;
#if HAS_MASK
    __global const float* mrow = mask + mo + b1 * mb1 + b2 * mb2 + r * ms;
#endif
    __local float* kflat = (__local float*)keys;
    __local float* vflat = (__local float*)values;

    for (int t0 = 0; t0 < T; t0 += BK) {
        barrier(CLK_LOCAL_MEM_FENCE);           /* the last block's reads are done */
        for (int i = lid; i < BK * D4 * 4; i += BQ) {
            const int j = i / (D4 * 4), d = i % (D4 * 4);
            kflat[i] = t0 + j < T && d < D ? kbase[(t0 + j) * kt + d * kd] : 0.0f;
        }
        for (int i = lid; i < BK * DV4 * 4; i += BQ) {
            const int j = i / (DV4 * 4), d = i % (DV4 * 4);
            vflat[i] = t0 + j < T && d < DV ? vbase[(t0 + j) * vt + d * vd] : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        float s[BK];
        float top = m;
#pragma unroll
        for (int j = 0; j < BK; ++j) {
            float4 dot4 = (float4)(0.0f);
#pragma unroll
            for (int i = 0; i < D4; ++i)
                dot4 = mad(qr[i], keys[j * D4 + i], dot4);
            float x = (dot4.x + dot4.y) + (dot4.z + dot4.w);
#if HAS_MASK
            if (t0 + j < T)
                x += mrow[(t0 + j) * mt];
#endif
            s[j] = t0 + j < T ? x : -INFINITY;
            top = fmax(top, s[j]);
        }
        /* with every score so far -inf, subtract 0: exp(-inf) = 0 keeps l and acc at 0 */
        const float base = top == -INFINITY ? 0.0f : top;
        const float keep = exp(m - base);
        l *= keep;
#pragma unroll
        for (int i = 0; i < DV4; ++i)
            acc[i] *= keep;
#pragma unroll
        for (int j = 0; j < BK; ++j) {
            const float p = exp(s[j] - base);
            l += p;
#pragma unroll
            for (int i = 0; i < DV4; ++i)
                acc[i] = mad((float4)(p), values[j * DV4 + i], acc[i]);
        }
        m = top;
    }
    if (row >= S)
        return;
    const float inv = out_scale / l;
    __global float* yrow = y + yo + b1 * yb1 + b2 * yb2 + row * ys;
#pragma unroll
    for (int i = 0; i < DV4; ++i) {
        const float e[4] = {acc[i].x, acc[i].y, acc[i].z, acc[i].w};
#pragma unroll
        for (int c = 0; c < 4; ++c)
            if (4 * i + c < DV)
                yrow[(4 * i + c) * yd] = e[c] * inv;
    }
}
