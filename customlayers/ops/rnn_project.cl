// The input projection of a recurrent op (LSTM, GRU, RNN), for every step at once:
// xw[d][m][n] = sum_k x[m][k] * w[d][n][k] + the bias of gate row n, m a row of X as it lies
// in memory (t, b for layout 0; b, t for layout 1). The recurrence (rnn_recur.cl) then only adds
// R . h_prev per step.
//
// Shaped for CPU compilers as the project's GEMV is (matmul_gemv_cpu.cl): a work-item computes
// 8 neighbouring n of MB rows with REAL8 arithmetic, reading W transposed (wt[d][k][n], by
// rnn_transpose below) so that the 8 are one vector load per k; a last run of fewer than 8 n
// is scalar. NDRange (ceil(GH / 8), ceil(M / MB), D).
//
// Baked by ops/recurrent/rnn.py: REAL, REAL8, MB, HAS_B (input B given), RB_FOLDED(n)
// (whether R's bias of row n is added here: every row but a GRU's h rows when
// linear_before_reset, whose Rb stays inside r * (...)). Dimensions are arguments.
__kernel void rnn_project(__global const REAL* restrict x, __global const REAL* restrict wt,
                          __global const REAL* restrict bias, __global REAL* restrict xw,
                          int M, int I, int GH)
{
    const int n0 = get_global_id(0) * 8, m0 = get_global_id(1) * MB, d = get_global_id(2);
    if (n0 >= GH || m0 >= M) return;
    const int rows = min(MB, M - m0), nn = min(8, GH - n0);
    __global const REAL* w = wt + (size_t)d * I * GH + n0;
    REAL sums[MB][8];
    if (nn == 8) {
        REAL8 acc[MB];
        for (int r = 0; r < MB; ++r)
            acc[r] = (REAL8)0;
        for (int k = 0; k < I; ++k) {
            const REAL8 wk = vload8(0, w + (size_t)k * GH);
            for (int r = 0; r < MB; ++r)      /* rows past M repeat the last (not stored) */
                acc[r] = mad((REAL8)x[(size_t)min(m0 + r, M - 1) * I + k], wk, acc[r]);
        }
        for (int r = 0; r < MB; ++r)
            vstore8(acc[r], 0, sums[r]);
    } else {
        for (int r = 0; r < rows; ++r)
            for (int u = 0; u < nn; ++u) {
                REAL s = 0;
                for (int k = 0; k < I; ++k)
                    s = mad(x[(size_t)(m0 + r) * I + k], w[(size_t)k * GH + u], s);
                sums[r][u] = s;
            }
    }
    for (int u = 0; u < nn; ++u) {
        const int n = n0 + u;
        REAL b = 0;
#if HAS_B
        __global const REAL* bd = bias + (size_t)d * 2 * GH;
        b = bd[n];
        if (RB_FOLDED(n))
            b += bd[GH + n];
#endif
        for (int r = 0; r < rows; ++r)
            xw[((size_t)d * M + m0 + r) * GH + n] = sums[r][u] + b;
    }
}

// A weight transposed, per direction: dst[d][k][n] = src[d][n][k] (n < N, k < K): W and R
// as the kernels read them, their 8 neighbouring n one vector load.
__kernel void rnn_transpose(__global const REAL* restrict src, __global REAL* restrict dst,
                            int count, int N, int K)
{
    const int i = get_global_id(0);
    if (i >= count) return;
    const int n = i % N;
    const int k = (i / N) % K;
    const int d = i / (N * K);
    dst[i] = src[((size_t)d * N + n) * K + k];
}
