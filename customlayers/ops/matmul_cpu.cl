/* MatMul with M > 1 on CPU devices: a register-blocked micro-kernel with vector arithmetic of
 * VW lanes (8: float8, AVX2; 16: float16, which puts PoCL's arithmetic in AVX-512's zmm), no
 * __local memory and no barriers (gemm.cl's GPU tiles cost PoCL most of a transformer's time:
 * each work-group's barriers are emulated, and its small per-item tiles do not fill a vector).
 * A work item computes MR rows of one batch's output:
 * - B is [K][N] (rows contiguous along N): NB vector runs of columns (VW * NB columns); per k
 *   one broadcast A value per row times NB B vectors: MR * NB vector accumulators, which the
 *   host picks to fit the vector registers (12 of AVX2's 16, 24 of AVX-512's 32).
 * - TRANSPOSE_B (B is [N][K], rows contiguous along K): NB columns, each a vector of partial
 *   dot products along K per row, summed across lanes at the end; the K % VW tail is scalar.
 * Rows past M and columns past N compute a clamped copy and store nothing.
 * NDRange: B [K][N]: (ceil(M / MR), ceil(N / (VW NB)), batches); TRANSPOSE_B:
 * (ceil(N / NB), ceil(M / MR), batches); local (1, 1, 1).
 * PACKED_B 1: B (a constant) comes packed into panels of its columns, [N / (VW NB)][K][VW NB].
 * Needs the defines of matmul.cl, MR, NB, PACKED_B and VW (8 or 16; 8 where not given).
 */
#include "matmul.cl"
#include "cpu_vector.cl"

#if TRANSPOSE_A || A_PICKED
#define A_ROW_CONTIGUOUS 0
#else
#define A_ROW_CONTIGUOUS 1
#endif

#if !TRANSPOSE_B
#define COLS (VW * NB)
/* dimension 0 walks the row blocks: neighbouring work items read the same panel of B, which
   then stays in the core's cache (A is the smaller operand in a transformer's layers) */
/* one floatV run of columns: MR accumulators, one B vector per k (the conv_cpu_blocked shape:
   1-D accumulator arrays, which PoCL keeps in registers where a 2-D array went to memory) */
