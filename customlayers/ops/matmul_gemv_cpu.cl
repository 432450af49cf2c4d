/* MatMul with a single row (M == 1) on CPU devices: one work item computes 8 consecutive
 * outputs with float8 arithmetic and no __local memory (matmul_gemv.cl's work-group tree of
 * barriers is what a CPU OpenCL runtime emulates at the highest cost: ShuffleNet's 544x1000
 * fully connected layer took PoCL 0.5-1.5 ms with it).
 * TRANSPOSE_B (B is [N][K], rows contiguous along K): 8 float8 partial dot products along K,
 * one per output, summed across lanes at the end; the K % 8 tail is scalar.
 * Otherwise (B is [K][N]): per k one broadcast of a[k] times 8 neighbouring B values.
 * Outputs past N repeat the last one and are not stored.
 * NDRange: (ceil(N/8), batches), local (1, 1). Needs the defines of matmul.cl.
 */
#include "matmul.cl"
__kernel void matmul_gemv_cpu(GEMM_ARGS)
{
    const int batch = get_global_id(1);
    const int n0 = get_global_id(0) * 8;
    /* M == 1: A is one row whatever TRANSPOSE_A; its k-th value is av[k * A_K_STRIDE] */
    __global const float* av = a + A_OFF + A_BASE(batch) * A_STEP + A_PICK;
    __global const float* bm = b + B_OFF + B_BASE(batch);
    float sums[8];
#if TRANSPOSE_B
    float8 acc[8];
    #pragma unroll
    for (int j = 0; j < 8; ++j)
        acc[j] = (float8)0.0f;
    int k = 0;
    for (; k + 8 <= K; k += 8) {
#if !A_PICKED && !TRANSPOSE_A  /* one contiguous row */
        const float8 x = vload8(0, av + k);
#else
        const float8 x = (float8)(av[k * A_K_STRIDE], av[(k + 1) * A_K_STRIDE],
                                  av[(k + 2) * A_K_STRIDE], av[(k + 3) * A_K_STRIDE],
                                  av[(k + 4) * A_K_STRIDE], av[(k + 5) * A_K_STRIDE],
                                  av[(k + 6) * A_K_STRIDE], av[(k + 7) * A_K_STRIDE]);
#endif
        #pragma unroll
        for (int j = 0; j < 8; ++j)
            acc[j] = mad(x, vload8(0, bm + min(n0 + j, N - 1) * LDB + k), acc[j]);
    }
    #pragma unroll
    for (int j = 0; j < 8; ++j) {
        const float4 h4 = acc[j].lo + acc[j].hi;
        const float2 h2 = h4.lo + h4.hi;
        float s = h2.x + h2.y;
        for (int t = k; t < K; ++t)
            s = mad(av[t * A_K_STRIDE], bm[min(n0 + j, N - 1) * LDB + t], s);
        sums[j] = s;
    }
#else
    if (n0 + 8 <= N) {
        float8 acc = (float8)0.0f;
        for (int k = 0; k < K; ++k)
            acc = mad((float8)av[k * A_K_STRIDE], vload8(0, bm + k * LDB + n0), acc);
        vstore8(acc, 0, sums);
    } else {                 /* the last, partial run: scalar, in the same k order */
        for (int j = 0; j < 8; ++j)
            sums[j] = 0.0f;
        for (int k = 0; k < K; ++k)
            for (int j = 0; j < 8 && n0 + j < N; ++j)
                sums[j] = mad(av[k * A_K_STRIDE], bm[k * LDB + n0 + j], sums[j]);
    }
#endif
    for (int j = 0; j < 8 && n0 + j < N; ++j)
        STORE(batch, 0, n0 + j, sums[j]);
}
