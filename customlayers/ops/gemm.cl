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
 *   GEMM_VEC_A GEMM_VEC_B    (optional) 1 when vload4 at &A_AT(batch, m, k) reads four values
 *                            along the operand's contiguous index (k where A_K_FASTEST, else m;
 *                            n where B_N_FASTEST, else k), and that index's extent is a
 *                            multiple of 4: the front end says so only for aligned operands
 *   GEMM_STAGES              (optional) > 0: gemm_async.cl's pipeline instead of the loop below
 *   KSPLIT BATCHES           split-K (optional, KSPLIT > 1): when the output has too few tiles to
 *                            fill the device, the K loop is cut into KSPLIT slices of KCHUNK (a
 *                            multiple of TK); NDRange dimension 2 is BATCHES * KSPLIT; each slice
 *                            writes its partial sums to `partial`, and gemm_splitk_reduce adds
 *                            them up and STOREs (so an epilogue in STORE runs once). KSPLIT is a
 *                            #define (the variant's); `partial`, KCHUNK, BATCHES and SLICES (the
 *                            slices the shape's K gives, at most KSPLIT) are arguments after
 *                            GEMM_ARGS
 */
/* GEMM_UNROLL comes before the loops over a work item's loads, fragments and outputs. A CPU
   device builds them rolled: it runs its own GEMM kernels (matmul_cpu.cl, conv_cpu*.cl) and
   builds these only to time them (the tuner's `full` never chose one at BERT's and ViT's shapes
   on PoCL) or to test them, and PoCL took 1.7-2.6 s at the first launch of an unrolled variant
   against 0.77 s rolled. The front end says so where it knows the device (GEMM_ROLLED); an op
   run alone knows none, and then the compiler's target macros tell a CPU. */
#if GEMM_ROLLED || defined(__x86_64__) || defined(__i386__) || defined(__aarch64__) || \
    defined(__arm__)
#define GEMM_UNROLL _Pragma("nounroll")
#else
#define GEMM_UNROLL _Pragma("unroll")
#endif
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
#if defined(GEMM_STAGES) && GEMM_STAGES && !B_N_FASTEST
/* gemm_async.cl with B's k contiguous reads each of a work item's columns as a float4 of four
   k steps from a [n][k] tile: columns one apart across the work items keep those reads free of
   bank conflicts (four apart would put a quarter-warp's reads in two bank groups) */
#define FN 1
#else
#define FN (RN % 4 == 0 ? 4 : 1)
#endif
/* +4 floats per k row: the tile stores walk k fastest for some layouts, where a row stride of a
   power of two would put all of a warp's stores in one bank (+4 leaves at most 2 to a bank,
   once per k step), and 4 keeps the float4 reads aligned */
#define A_ROW (TM + 4)
#define B_ROW (TN + 4)

#ifndef GEMM_VEC_A
#define GEMM_VEC_A 0
#endif
#ifndef GEMM_VEC_B
#define GEMM_VEC_B 0
#endif
/* values each work item carries per k step: scalars, or float4 groups along the contiguous
   index (GEMM_VEC_*) */
#if GEMM_VEC_A
#define A_LOADS ((TM * TK / 4 + NTHREADS - 1) / NTHREADS)
typedef float4 a_carry;
#else
#define A_LOADS ((TM * TK + NTHREADS - 1) / NTHREADS)
typedef float a_carry;
#endif
#if GEMM_VEC_B
#define B_LOADS ((TN * TK / 4 + NTHREADS - 1) / NTHREADS)
typedef float4 b_carry;
#else
#define B_LOADS ((TN * TK + NTHREADS - 1) / NTHREADS)
typedef float b_carry;
#endif

/* Element (or float4 group) e of the A (B) tile of a k step: its tile coordinates, walking the
   contiguous index fastest so that consecutive work items read consecutive addresses. */
#if A_K_FASTEST
#define A_GROUP_M(e, w) ((e) / (TK / (w)))
#define A_GROUP_K(e, w) ((e) % (TK / (w)) * (w))
#else
#define A_GROUP_M(e, w) ((e) % (TM / (w)) * (w))
#define A_GROUP_K(e, w) ((e) / (TM / (w)))
#endif
#if B_N_FASTEST
#define B_GROUP_N(e, w) ((e) % (TN / (w)) * (w))
#define B_GROUP_K(e, w) ((e) / (TN / (w)))
#else
#define B_GROUP_N(e, w) ((e) / (TK / (w)))
#define B_GROUP_K(e, w) ((e) % (TK / (w)) * (w))
#endif
#define A_W (GEMM_VEC_A ? 4 : 1)
#define B_W (GEMM_VEC_B ? 4 : 1)

/* This work item's share of the A and B tiles of the k step at k_from, into a_next and b_next
   (registers); 0 outside the matrix or the K slice (a float4 group is wholly in or out). */