__kernel void matmul_cpu(GEMM_ARGS)
{
    const int m0 = get_global_id(0) * MR, n0 = get_global_id(1) * COLS;
    const int batch = get_global_id(2);
    __global const float* bm = b + B_OFF + B_BASE(batch);
    int arow[MR];                   /* A element (row i, k) is a[arow[i] + k * ASTEP_K] */
    #pragma unroll
    for (int i = 0; i < MR; ++i) {
        const int m = min(m0 + i, M - 1);
#if TRANSPOSE_A
        arow[i] = A_OFF + (A_BASE(batch) + m) * A_STEP + A_PICK;
#else
        arow[i] = A_OFF + (A_BASE(batch) + A_ROW_OF(m)) * A_STEP + A_PICK;
#endif
    }
#if TRANSPOSE_A
#define ASTEP_K (LDA * A_STEP)
#else
#define ASTEP_K A_STEP
#endif
    floatV acc0[MR];
#if NB > 1
    floatV acc1[MR];
#endif
#if NB > 2
    floatV acc2[MR], acc3[MR];
#endif
    #pragma unroll
    for (int i = 0; i < MR; ++i) {
        acc0[i] = (floatV)0.0f;
#if NB > 1
        acc1[i] = (floatV)0.0f;
#endif
#if NB > 2
        acc2[i] = (floatV)0.0f;
        acc3[i] = (floatV)0.0f;
#endif
    }
#if PACKED_B
    /* B packed into panels [N / COLS][K][COLS] (zero-padded): this item's columns are one
       contiguous stream along K, whatever N */
    const int full = 1;
    __global const float* bk = b + (size_t)(n0 / COLS) * K * COLS;
    for (int k = 0; k < K; ++k, bk += COLS) {
#else
    const int full = n0 + COLS <= N;
    __global const float* bk = bm + n0;
    for (int k = 0; k < K; ++k, bk += LDB) {
#endif
        floatV b0, b1, b2, b3;
        if (full) {
            b0 = LOADV(0, bk);
#if NB > 1
            b1 = LOADV(1, bk);
#endif
#if NB > 2
            b2 = LOADV(2, bk);
            b3 = LOADV(3, bk);
#endif
        } else {                  /* the last, partial run of columns: clamped gathers */
            float t[COLS];
            for (int l = 0; l < COLS; ++l)
                t[l] = bm[k * LDB + min(n0 + l, N - 1)];
            b0 = LOADV(0, t);
#if NB > 1
            b1 = LOADV(1, t);
#endif
#if NB > 2
            b2 = LOADV(2, t);
            b3 = LOADV(3, t);
#endif
        }
        #pragma unroll
        for (int i = 0; i < MR; ++i) {
            const floatV av = (floatV)a[arow[i] + k * ASTEP_K];
            acc0[i] = fma(av, b0, acc0[i]);
#if NB > 1
            acc1[i] = fma(av, b1, acc1[i]);
#endif
#if NB > 2
            acc2[i] = fma(av, b2, acc2[i]);
            acc3[i] = fma(av, b3, acc3[i]);
#endif
        }
    }
    #pragma unroll
    for (int i = 0; i < MR; ++i) {
        float r[COLS];
        STOREV(acc0[i], 0, r);
#if NB > 1
        STOREV(acc1[i], 1, r);
#endif
#if NB > 2
        STOREV(acc2[i], 2, r);
        STOREV(acc3[i], 3, r);
#endif
        if (m0 + i < M)
            for (int l = 0; l < COLS && n0 + l < N; ++l)
                STORE(batch, m0 + i, n0 + l, r[l]);
    }
}
#else
__kernel void matmul_cpu(GEMM_ARGS)
{
    const int n0 = get_global_id(0) * NB, m0 = get_global_id(1) * MR;
    const int batch = get_global_id(2);
    __global const float* bm = b + B_OFF + B_BASE(batch);
    int rows[MR], cols[NB];
    #pragma unroll
    for (int i = 0; i < MR; ++i)
        rows[i] = min(m0 + i, M - 1);
    #pragma unroll
    for (int j = 0; j < NB; ++j)
        cols[j] = min(n0 + j, N - 1);
    floatV acc[MR][NB];
    #pragma unroll
    for (int i = 0; i < MR; ++i)
        #pragma unroll
        for (int j = 0; j < NB; ++j)
            acc[i][j] = (floatV)0.0f;
    int k = 0;
    for (; k + VW <= K; k += VW) {
        floatV bv[NB];
        #pragma unroll
        for (int j = 0; j < NB; ++j)
            bv[j] = LOADV(0, bm + cols[j] * LDB + k);
        #pragma unroll
        for (int i = 0; i < MR; ++i) {
#if A_ROW_CONTIGUOUS
            const floatV av = LOADV(0, a + A_OFF + A_BASE(batch) + A_ROW_OF(rows[i]) + k);
#else
            float t[VW];
            #pragma unroll
            for (int l = 0; l < VW; ++l)
                t[l] = A_AT(batch, rows[i], k + l);
            const floatV av = LOADV(0, t);
#endif
            #pragma unroll
            for (int j = 0; j < NB; ++j)
                acc[i][j] = mad(av, bv[j], acc[i][j]);
        }
    }
    #pragma unroll
    for (int i = 0; i < MR; ++i) {
        if (m0 + i >= M)
            break;
        #pragma unroll
        for (int j = 0; j < NB; ++j) {
#if VW == 16
            const float8 h8 = acc[i][j].lo + acc[i][j].hi;
            const float4 h4 = h8.lo + h8.hi;
#else
            const float4 h4 = acc[i][j].lo + acc[i][j].hi;
#endif
            const float2 h2 = h4.lo + h4.hi;
            float s = h2.x + h2.y;
            for (int t = k; t < K; ++t)
                s = mad(A_AT(batch, rows[i], t), bm[cols[j] * LDB + t], s);
            if (n0 + j < N)
                STORE(batch, m0 + i, n0 + j, s);
        }
    }
}
#endif
