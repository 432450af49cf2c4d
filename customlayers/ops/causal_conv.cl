/* ONNX CausalConvWithState (opset 27): a causal depthwise 1-D convolution, and the state that
 * carries it to the next call, in one launch.
 *
 * Row r = (n, c) of the time axis is padded = past_state[r] (S = K - 1 positions; zeros
 * without HAS_PAST) followed by input[r] (L positions). Then
 *   output[r, t]        = act(bias[c] + sum_m w[c, m] * padded[t + m]),  t < L
 *   present_state[r, j] = padded[L + j],                                j < S
 * (the last S positions of padded, so from past_state too when L < S). act: SiLU x*sigmoid(x)
 * with SILU, else none.
 *
 * NDRange: (ROWS * (L + S) padded), one item per element of either output: a row's items are
 * its L output positions, then its S state positions. The sizes are arguments: one program per
 * variant serves every shape. Defines: T (the storage type: float, half, double), ACC (float or
 * double), LOAD(p, i), STORE(p, i, v) (a half tensor through vload_half/vstore_half_rte, so no
 * cl_khr_fp16 is needed), HAS_BIAS, HAS_PAST, SILU, and HAS_PRESENT (0 only for K = 1, whose
 * present_state has no element and so no buffer: the node computes output alone).
 */
#if HAS_PAST
#define PADDED(row, p) ((p) < S ? (ACC)LOAD(past, (row) * S + (p)) \
                                : (ACC)LOAD(x, (row) * L + (p) - S))
#else
#define PADDED(row, p) ((p) < S ? (ACC)0 : (ACC)LOAD(x, (row) * L + (p) - S))
#endif

__kernel void causal_conv_with_state(__global const T* restrict x,
                                     __global const T* restrict w,
#if HAS_BIAS
                                     __global const T* restrict bias,
#endif
#if HAS_PAST
                                     __global const T* restrict past,
#endif
                                     __global T* restrict out,
#if HAS_PRESENT
                                     __global T* restrict present,
#endif
                                     const int ROWS, const int C, const int L, const int K)
{
    const int S = K - 1, span = L + S;
    const int i = get_global_id(0);
    if (i >= ROWS * span)
        return;
    const int row = i / span, t = i - row * span;
#if HAS_PRESENT
    if (t >= L) {          /* a state position: a copy (exact: ACC holds every T value) */
        STORE(present, row * S + (t - L), PADDED(row, t));
        return;
    }
#endif
    const int c = row % C;
#if HAS_BIAS
    ACC acc = (ACC)LOAD(bias, c);
#else
    ACC acc = (ACC)0;
#endif
    for (int m = 0; m < K; ++m)
        acc += (ACC)LOAD(w, c * K + m) * PADDED(row, t + m);
#if SILU
    acc = acc / ((ACC)1 + exp(-acc));
#endif
    STORE(out, row * L + t, acc);
}
