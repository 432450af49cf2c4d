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
 *   KSPLIT BATCHES           split-K (optional, KSPLIT > 1): when the output has too few tiles to
 *                            fill the device, the K loop is cut into KSPLIT slices of KCHUNK (a
 *                            multiple of TK); NDRange dimension 2 is BATCHES * KSPLIT; each slice
 *                            writes its partial sums to `partial`, and gemm_splitk_reduce adds
 *                            them up and STOREs (so an epilogue in STORE runs once)
 */
#ifndef KSPLIT
#define KSPLIT 1
#endif
#if KSPLIT > 1
#define GEMM_KERNEL_ARGS GEMM_ARGS, __global float* restrict partial
#else
#define GEMM_KERNEL_ARGS GEMM_ARGS
#define KCHUNK K
#endif
#define LX (TN / RN)
#define LY (TM / RM)
#define NTHREADS (LX * LY)

__kernel __attribute__((reqd_work_group_size(LX, LY, 1)))
void gemm_tiled(GEMM_KERNEL_ARGS)
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
#if KSPLIT > 1
    const int batch = get_global_id(2) % BATCHES;
    const int k_begin = get_global_id(2) / BATCHES * KCHUNK;
    const int k_end = min(k_begin + KCHUNK, K);
#else
    const int batch = get_global_id(2);
    const int k_begin = 0, k_end = K;
#endif

    float acc[RM][RN];
    #pragma unroll
    for (int i = 0; i < RM; ++i) {
        #pragma unroll
        for (int j = 0; j < RN; ++j)
            acc[i][j] = 0.0f;
    }

    for (int k0 = k_begin; k0 < k_end; k0 += TK) {
        for (int e = tid; e < TM * TK; e += NTHREADS) {
#if A_K_FASTEST
            const int kk = e % TK, mm = e / TK;
#else
            const int mm = e % TM, kk = e / TM;
#endif
            const int m = m0 + mm, k = k0 + kk;
            a_tile[kk][mm] = (m < M && k < k_end) ? A_AT(batch, m, k) : 0.0f;
        }
        for (int e = tid; e < TN * TK; e += NTHREADS) {
#if B_N_FASTEST
            const int nn = e % TN, kk = e / TN;
#else
            const int kk = e % TK, nn = e / TK;
#endif
            const int n = n0 + nn, k = k0 + kk;
            b_tile[kk][nn] = (n < N && k < k_end) ? B_AT(batch, k, n) : 0.0f;
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
            if (m < M && n < N) {
#if KSPLIT > 1
                partial[((get_global_id(2) / BATCHES * BATCHES + batch) * M + m) * N + n] = acc[i][j];
#else
                STORE(batch, m, n, acc[i][j]);
#endif
            }
        }
    }
}

#if KSPLIT > 1
/* The second half of split-K: one work item per output adds the KSPLIT partial sums. */
__kernel void gemm_splitk_reduce(GEMM_ARGS, __global const float* restrict partial)
{
    const int i = get_global_id(0);
    if (i >= BATCHES * M * N)
        return;
    float sum = 0.0f;
    #pragma unroll
    for (int s = 0; s < KSPLIT; ++s)
        sum += partial[s * (BATCHES * M * N) + i];
    const int n = i % N, m = i / N % M, batch = i / (M * N);
    STORE(batch, m, n, sum);
}
#endif
