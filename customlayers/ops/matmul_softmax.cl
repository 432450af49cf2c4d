/* MatMul whose rows end in a SoftMax or LogSoftmax of the last axis (a classifier's head:
 * Linear, bias, (Log)Softmax, one launch where there were two; passes/fusion.py decides).
 *
 * One work-group of WG items per output row (batch, m): each item computes the row's outputs
 * n = t, t + WG, ... (the K terms in order, then the epilogue: bias, ReLU, residual) into
 * __local memory; then the row's max and sum are group_reduce.cl's tree reductions and the
 * outputs are written, as softmax.cl's ROW_PER_GROUP does with the same steps.
 * NDRange: (BATCHES * M * WG), local (WG). Needs matmul.cl's defines and macros (without
 * gemm.cl), the epilogue's, WG (a power of two) and LOG_SOFTMAX.
 */
#include "matmul.cl"
#include "group_reduce.cl"
#if LOG_SOFTMAX
#define ROW_OUTPUT(x, m, inv, logsum) (((x) - (m)) - (logsum))
#else
#define ROW_OUTPUT(x, m, inv, logsum) (exp((x) - (m)) * (inv))
#endif
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void matmul_softmax(GEMM_ARGS, __local float* restrict row_values)   /* N floats */
{
    __local float scratch[WG];
    const int t = get_local_id(0);
    const int batch = get_group_id(0) / M, m = get_group_id(0) % M;

    float mx = -INFINITY;
    for (int n = t; n < N; n += WG) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k)
            acc = mad(A_AT(batch, m, k), B_AT(batch, k, n), acc);
        const float v = EPILOGUE(RES_AT(batch, m, n), CHANNEL(batch, m, n), SCALED(acc));
        row_values[n] = v;
        mx = fmax(mx, v);
    }
    mx = group_max(scratch, mx);

    float s = 0.0f;
    for (int n = t; n < N; n += WG)
        s += exp(row_values[n] - mx);
    s = group_sum(scratch, s);
    const float inv = 1.0f / s, logsum = log(s);
    for (int n = t; n < N; n += WG)
        out[OUT_AT(batch, m, n)] = ROW_OUTPUT(row_values[n], mx, inv, logsum);
}