#if GEMM_VEC_A
#define READ_A(m, k) vload4(0, &A_AT(batch, m, k))
#define ZERO_A ((float4)0.0f)
#else
#define READ_A(m, k) A_AT(batch, m, k)
#define ZERO_A 0.0f
#endif
#if GEMM_VEC_B
#define READ_B(k, n) vload4(0, &B_AT(batch, k, n))
#define ZERO_B ((float4)0.0f)
#else
#define READ_B(k, n) B_AT(batch, k, n)
#define ZERO_B 0.0f
#endif
#define LOAD_TILES(k_from) do { \
    GEMM_UNROLL \
    for (int l = 0; l < A_LOADS; ++l) { \
        const int e = tid + l * NTHREADS; \
        const int m = m0 + A_GROUP_M(e, A_W), k = (k_from) + A_GROUP_K(e, A_W); \
        a_next[l] = (e < TM * TK / A_W && m < M && k < k_end) ? READ_A(m, k) : ZERO_A; \
    } \
    GEMM_UNROLL \
    for (int l = 0; l < B_LOADS; ++l) { \
        const int e = tid + l * NTHREADS; \
        const int n = n0 + B_GROUP_N(e, B_W), k = (k_from) + B_GROUP_K(e, B_W); \
        b_next[l] = (e < TN * TK / B_W && n < N && k < k_end) ? READ_B(k, n) : ZERO_B; \
    } \
} while (0)

/* a_next and b_next into the __local tiles `at` and `bt`: A as [k][m], B as [k][n] (a float4
   group along the tile's row is one store, one across it four) */
#define STORE_A_GROUP(at, e, v) do { \
    const int tm_ = A_GROUP_M(e, A_W), tk_ = A_GROUP_K(e, A_W); \
    if (A_W == 1) { at[tk_ * A_ROW + tm_] = A_SCALAR(v); } \
    else if (!A_K_FASTEST) { vstore4(A_VEC(v), 0, at + tk_ * A_ROW + tm_); } \
    else { const float4 q_ = A_VEC(v); at[tk_ * A_ROW + tm_] = q_.s0; \
           at[(tk_ + 1) * A_ROW + tm_] = q_.s1; at[(tk_ + 2) * A_ROW + tm_] = q_.s2; \
           at[(tk_ + 3) * A_ROW + tm_] = q_.s3; } \
} while (0)
#define STORE_B_GROUP(bt, e, v) do { \
    const int tn_ = B_GROUP_N(e, B_W), tk_ = B_GROUP_K(e, B_W); \
    if (B_W == 1) { bt[tk_ * B_ROW + tn_] = B_SCALAR(v); } \
    else if (B_N_FASTEST) { vstore4(B_VEC(v), 0, bt + tk_ * B_ROW + tn_); } \
    else { const float4 q_ = B_VEC(v); bt[tk_ * B_ROW + tn_] = q_.s0; \
           bt[(tk_ + 1) * B_ROW + tn_] = q_.s1; bt[(tk_ + 2) * B_ROW + tn_] = q_.s2; \
           bt[(tk_ + 3) * B_ROW + tn_] = q_.s3; } \
} while (0)
/* the carried value as what each branch above needs (the branch not taken still compiles) */
#if GEMM_VEC_A
#define A_VEC(v) (v)
#define A_SCALAR(v) ((v).s0)
#else
#define A_VEC(v) ((float4)(v))
#define A_SCALAR(v) (v)
#endif
#if GEMM_VEC_B
#define B_VEC(v) (v)
#define B_SCALAR(v) ((v).s0)
#else
#define B_VEC(v) ((float4)(v))
#define B_SCALAR(v) (v)
#endif
#define STORE_TILES(at, bt) do { \
    GEMM_UNROLL \
    for (int l = 0; l < A_LOADS; ++l) { \
        const int e = tid + l * NTHREADS; \
        if (e < TM * TK / A_W) \
            STORE_A_GROUP(at, e, a_next[l]); \
    } \
    GEMM_UNROLL \
    for (int l = 0; l < B_LOADS; ++l) { \
        const int e = tid + l * NTHREADS; \
        if (e < TN * TK / B_W) \
            STORE_B_GROUP(bt, e, b_next[l]); \
    } \
} while (0)

/* fragment i of this work item's A values (j of its B values) at k step kk of a tile */
#if RM % 4 == 0
#define READ_A_FRAGMENT(at, kk, i) do { \
    const float4 v_ = vload4(0, (at) + (kk) * A_ROW + ((i) * LY + ty) * 4); \
    UNPACK4(a, (i) * 4, v_); \
} while (0)
#else
#define READ_A_FRAGMENT(at, kk, i) (a[i] = (at)[(kk) * A_ROW + (i) * LY + ty])
#endif
#if RN % 4 == 0
#define READ_B_FRAGMENT(bt, kk, j) do { \
    const float4 v_ = vload4(0, (bt) + (kk) * B_ROW + ((j) * LX + tx) * 4); \
    UNPACK4(b, (j) * 4, v_); \
} while (0)
#else
#define READ_B_FRAGMENT(bt, kk, j) (b[j] = (bt)[(kk) * B_ROW + (j) * LX + tx])
#endif

