/* gemm.cl's gemm_tiled as a pipeline of __local copies (GEMM_STAGES > 0), included by gemm.cl.
 *
 * gemm.cl's own loop carries the next k step's values in registers and stores them to __local
 * memory itself. Here each k step's tiles go from global to __local memory directly, 16 bytes
 * per copy (4 where B is not in float4s; PTX cp.async on NVIDIA sm_80+, GEMM_ASYNC_PTX),
 * GEMM_STAGES - 1 steps ahead of the step being multiplied, in GEMM_STAGES __local buffers: no
 * registers hold the copies, and one barrier per step. On an H100 a 64 x 128 tile of 8 x 8 blocks with 2 stages ran BERT's and
 * ViT's GEMMs at 38-43 TFLOP/s against 34-37 for gemm.cl's best tiling (stop 24).
 *
 * Each tile keeps its operand's layout: A's [m][k] where k is contiguous (read as a float4 of
 * four k steps per row), else [k][m] (a float4 of four rows per k step, as gemm.cl); B's [k][n]
 * where n is contiguous, else [n][k] (gemm.cl's FN is then 1: see there).
 * Needs GEMM_VEC_A (every float4 group of A aligned and wholly in or out); GEMM_VEC_B likewise,
 * or else a B of [k][n] whose values are copied one at a time (4-byte cp.async: a 1x1
 * convolution over planes that are not whole float4s, the images side by side along n);
 * RM and RN multiples of 4, TK a multiple of 4; GEMM_WAIT = GEMM_STAGES - 2 as a number (the
 * PTX wait takes an immediate). GEMM_ASYNC_PTX 0 makes the copies plain float4 moves through
 * registers, in the same order: the same kernel on any device (how CPU tests check it).
 */
#if !GEMM_VEC_A || RM % 4 != 0 || RN % 4 != 0 || TK % 4 != 0
#error "gemm_async.cl needs an A of float4s and blocks of 4"
#endif
#if !GEMM_VEC_B && !B_N_FASTEST
#error "gemm_async.cl copies a B that is not in float4s one value at a time, as [k][n] only"
#endif
#ifndef GEMM_ASYNC_PTX
#define GEMM_ASYNC_PTX 0
#endif
#if A_K_FASTEST
#define AS_ROW (TK + 4)                  /* A's tile [m][k] */
#define AS_TILE (TM * AS_ROW)
#else
#define AS_ROW A_ROW                     /* A's tile [k][m], as gemm.cl's */
#define AS_TILE (TK * AS_ROW)
#endif
#if B_N_FASTEST
#define BS_ROW B_ROW                     /* B's tile [k][n], as gemm.cl's */
#define BS_TILE (TK * BS_ROW)
#else
#define BS_ROW (TK + 4)                  /* B's tile [n][k] */
#define BS_TILE (TN * BS_ROW)
#endif
#define A_CHUNKS (TM * TK / 4)
#if GEMM_VEC_B
#define B_CHUNKS (TK * TN / 4)
#else
/* a B whose rows are not whole float4s (a 1x1 convolution over planes of 49 pixels, the images
   side by side, or with a stride): one value per copy, each from its own address */
#define B_CHUNKS (TK * TN)
#endif

#if GEMM_ASYNC_PTX
#define GEMM_STR_(x) #x
#define GEMM_STR(x) GEMM_STR_(x)
/* 16 bytes from src to dst, or 16 zero bytes where bytes is 0 (src is then not read) */
inline void copy16(__local float* dst, const __global float* src, const int bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
                 :: "r"((uint)(size_t)dst), "l"(src), "r"(bytes));
}
/* 4 bytes, or 4 zero bytes where bytes is 0 (.ca: the 4-byte form goes through L1) */
inline void copy4(__local float* dst, const __global float* src, const int bytes)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;"
                 :: "r"((uint)(size_t)dst), "l"(src), "r"(bytes));
}
#define COPIES_COMMIT() asm volatile("cp.async.commit_group;")
#define COPIES_WAIT_PENDING() asm volatile("cp.async.wait_group " GEMM_STR(GEMM_WAIT) ";")
#define COPIES_WAIT_ALL() asm volatile("cp.async.wait_all;")
#else
inline void copy16(__local float* dst, const __global float* src, const int bytes)
{
    vstore4(bytes ? vload4(0, src) : (float4)(0.0f), 0, dst);
}
inline void copy4(__local float* dst, const __global float* src, const int bytes)
{
    *dst = bytes ? *src : 0.0f;
}
#define COPIES_COMMIT()
#define COPIES_WAIT_PENDING()
#define COPIES_WAIT_ALL()
#endif

/* B's chunk c of the k step at k_from into the stage's tile bt: a float4, or one value */
#if GEMM_VEC_B
#define ISSUE_B_COPY(c, k_from, bt) do { \
    const int n = B_N_FASTEST ? (c) % (TN / 4) * 4 : (c) / (TK / 4); \
    const int k = B_N_FASTEST ? (c) / (TN / 4) : (c) % (TK / 4) * 4; \
    const int in_ = n0 + n < N && (k_from) + k < k_end; \
    copy16((bt) + (B_N_FASTEST ? k * BS_ROW + n : n * BS_ROW + k), \
           in_ ? &B_AT(batch, (k_from) + k, n0 + n) : &B_AT(batch, 0, 0), in_ ? 16 : 0); \
} while (0)
#else
#define ISSUE_B_COPY(c, k_from, bt) do { \
    const int n = (c) % TN, k = (c) / TN; \
    const int in_ = n0 + n < N && (k_from) + k < k_end; \
    copy4((bt) + k * BS_ROW + n, \
          in_ ? &B_AT(batch, (k_from) + k, n0 + n) : &B_AT(batch, 0, 0), in_ ? 4 : 0); \
} while (0)
#endif

