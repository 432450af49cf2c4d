/* Tiled GEMM core shared by Convolution and MatMul.
 *
 * out[batch][m][n] = sum_k A[batch][m][k] * B[batch][k][n]
 *
 * Each work-group computes a TM x TN tile of the output; each work item RM x RN outputs of it,
 * strided by the work-group's extent so that neighbouring work items touch neighbouring
 * addresses (coalesced stores, conflict-free __local reads). A and B pass through __local
 * memory TK columns at a time, so every global element is read once per tile, not once per
 * output.
 *
 * The including program defines, before this file:
 *   M N K                    GEMM sizes (static, so index arithmetic strength-reduces)
 *   TM TN TK RM RN           tile geometry; the launch uses local size (TN/RN, TM/RM, 1)
 *   A_AT(batch, m, k)        the value of A (called only with m < M, k < K)
 *   B_AT(batch, k, n)        the value of B (called only with k < K, n < N)
 *   STORE(batch, m, n, v)    writes one output (called only with m < M, n < N)
 *   A_K_FASTEST B_N_FASTEST  1 when that index is the contiguous one in memory: the tile loads
 *                            then walk it fastest, so consecutive work items read consecutive
 *                            addresses
 *   GEMM_ARGS                the kernel's parameter list
 */
#define LX (TN / RN)
#define LY (TM / RM)
#define NTHREADS (LX * LY)

__kernel __attribute__((reqd_work_group_size(LX, LY, 1)))
void gemm_tiled(GEMM_ARGS)
{
    /* +1 column: the tile stores below walk k fastest for some layouts, and a stride of a
       power of two would put every store of a warp in one local-memory bank */
    __local float a_tile[TK][TM + 1];
    __local float b_tile[TK][TN + 1];

    const int tx = get_local_id(0);
    const int ty = get_local_id(1);
    const int tid = ty * LX + tx;
    const int n0 = get_group_id(0) * TN;
    const int m0 = get_group_id(1) * TM;
    const int batch = get_global_id(2);

    float acc[RM][RN];
    #pragma unroll
    for (int i = 0; i < RM; ++i) {
        #pragma unroll
        for (int j = 0; j < RN; ++j)
            acc[i][j] = 0.0f;
    }

    for (int k0 = 0; k0 < K; k0 += TK) {
        for (int e = tid; e < TM * TK; e += NTHREADS) {
#if A_K_FASTEST
            const int kk = e % TK, mm = e / TK;
#else
            const int mm = e % TM, kk = e / TM;
#endif
            const int m = m0 + mm, k = k0 + kk;
            a_tile[kk][mm] = (m < M && k < K) ? A_AT(batch, m, k) : 0.0f;
        }
        for (int e = tid; e < TN * TK; e += NTHREADS) {
#if B_N_FASTEST
            const int nn = e % TN, kk = e / TN;
#else
            const int kk = e % TK, nn = e / TK;
#endif
            const int n = n0 + nn, k = k0 + kk;
            b_tile[kk][nn] = (n < N && k < K) ? B_AT(batch, k, n) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        #pragma unroll
        for (int kk = 0; kk < TK; ++kk) {
            float a[RM], b[RN];
            #pragma unroll
            for (int i = 0; i < RM; ++i)
                a[i] = a_tile[kk][ty + i * LY];
            #pragma unroll
            for (int j = 0; j < RN; ++j)
                b[j] = b_tile[kk][tx + j * LX];
            #pragma unroll
            for (int i = 0; i < RM; ++i) {
                #pragma unroll
                for (int j = 0; j < RN; ++j)
                    acc[i][j] = mad(a[i], b[j], acc[i][j]);
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    #pragma unroll
    for (int i = 0; i < RM; ++i) {
        const int m = m0 + ty + i * LY;
        #pragma unroll
        for (int j = 0; j < RN; ++j) {
            const int n = n0 + tx + j * LX;
            if (m < M && n < N)
                STORE(batch, m, n, acc[i][j]);
        }
    }
}
