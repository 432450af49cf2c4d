/* The losses of ONNX: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (its log-softmax
 * over the class axis, then the same NLL). The input is viewed as [N, C, D] (D: the product of
 * the dims after the class axis, 1 for an (N, C) input), the target as [N, D] of TARGET_T.
 *
 * Baked (one program per variant, not per shape): T (float or double), TARGET_T (int or long),
 * HAS_WEIGHT (a per-class weight input), USE_IGNORE (the ignore_index attribute is given),
 * REDUCE_MEAN (mean: the weighted sum divided by the sum of the weights of the targets counted;
 * else sum). Dims and ignore_index are kernel arguments.
 *
 * A target outside 0..C-1 that is not ignore_index has no loss: its element (and so a sum or
 * mean over it) is NaN, not a read past the input.
 */
#if HAS_WEIGHT
#define WEIGHT_ARG , __global const T* restrict weight
#define WEIGHT_OF(t) weight[t]
#else
#define WEIGHT_ARG
#define WEIGHT_OF(t) ((T)1)
#endif

/* The loss and the weight of element e = n * D + d of the target: (0, 0) when ignored. */
inline T2 nll_term(__global const T* restrict input, __global const TARGET_T* restrict target
                   WEIGHT_ARG, const int C, const int D, const long ignore, const int e)
{
    const long t = (long)target[e];
#if USE_IGNORE
    if (t == ignore)
        return (T2)((T)0, (T)0);
#endif
    if (t < 0 || t >= C)
        return (T2)((T)NAN, (T)NAN);
    const int n = e / D, d = e % D;
    const T w = WEIGHT_OF(t);
    return (T2)(-input[(n * C + (int)t) * D + d] * w, w);
}

/* reduction 'none': one item per target element; out has the target's shape. */
__kernel void nll_none(__global const T* restrict input, __global const TARGET_T* restrict target
                       WEIGHT_ARG, __global T* restrict out, const int C, const int D,
                       const long ignore, const int count)
{
    const int e = get_global_id(0);
    if (e < count)
        out[e] = nll_term(input, target
#if HAS_WEIGHT
                          , weight
#endif
                          , C, D, ignore, e).x;
}

/* reduction 'sum' or 'mean': one work-group of WG items, each summing the losses and weights of
 * a strided share of the elements, then a tree over __local memory in a fixed order (the same
 * result run to run); item 0 writes the one output. NDRange: (WG), local (WG). */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void nll_reduce(__global const T* restrict input, __global const TARGET_T* restrict target
                WEIGHT_ARG, __global T* restrict out, const int C, const int D,
                const long ignore, const int count)
{
    __local T2 scratch[WG];
    const int i = get_local_id(0);
    T2 acc = (T2)((T)0, (T)0);
    for (int e = i; e < count; e += WG)
        acc += nll_term(input, target
#if HAS_WEIGHT
                        , weight
#endif
                        , C, D, ignore, e);
    scratch[i] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int step = WG / 2; step > 0; step >>= 1) {
        if (i < step)
            scratch[i] += scratch[i + step];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (i == 0) {
#if REDUCE_MEAN
        out[0] = scratch[0].x / scratch[0].y;
#else
        out[0] = scratch[0].x;
#endif
    }
}

/* SoftmaxCrossEntropyLoss's log-probabilities: log_softmax over the class axis of [N, C, D],
 * one item per (n, d), the max subtracted first so that exp() cannot overflow. */
__kernel void log_softmax_classes(__global const T* restrict input, __global T* restrict out,
                                  const int C, const int D, const int count)
{
    const int id = get_global_id(0);
    if (id >= count)
        return;
    const int base = id / D * (C * D) + id % D;
    T m = -INFINITY;
    for (int c = 0; c < C; ++c)
        m = fmax(m, input[base + c * D]);
    T s = (T)0;
    for (int c = 0; c < C; ++c)
        s += exp(input[base + c * D] - m);
    const T logsum = log(s);
    for (int c = 0; c < C; ++c)
        out[base + c * D] = (input[base + c * D] - m) - logsum;
}
