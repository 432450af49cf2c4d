/* Scaled dot-product attention in one launch (ops/attention/fused.py's FusedAttention):
 * softmax(Q K^T * SCALE + MASK) V over the last axis, for the MatMul, scale, mask Add, Softmax,
 * MatMul chain that exporters write (passes/attention_folding.py), without writing the scores.
 *
 * A work-group of TR x TC items takes BQ = 4 TR query rows (Q^T, times the scale, in __local
 * memory once). Per block of BK = 4 KC TC keys:
 *  1. the block's K^T and V go to __local memory (with PREFETCH, from registers the block
 *     before filled while it computed);
 *  2. each item computes a tile of scores, rows 4 tr + i and keys 4 tc + 4 TC u + e, as a
 *     GEMM's register block: per step of d, 1 + KC float4 reads of __local memory for 16 KC
 *     multiply-adds;
 *  3. the online softmax: the block max of each row over the row's TC items (adjacent lanes:
 *     butterfly shuffles on NVIDIA, __local memory elsewhere), the running max m, exp, and the
 *     outputs rescaled by exp(m_old - m_new); each item keeps its own part of the row sums, added
 *     over the row's items once at the end;
 *  4. the probabilities go to __local memory, and each item adds P V to its 4 rows x VN
 *     output columns (4 tc + 4 TC u + e), again a register block.
 * A row whose scores are all -inf ends as 0 / 0 = NaN, as Softmax then MatMul give; a NaN or
 * +inf score makes its row NaN, as they do. With every score so far -inf, the max subtracted is
 * 0, so that exp(-inf) = 0 keeps the sums at 0 until a finite score comes.
 *
 * Every tensor is read through a 4-D view of its buffer (batch 1, batch 2, row, column): an
 * offset and four strides (Q: b1 b2 s d; K: b1 b2 t d; V: b1 b2 t dv; Y: b1 b2 s dv; the mask:
 * b1 b2 s t, 0 along an axis it broadcasts), so that the head split and merge of the exporters
 * (Reshape, Transpose, a Gather of q, k or v from one projection) are read where they lie.
 *
 * NDRange: (B1 * B2 * ceil(S / BQ) * TR * TC), local (TR * TC). Defines: TR, TC (a power of two
 * up to 32), KC, D, DV, DP (D rounded up to 4), DVP (DV rounded up to 4 TC), HAS_MASK, SHFL_PTX
 * (1: NVIDIA's shfl.sync), PREFETCH.
 */
#define BQ (4 * TR)
#define BK (4 * KC * TC)
#define NT (TR * TC)
#define SK (4 * KC)             /* scores per row of an item: keys 4 tc + 4 TC u + e */
#define KLOAD ((BK * DP + NT - 1) / NT)     /* a block's K and V elements per item */
#define VLOAD ((BK * DVP + NT - 1) / NT)
#define QSTRIDE (BQ + 4)        /* Q^T and P rows, padded against bank conflicts in the stores */
#define KSTRIDE (BK + 4)
#define VN (DVP / TC)           /* output columns per item, in float4s of VN / 4 */

/* a register block's multiply-adds for one float4 of rows (a) and one of columns (b):
   blk[i][c0 + e] += a[i] * b[e] (the scores' and P V's alike) */
#define MAD_4X4(blk, c0, a, b) do { \
    const float4 a_ = (a), b_ = (b); \
    const float av_[4] = {a_.x, a_.y, a_.z, a_.w}, bv_[4] = {b_.x, b_.y, b_.z, b_.w}; \
    _Pragma("unroll") \
    for (int i_ = 0; i_ < 4; ++i_) { \
        _Pragma("unroll") \
        for (int e_ = 0; e_ < 4; ++e_) \
            (blk)[i_][(c0) + e_] = mad(av_[i_], bv_[e_], (blk)[i_][(c0) + e_]); \
    } \
} while (0)

#if SHFL_PTX
inline float lane_xor(float x, int mask)
{
    float y;
    asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(y) : "f"(x), "r"(mask));
    return y;
}
#endif

