/* Tiled GEMM core shared by Convolution and MatMul.
 *
 * out[batch][m][n] = sum_k A[batch][m][k] * B[batch][k][n]
 *
 * Each work-group computes a TM x TN tile of the output; each work item RM x RN outputs of it,
 * in fragments of 4 x 4 (or single values, for blocks not a multiple of 4) strided by the
 * work-group's extent, so that neighbouring work items touch neighbouring addresses (coalesced
 * stores, float4 __local reads without conflicts). A and B pass through __local memory TK
 * columns at a time, so every global element is read once per tile, not once per output; the
 * next TK columns are read into registers while this step's are multiplied.
 *
 * The including program defines, before this file:
 *   M N K                    GEMM sizes (names or expressions of the front end's size
 *                            arguments: one program serves every shape)
 *   TM TN TK RM RN           tile geometry; the launch uses local size (TN/RN, TM/RM, 1)
 *   A_AT(batch, m, k)        the value of A (called only with m < M, k < K)
 *   B_AT(batch, k, n)        the value of B (called only with k < K, n < N)
 *   STORE(batch, m, n, v)    writes one output (called only with m < M, n < N)
 *   A_K_FASTEST B_N_FASTEST  1 when that index is the contiguous one in memory: the tile loads
 *                            then walk it fastest, so consecutive work items read consecutive
 *                            addresses
 *   GEMM_ARGS                the kernel's parameter list (buffers, then the sizes)
 *   KSPLIT BATCHES           split-K (optional, KSPLIT > 1): when the output has too few tiles to
 *                            fill the device, the K loop is cut into KSPLIT slices of KCHUNK (a
 *                            multiple of TK); NDRange dimension 2 is BATCHES * KSPLIT; each slice
 *                            writes its partial sums to `partial`, and gemm_splitk_reduce adds
 *                            them up and STOREs (so an epilogue in STORE runs once). KSPLIT is a
 *                            #define (the variant's); `partial`, KCHUNK, BATCHES and SLICES (the
 *                            slices the shape's K gives, at most KSPLIT) are arguments after
 *                            GEMM_ARGS
 */
#ifndef KSPLIT
#define KSPLIT 1
#endif
#if KSPLIT > 1
#define SPLIT_ARGS __global float* restrict partial, const int KCHUNK, const int BATCHES, \
                   const int SLICES
#define GEMM_KERNEL_ARGS GEMM_ARGS, SPLIT_ARGS
#else
#define GEMM_KERNEL_ARGS GEMM_ARGS
#define KCHUNK K
#endif
#define LX (TN / RN)
#define LY (TM / RM)
#define NTHREADS (LX * LY)
/* A work item's outputs come in fragments of FM rows by FN columns that lie side by side: four
 * when its block is a multiple of four, so that it reads each k step's A and B values as float4
 * from __local memory (one 128-bit read for four values: __local bandwidth, not the mads, bounds
 * a GEMM whose work items read one float at a time), else one. Fragment i of rows starts at row
 * (i * LY + ty) * FM of the tile: neighbouring work items hold neighbouring fragments, so a
 * warp's stores and __local reads stay contiguous. */
#define FM (RM % 4 == 0 ? 4 : 1)
#define FN (RN % 4 == 0 ? 4 : 1)
/* +4 floats per k row: the tile stores walk k fastest for some layouts, where a row stride of a
   power of two would put all of a warp's stores in one bank (+4 leaves at most 2 to a bank,
   once per k step), and 4 keeps the float4 reads aligned */
#define A_ROW (TM + 4)
#define B_ROW (TN + 4)
/* global values each work item carries into __local memory per k step */
#define A_LOADS ((TM * TK + NTHREADS - 1) / NTHREADS)
#define B_LOADS ((TN * TK + NTHREADS - 1) / NTHREADS)

/* Element e of the A (B) tile of the k step at k0: its __local offset and its global value (0
 * outside the matrix or the K slice); walks the contiguous index fastest, so that consecutive
 * work items read consecutive addresses. */