/* the TK k steps of the tiles `at` and `bt` into acc: each work item's fragments of A and B
   from __local memory (float4 reads where its block is a multiple of 4), then RM x RN mads */
#define MULTIPLY_TILES(at, bt) do { \
    GEMM_UNROLL \
    for (int kk = 0; kk < TK; ++kk) { \
        float a[RM], b[RN]; \
        GEMM_UNROLL \
        for (int i = 0; i < RM / FM; ++i) \
            READ_A_FRAGMENT(at, kk, i); \
        GEMM_UNROLL \
        for (int j = 0; j < RN / FN; ++j) \
            READ_B_FRAGMENT(bt, kk, j); \
        MAD_OUTER(); \
    } \
} while (0)
/* acc += a (RM values) times b (RN values): one k step's RM x RN mads */
#define MAD_OUTER() do { \
    GEMM_UNROLL \
    for (int i = 0; i < RM; ++i) { \
        GEMM_UNROLL \
        for (int j = 0; j < RN; ++j) \
            acc[i][j] = mad(a[i], b[j], acc[i][j]); \
    } \
} while (0)

/* where this work item is: its place in the group (tx, ty; tid in all), the group's output
   tile (m0, n0), its batch, and the K range it sums (its split-K slice's, else all of K) */
#if KSPLIT > 1
#define GROUP_K_RANGE() \
    const int batch = get_global_id(2) % BATCHES; \
    const int k_begin = get_global_id(2) / BATCHES * KCHUNK; \
    const int k_end = min(k_begin + KCHUNK, K)
#else
#define GROUP_K_RANGE() \
    const int batch = get_global_id(2); \
    const int k_begin = 0, k_end = K
#endif
#define GROUP_PLACE() \
    const int tx = get_local_id(0); \
    const int ty = get_local_id(1); \
    const int tid = ty * LX + tx; \
    const int n0 = get_group_id(0) * TN; \
    const int m0 = get_group_id(1) * TM; \
    GROUP_K_RANGE()
/* four values of a float4 into consecutive places of an array */
#define UNPACK4(arr, at, v) do { \
    (arr)[(at)] = (v).s0; (arr)[(at) + 1] = (v).s1; (arr)[(at) + 2] = (v).s2; \
    (arr)[(at) + 3] = (v).s3; \
} while (0)

/* the work item's RM x RN sums, zeroed */
#define ZERO_ACC() do { \
    GEMM_UNROLL \
    for (int i = 0; i < RM; ++i) { \
        GEMM_UNROLL \
        for (int j = 0; j < RN; ++j) \
            acc[i][j] = 0.0f; \
    } \
} while (0)
/* the work item's outputs (fragment i of rows, j of columns: see FM FN): the front end's STORE
   (its epilogue), or with split-K the slice's partial sums */
#if KSPLIT > 1
#define WRITE_ONE(m, n, v) \
    (partial[((get_global_id(2) / BATCHES * BATCHES + batch) * M + (m)) * N + (n)] = (v))
#else
#define WRITE_ONE(m, n, v) STORE(batch, m, n, v)
#endif
#define WRITE_OUTPUTS() do { \
    GEMM_UNROLL \
    for (int i = 0; i < RM; ++i) { \
        const int m_ = m0 + (i / FM * LY + ty) * FM + i % FM; \
        GEMM_UNROLL \
        for (int j = 0; j < RN; ++j) { \
            const int n_ = n0 + (j / FN * LX + tx) * FN + j % FN; \
            if (m_ < M && n_ < N) \
                WRITE_ONE(m_, n_, acc[i][j]); \
        } \
    } \
} while (0)

#ifndef GEMM_STAGES
#define GEMM_STAGES 0
#endif
#if GEMM_STAGES
/* the tiles copied to __local memory GEMM_STAGES k steps ahead, without registers between
   (NVIDIA's cp.async where the device has it) */
#include "gemm_async.cl"
#else
__kernel __attribute__((reqd_work_group_size(LX, LY, 1)))
void gemm_tiled(GEMM_KERNEL_ARGS)
{
    __local float a_tile[TK * A_ROW] __attribute__((aligned(16)));
    __local float b_tile[TK * B_ROW] __attribute__((aligned(16)));

    GROUP_PLACE();

    float acc[RM][RN];
    ZERO_ACC();

    /* the next k step's values wait in registers while this one's are multiplied: their global
       latency hides behind the mads */
    a_carry a_next[A_LOADS];
    b_carry b_next[B_LOADS];
    LOAD_TILES(k_begin);
    /* one __local buffer, two barriers per step: two buffers and one barrier were measured
       no faster on an H100 (stop 23), so the simpler loop stays */
    for (int k0 = k_begin; k0 < k_end; k0 += TK) {
        STORE_TILES(a_tile, b_tile);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (k0 + TK < k_end)
            LOAD_TILES(k0 + TK);
        MULTIPLY_TILES(a_tile, b_tile);
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    WRITE_OUTPUTS();
}
#endif

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