__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void attention_tiled(__global const float* restrict q, __global const float* restrict k,
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
    __local float qt[DP * QSTRIDE];     /* Q^T: [d][row] */
    __local float ktile[DP * KSTRIDE];  /* K^T: [d][key] */
    __local float vtile[BK * DVP];      /* V: [key][dv] */
    __local float pt[BK * QSTRIDE];     /* P^T: [key][row] */
#if !SHFL_PTX
    __local float red[BQ * TC];
#endif
    const int lid = get_local_id(0);
    const int tr = lid / TC, tc = lid % TC;
    const int blocks = (S + BQ - 1) / BQ;
    const int group = get_group_id(0);
    const int bh = group / blocks;
    const int b1 = bh / B2, b2 = bh % B2;
    const int row0 = (group % blocks) * BQ;
    /* items whose rows all lie past S skip the arithmetic (they still copy tiles and meet the
     * barriers): by warp where the rows' maxima are shuffled (shfl.sync takes the whole warp:
     * 32 / TC row groups), else by row group */
#if SHFL_PTX
    const bool live = row0 + 4 * (tr - tr % (32 / TC)) < S;
#else
    const bool live = row0 + 4 * tr < S;
#endif

    __global const float* qbase = q + qo + b1 * qb1 + b2 * qb2;
    __global const float* kbase = k + ko + b1 * kb1 + b2 * kb2;
    __global const float* vbase = v + vo + b1 * vb1 + b2 * vb2;
    for (int i = lid; i < BQ * DP; i += NT) {
        const int r = i / DP, d = i % DP;
        qt[d * QSTRIDE + r] = row0 + r < S && d < D ? qbase[(row0 + r) * qs + d * qd] * scale
                                                    : 0.0f;
    }
#if HAS_MASK
    __global const float* mbase = mask + mo + b1 * mb1 + b2 * mb2;
#endif

    float m[4], l[4], acc[4][VN];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
#pragma unroll
        for (int c = 0; c < VN; ++c)
            acc[i][c] = 0.0f;
    }

#if PREFETCH
    /* the next block's K and V wait in registers while this block is computed */
    float kreg[KLOAD], vreg[VLOAD];
#define LOAD_BLOCK(t0) \
    for (int n = 0; n < KLOAD; ++n) { \
        const int i = lid + n * NT, j = i / DP, d = i % DP; \
        kreg[n] = i < BK * DP && (t0) + j < T && d < D ? kbase[((t0) + j) * kt + d * kd] : 0.0f; \
    } \
    for (int n = 0; n < VLOAD; ++n) { \
        const int i = lid + n * NT, j = i / DVP, d = i % DVP; \
        vreg[n] = i < BK * DVP && (t0) + j < T && d < DV ? vbase[((t0) + j) * vt + d * vd] \
                                                         : 0.0f; \
    }
    LOAD_BLOCK(0)
