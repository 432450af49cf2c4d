/* MatMul with a single row (M == 1, the fully connected layers of the models): a matrix-vector
 * product, bound by reading B once. Needs the defines of matmul.cl (without gemm.cl) and WG;
 * matmul.cl and group_reduce.cl are included.
 *
 * TRANSPOSE_B (B is [N][K]): one work-group of WG items per output, each summing a strided
 * slice of the row (consecutive items read consecutive addresses), then group_sum's tree.
 * Otherwise (B is [K][N]): one work item per output walking down its column; neighbouring
 * items read neighbouring addresses. NDRange: (N * WG or N rounded up to WG, batches).
 */
#include "matmul.cl"
#include "group_reduce.cl"
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void matmul_gemv(GEMM_ARGS)
{
    const int batch = get_global_id(1);
    /* M == 1: A is one row whatever TRANSPOSE_A; its k-th value is av[k * A_K_STRIDE] */
    __global const float* av = a + A_OFF + A_BASE(batch) * A_STEP + A_PICK;
    __global const float* bm = b + B_OFF + B_BASE(batch);
#if TRANSPOSE_B
    __local float partial[WG];
    const int n = get_group_id(0), t = get_local_id(0);
    float acc = 0.0f;
    for (int k = t; k < K; k += WG)
        acc = mad(av[k * A_K_STRIDE], bm[n * LDB + k], acc);
    acc = group_sum(partial, acc);
    if (t == 0)
        STORE(batch, 0, n, acc);
#else
    const int n = get_global_id(0);
    if (n >= N)
        return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc = mad(av[k * A_K_STRIDE], bm[k * LDB + n], acc);
    STORE(batch, 0, n, acc);
#endif
}