/* this work item's copies of the k step at k_from into stage `st`; a chunk outside the matrix
   or the K slice is zeros (its source is then element (0, 0), never read) */
#define ISSUE_COPIES(k_from, st) do { \
    __local float* at_ = a_tiles + (st) * AS_TILE; \
    __local float* bt_ = b_tiles + (st) * BS_TILE; \
    _Pragma("unroll") \
    for (int l = 0; l < (A_CHUNKS + NTHREADS - 1) / NTHREADS; ++l) { \
        const int c = tid + l * NTHREADS; \
        if (c < A_CHUNKS) { \
            const int m = A_K_FASTEST ? c / (TK / 4) : c % (TM / 4) * 4; \
            const int k = A_K_FASTEST ? c % (TK / 4) * 4 : c / (TM / 4); \
            const int in_ = m0 + m < M && (k_from) + k < k_end; \
            copy16(at_ + (A_K_FASTEST ? m * AS_ROW + k : k * AS_ROW + m), \
                   in_ ? &A_AT(batch, m0 + m, (k_from) + k) : &A_AT(batch, 0, 0), in_ ? 16 : 0); \
        } \
    } \
    _Pragma("unroll") \
    for (int l = 0; l < (B_CHUNKS + NTHREADS - 1) / NTHREADS; ++l) { \
        const int c = tid + l * NTHREADS; \
        if (c < B_CHUNKS) \
            ISSUE_B_COPY(c, k_from, bt_); \
    } \
} while (0)

/* value kk (0..3) of a float4 */
#define LANE(v, kk) ((kk) == 0 ? (v).s0 : (kk) == 1 ? (v).s1 : (kk) == 2 ? (v).s2 : (v).s3)

__kernel __attribute__((reqd_work_group_size(LX, LY, 1)))
void gemm_tiled(GEMM_KERNEL_ARGS)
{
    __local float a_tiles[GEMM_STAGES * AS_TILE] __attribute__((aligned(16)));
    __local float b_tiles[GEMM_STAGES * BS_TILE] __attribute__((aligned(16)));

    GROUP_PLACE();
    const int steps = (k_end - k_begin + TK - 1) / TK;

    float acc[RM][RN];
    ZERO_ACC();

    /* the first GEMM_STAGES - 1 steps in flight; a group is committed for every step, empty
       past the last, so that "all but the newest GEMM_STAGES - 2 groups done" always means
       "this step's copies done" */
    #pragma unroll
    for (int s = 0; s < GEMM_STAGES - 1; ++s) {
        if (s < steps)
            ISSUE_COPIES(k_begin + s * TK, s);
        COPIES_COMMIT();
    }
    for (int step = 0; step < steps; ++step) {
        COPIES_WAIT_PENDING();              /* this work item's copies of `step` are in */
        barrier(CLK_LOCAL_MEM_FENCE);       /* everyone's; and step - 1's stage is free */
        if (step + GEMM_STAGES - 1 < steps)
            ISSUE_COPIES(k_begin + (step + GEMM_STAGES - 1) * TK,
                         (step + GEMM_STAGES - 1) % GEMM_STAGES);
        COPIES_COMMIT();
        __local const float* at = a_tiles + step % GEMM_STAGES * AS_TILE;
        __local const float* bt = b_tiles + step % GEMM_STAGES * BS_TILE;
        #pragma unroll
        for (int k4 = 0; k4 < TK; k4 += 4) {
#if A_K_FASTEST
            float4 a4[RM];                  /* four k steps of each of the work item's rows */
            #pragma unroll
            for (int i = 0; i < RM; ++i)
                a4[i] = vload4(0, at + ((i / 4 * LY + ty) * 4 + i % 4) * AS_ROW + k4);
#endif
#if !B_N_FASTEST
            float4 b4[RN];                  /* four k steps of each of its columns (FN 1) */
            #pragma unroll
            for (int j = 0; j < RN; ++j)
                b4[j] = vload4(0, bt + (j * LX + tx) * BS_ROW + k4);
#endif
            #pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
                float a[RM], b[RN];
#if A_K_FASTEST
                #pragma unroll
                for (int i = 0; i < RM; ++i)
                    a[i] = LANE(a4[i], kk);
#else                                       /* [k][m]: gemm.cl's rows (AS_ROW is A_ROW) */
                #pragma unroll
                for (int i = 0; i < RM / 4; ++i)
                    READ_A_FRAGMENT(at, k4 + kk, i);
#endif
#if B_N_FASTEST                             /* [k][n]: gemm.cl's columns (BS_ROW is B_ROW) */
                #pragma unroll
                for (int j = 0; j < RN / 4; ++j)
                    READ_B_FRAGMENT(bt, k4 + kk, j);
#else
                #pragma unroll
                for (int j = 0; j < RN; ++j)
                    b[j] = LANE(b4[j], kk);
#endif
                MAD_OUTER();
            }
        }
    }
    COPIES_WAIT_ALL();                      /* no copy outlives the kernel (the empty groups) */
    /* (a fused residual's tile prefetched into L2 (PTX prefetch.global.L2) at the start or
       halfway through the loop made ViT's out-projection slower on an H100: 216 -> 218-223 us;
       the residual costs that GEMM 4%: 207.6 us without it) */

    WRITE_OUTPUTS();
}