#endif
    for (int t0 = 0; t0 < T; t0 += BK) {
        barrier(CLK_LOCAL_MEM_FENCE);           /* the last block's P and V are read */
#if PREFETCH
        for (int n = 0; n < KLOAD; ++n) {
            const int i = lid + n * NT;
            if (i < BK * DP)
                ktile[(i % DP) * KSTRIDE + i / DP] = kreg[n];
        }
        for (int n = 0; n < VLOAD; ++n) {
            const int i = lid + n * NT;
            if (i < BK * DVP)
                vtile[i] = vreg[n];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (t0 + BK < T) {
            LOAD_BLOCK(t0 + BK)
        }
#else
        for (int i = lid; i < BK * DP; i += NT) {
            const int j = i / DP, d = i % DP;
            ktile[d * KSTRIDE + j] = t0 + j < T && d < D ? kbase[(t0 + j) * kt + d * kd] : 0.0f;
        }
        for (int i = lid; i < BK * DVP; i += NT) {
            const int j = i / DVP, d = i % DVP;
            vtile[i] = t0 + j < T && d < DV ? vbase[(t0 + j) * vt + d * vd] : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
#endif

        /* 2. scores: rows 4 tr + i, keys 4 tc + 4 TC u + e (c = 4 u + e); then the block max
         * of each row over the row's TC items */
        float s[4][SK], top[4];
        if (live) {
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int c = 0; c < SK; ++c)
                    s[i][c] = 0.0f;
#pragma unroll 8
            for (int d = 0; d < DP; ++d) {
                const float4 a = vload4(0, qt + d * QSTRIDE + 4 * tr);
#pragma unroll
                for (int u = 0; u < KC; ++u)
                    MAD_4X4(s, 4 * u, a, vload4(0, ktile + d * KSTRIDE + 4 * tc + 4 * TC * u));
            }
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int r = min(row0 + 4 * tr + i, S - 1);
                top[i] = -INFINITY;
#pragma unroll
                for (int c = 0; c < SK; ++c) {
                    const int key = t0 + 4 * tc + 4 * TC * (c / 4) + c % 4;
#if HAS_MASK
                    if (key < T)
                        s[i][c] += mbase[r * ms + key * mt];
#endif
                    s[i][c] = key < T ? s[i][c] : -INFINITY;
                    top[i] = fmax(top[i], s[i][c]);
                }
#if SHFL_PTX
#pragma unroll
                for (int w = 1; w < TC; w <<= 1)
                    top[i] = fmax(top[i], lane_xor(top[i], w));
#else
                red[(4 * tr + i) * TC + tc] = top[i];
#endif
            }
        }
#if !SHFL_PTX
        barrier(CLK_LOCAL_MEM_FENCE);
#endif

        /* 3. the online softmax: the running max, the rescale, the probabilities to P^T */
        if (live) {
#if !SHFL_PTX
#pragma unroll
            for (int i = 0; i < 4; ++i)
                for (int w = 0; w < TC; ++w)
                    top[i] = fmax(top[i], red[(4 * tr + i) * TC + w]);
#endif
            /* e^x as 2^(x log2 e): the scores stay in natural units (a mask of -FLT_MAX, which
             * times log2 e would overflow to -inf, still leaves a row whose every score it
             * masks uniform) and only the difference to the max is scaled; NVIDIA's exp2 skips
             * exp's range reduction: ViT-B/16 b32's 12 layers 2824 -> 2688 us, b1 460 -> 409
             * (H100); the outputs to the same 2.4e-6 of torch's */
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const float mx = fmax(m[i], top[i]);
                const float base = mx == -INFINITY ? 0.0f : mx;
                const float keep = exp2((m[i] - base) * M_LOG2E_F);
                m[i] = mx;
                l[i] *= keep;
#pragma unroll
                for (int c = 0; c < VN; ++c)
                    acc[i][c] *= keep;
#pragma unroll
                for (int c = 0; c < SK; ++c) {
                    s[i][c] = exp2((s[i][c] - base) * M_LOG2E_F);
                    l[i] += s[i][c];
                }
            }
#pragma unroll
            for (int c = 0; c < SK; ++c)
                vstore4((float4)(s[0][c], s[1][c], s[2][c], s[3][c]), 0,
                        pt + (4 * tc + 4 * TC * (c / 4) + c % 4) * QSTRIDE + 4 * tr);
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        /* 4. acc (rows 4 tr + i, columns 4 tc + 4 TC u + e) += P V (over the whole block:
         * stopping at T in a block T cuts short, ViT's last 5 keys of 32, was no faster on an
         * H200: 2818-2822 -> 2827-2830 us for ViT-B/16 b32's 12 layers) */
        if (live) {
#pragma unroll 4
            for (int j = 0; j < BK; ++j) {
                const float4 p = vload4(0, pt + j * QSTRIDE + 4 * tr);
#pragma unroll
                for (int u = 0; u < VN / 4; ++u)
                    MAD_4X4(acc, 4 * u, p, vload4(0, vtile + j * DVP + 4 * tc + 4 * TC * u));
            }
        }
    }

    /* the row sums: each item's part, added over the row's TC items */
#if SHFL_PTX
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int w = 1; w < TC; w <<= 1)
            l[i] += lane_xor(l[i], w);
#else
    barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
    for (int i = 0; i < 4; ++i)
        red[(4 * tr + i) * TC + tc] = l[i];
    barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        float sum = 0.0f;
        for (int w = 0; w < TC; ++w)
            sum += red[(4 * tr + i) * TC + w];
        l[i] = sum;
    }
#endif
    __global float* ybase = y + yo + b1 * yb1 + b2 * yb2;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int r = row0 + 4 * tr + i;
        if (r >= S)
            continue;
        const float inv = out_scale / l[i];
#pragma unroll
        for (int u = 0; u < VN / 4; ++u)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int col = 4 * tc + 4 * TC * u + e;
                if (col < DV)
                    ybase[r * ys + col * yd] = acc[i][4 * u + e] * inv;
            }
    }
}
