// The input projection of a recurrent op (LSTM, GRU, RNN), for every step at once:
// xw[d][t][b][n] = sum_k x[t, b, k] * w[d][n][k] + the bias of gate row n, one work-item per
// element of xw. The recurrence (rnn_recur.cl) then only adds R . h_prev per step.
//
// Baked by ops/recurrent/rnn.py: REAL (float or double), HAS_B (input B given), RB_FOLDED(n)
// (whether R's bias of row n is added here: every row but a GRU's h rows when
// linear_before_reset, whose Rb stays inside r * (...)). Dimensions are arguments.
__kernel void rnn_project(__global const REAL* restrict x, __global const REAL* restrict w,
                          __global const REAL* restrict bias, __global REAL* restrict xw,
                          int count, int S, int NB, int I, int GH, int x_t, int x_b)
{
    const int i = get_global_id(0);
    if (i >= count) return;
    const int n = i % GH;
    int r = i / GH;
    const int b = r % NB;
    r /= NB;
    const int t = r % S;
    const int d = r / S;
    __global const REAL* xr = x + (size_t)t * x_t + (size_t)b * x_b;
    __global const REAL* wr = w + ((size_t)d * GH + n) * I;
    REAL acc = 0;
    for (int k = 0; k < I; ++k)
        acc += xr[k] * wr[k];
#if HAS_B
    __global const REAL* bd = bias + (size_t)d * 2 * GH;
    acc += bd[n];
    if (RB_FOLDED(n))
        acc += bd[GH + n];
#endif
    xw[i] = acc;
}