#if A_K_FASTEST
#define A_TILE_POS(e) ((e) % TK * A_ROW + (e) / TK)
#define A_TILE_M(e) ((e) / TK)
#define A_TILE_K(e) ((e) % TK)
#else
#define A_TILE_POS(e) ((e) / TM * A_ROW + (e) % TM)
#define A_TILE_M(e) ((e) % TM)
#define A_TILE_K(e) ((e) / TM)
#endif
#if B_N_FASTEST
#define B_TILE_POS(e) ((e) / TN * B_ROW + (e) % TN)
#define B_TILE_N(e) ((e) % TN)
#define B_TILE_K(e) ((e) / TN)
#else
#define B_TILE_POS(e) ((e) % TK * B_ROW + (e) / TK)
#define B_TILE_N(e) ((e) / TK)
#define B_TILE_K(e) ((e) % TK)
#endif

/* This work item's share of the A and B tiles of the k step at k_from, into a_next and b_next
   (registers); the kernel's own variables name the tile and the K slice. */
#define LOAD_TILES(k_from) do { \
    _Pragma("unroll") \
    for (int l = 0; l < A_LOADS; ++l) { \
        const int e = tid + l * NTHREADS; \
        const int m = m0 + A_TILE_M(e), k = (k_from) + A_TILE_K(e); \
        a_next[l] = (e < TM * TK && m < M && k < k_end) ? A_AT(batch, m, k) : 0.0f; \
    } \
    _Pragma("unroll") \
    for (int l = 0; l < B_LOADS; ++l) { \
        const int e = tid + l * NTHREADS; \
        const int n = n0 + B_TILE_N(e), k = (k_from) + B_TILE_K(e); \
        b_next[l] = (e < TN * TK && n < N && k < k_end) ? B_AT(batch, k, n) : 0.0f; \
    } \
} while (0)

__kernel __attribute__((reqd_work_group_size(LX, LY, 1)))
void gemm_tiled(GEMM_KERNEL_ARGS)
{
    __local float a_tile[TK * A_ROW] __attribute__((aligned(16)));
    __local float b_tile[TK * B_ROW] __attribute__((aligned(16)));

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

    /* the next k step's values wait in registers while this one's are multiplied: their global
       latency hides behind the mads (one __local buffer, two barriers per step) */
    float a_next[A_LOADS], b_next[B_LOADS];
    LOAD_TILES(k_begin);

    for (int k0 = k_begin; k0 < k_end; k0 += TK) {
        #pragma unroll
        for (int l = 0; l < A_LOADS; ++l) {
            const int e = tid + l * NTHREADS;
            if (e < TM * TK)
                a_tile[A_TILE_POS(e)] = a_next[l];
        }
        #pragma unroll
        for (int l = 0; l < B_LOADS; ++l) {
            const int e = tid + l * NTHREADS;
            if (e < TN * TK)
                b_tile[B_TILE_POS(e)] = b_next[l];
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        if (k0 + TK < k_end)
            LOAD_TILES(k0 + TK);

        #pragma unroll
        for (int kk = 0; kk < TK; ++kk) {
            float a[RM], b[RN];
            #pragma unroll
            for (int i = 0; i < RM / FM; ++i) {
#if RM % 4 == 0
                const float4 v = vload4(0, a_tile + kk * A_ROW + (i * LY + ty) * 4);
                a[i * 4] = v.s0; a[i * 4 + 1] = v.s1; a[i * 4 + 2] = v.s2; a[i * 4 + 3] = v.s3;
#else
                a[i] = a_tile[kk * A_ROW + i * LY + ty];
#endif
            }
            #pragma unroll
            for (int j = 0; j < RN / FN; ++j) {
#if RN % 4 == 0
                const float4 v = vload4(0, b_tile + kk * B_ROW + (j * LX + tx) * 4);
                b[j * 4] = v.s0; b[j * 4 + 1] = v.s1; b[j * 4 + 2] = v.s2; b[j * 4 + 3] = v.s3;
#else
                b[j] = b_tile[kk * B_ROW + j * LX + tx];
#endif
            }
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
        const int m = m0 + (i / FM * LY + ty) * FM + i % FM;
        #pragma unroll
        for (int j = 0; j < RN; ++j) {
            const int n = n0 + (j / FN * LX + tx) * FN + j % FN;
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
/* The second half of split-K: one work item per output adds the SLICES partial sums. */
__kernel void gemm_splitk_reduce(GEMM_KERNEL_ARGS)
{
    const int i = get_global_id(0);
    if (i >= BATCHES * M * N)
        return;
    float sum = 0.0f;
    for (int s = 0; s < SLICES; ++s)
        sum += partial[s * (BATCHES * M * N) + i];
    const int n = i % N, m = i / N % M, batch = i / (M * N);
    STORE(batch, m, n, sum);
}
#endif
