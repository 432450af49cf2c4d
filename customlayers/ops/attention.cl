/* ONNX Attention (opset 23/24): Y = softmax(softcap(Q K^T * scale) + bias) V for one query row
 * per work-group of WG items. NDRange: (B * QH * S * WG), local (WG).
 *
 * Q[b,h,i,d] lives at b*QB + h*QH_ST + i*QS + d (a 4-D (B,H,S,D) tensor or a 3-D (B,S,H*D) one:
 * only the strides differ); K, V, Y alike. Key j < P comes from past_key/past_value (dense
 * (B,KVH,P,D)), key j >= P from K/V's row j - P. GQA: query head h reads kv head h / GROUP.
 *
 * The bias of (b,h,i,j) follows the ONNX reference (onnx/reference/ops/op_attention.py):
 *   the mask's value (float: added; bool: 0 or -inf; a key past the mask's last dim: -inf),
 *   -inf where causal forbids j > i + offset (offset: P, or nonpad[b] - S with NONPAD_OFFSET),
 *   -inf outside the sliding window (opset 25), -inf for keys at or past nonpad[b].
 * A row whose bias is -inf everywhere is fully masked: its probabilities and Y are 0.
 *
 * Each item computes the scores of keys lid, lid+WG, ... into `scores` (the row's part of a
 * scratch buffer of B*QH*S*T ACC values), the group reduces max and sum in __local memory
 * (exp of the max-subtracted score, so exp never overflows), then each item sums the rows of
 * V for output features lid, lid+WG, ... The query row sits in __local memory.
 *
 * Defines: T (element type), ACC (the softmax's type), WG, HAS_PAST, MASK_KIND (0 none,
 * 1 bool as uchar, 2 T), HAS_NONPAD, NONPAD_OFFSET, CAUSAL, WINDOW, SOFTCAP, QK_MODE (-1: no
 * qk_matmul_output; as the schema and ONNX Runtime say: 0 the scaled scores, 1 after the
 * softcap, 2 with the bias too, 3 the probabilities. The reference also softcaps mode 0's,
 * against its schema; no node-suite case has mode 0 with a softcap).
 */
#define NEG_INF (-INFINITY)
#define ACC4 CAT(ACC, 4)
#define TO_ACC4(x) CAT(convert_, ACC4)(x)
#define STORE4(x, p) vstore4(CAT(convert_, CAT(T, 4))(x), 0, p)
#define CAT(a, b) CAT_(a, b)
#define CAT_(a, b) a##b
#if HAS_PAST
#define KEY_ROW(j) ((j) < P ? past_k + ((long)(b * KVH + kvh) * P + (j)) * D \
                            : k + b * KB + kvh * KHS + ((j) - P) * KS)
#define VALUE_ROW(j) ((j) < P ? past_v + ((long)(b * KVH + kvh) * P + (j)) * DV \
                              : v + b * VB + kvh * VHS + ((j) - P) * VS)
#else
#define KEY_ROW(j) (k + b * KB + kvh * KHS + (j) * KS)
#define VALUE_ROW(j) (v + b * VB + kvh * VHS + (j) * VS)
#endif

inline ACC group_max(__local ACC* red, ACC v)
{
    const int t = get_local_id(0);
    red[t] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int step = WG / 2; step > 0; step >>= 1) {
        if (t < step)
            red[t] = fmax(red[t], red[t + step]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const ACC result = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return result;
}

inline ACC group_sum(__local ACC* red, ACC v)
{
    const int t = get_local_id(0);
    red[t] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int step = WG / 2; step > 0; step >>= 1) {
        if (t < step)
            red[t] += red[t + step];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const ACC result = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return result;
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void attention(__global const T* restrict q, __global const T* restrict k,
               __global const T* restrict v,
#if HAS_PAST
               __global const T* restrict past_k, __global const T* restrict past_v,
#endif
#if MASK_KIND == 1
               __global const uchar* restrict mask,
#elif MASK_KIND == 2
               __global const T* restrict mask,
#endif
#if HAS_NONPAD
               __global const long* restrict nonpad,
#endif
               __global T* restrict y,
#if QK_MODE >= 0
               __global T* restrict qk_out,
#endif
               __global ACC* restrict scratch,
               __local ACC* restrict q_row, __local ACC* restrict red,
               /* sizes */
               const int QH, const int GROUP, const int S, const int P, const int T_LEN,
               const int D, const int DV,
               /* strides (b, head, row) of Q, K, V, Y; the mask's (b, head, row) and its
                * last dim's length */
               const int QB, const int QHS, const int QS, const int KB, const int KHS,
               const int KS, const int VB, const int VHS, const int VS, const int YB,
               const int YHS, const int YS, const int MB, const int MHS, const int MS,
               const int MASK_LEN,
               const ACC scale, const ACC softcap, const int left, const int right)
{
    const int t = get_local_id(0);
    const int row = get_group_id(0);          /* ((b * QH) + h) * S + i */
    const int i = row % S;
    const int h = (row / S) % QH;
    const int b = row / (S * QH);
    const int kvh = h / GROUP;
    const int KVH = QH / GROUP;

    __global const T* qp = q + b * QB + h * QHS + i * QS;
    for (int d = t; d < D; d += WG)
        q_row[d] = (ACC)qp[d];
    barrier(CLK_LOCAL_MEM_FENCE);

    __global ACC* scores = scratch + (long)row * T_LEN;
#if QK_MODE >= 0
    __global T* qk_row = qk_out + (long)row * T_LEN;
#endif
#if HAS_NONPAD
    const int valid = (int)nonpad[b];
#endif
#if CAUSAL || WINDOW
#if NONPAD_OFFSET
    const int frontier = i + valid - S;       /* the query's absolute position */
#else
    const int frontier = i + P;
#endif
#endif

    ACC m = NEG_INF;
    int open = 0;                             /* some key's bias is not -inf */
    for (int j = t; j < T_LEN; j += WG) {
        __global const T* kp = KEY_ROW(j);
        ACC4 dot4 = 0;                       /* 4 features at a time, then the tail */
        int d = 0;
        for (; d + 4 <= D; d += 4)
            dot4 += vload4(0, q_row + d) * TO_ACC4(vload4(0, kp + d));
        ACC dot = (dot4.x + dot4.y) + (dot4.z + dot4.w);
        for (; d < D; ++d)
            dot += q_row[d] * (ACC)kp[d];
        ACC s = dot * (ACC)scale;
#if QK_MODE == 0
        qk_row[j] = (T)s;
#endif
#if SOFTCAP
        s = (ACC)softcap * tanh(s / (ACC)softcap);
#endif
#if QK_MODE == 1
        qk_row[j] = (T)s;
#endif
        ACC bias = 0;
#if MASK_KIND == 1
        bias = j < MASK_LEN && mask[b * MB + h * MHS + i * MS + j] ? (ACC)0 : NEG_INF;
#elif MASK_KIND == 2
        bias = j < MASK_LEN ? (ACC)mask[b * MB + h * MHS + i * MS + j] : NEG_INF;
#endif
#if CAUSAL
        if (j > frontier)
            bias += NEG_INF;
#endif
#if WINDOW
        if ((left >= 0 && frontier - j > left) || (right >= 0 && j - frontier > right))
            bias += NEG_INF;
#endif
#if HAS_NONPAD
        if (j >= valid)
            bias += NEG_INF;
#endif
        open |= !(isinf(bias) && bias < 0);
        s += bias;
#if QK_MODE == 2
        qk_row[j] = (T)s;
#endif
        scores[j] = s;
        m = fmax(m, s);
    }
    m = group_max(red, m);
    open = group_max(red, open ? (ACC)1 : (ACC)0) > (ACC)0;
    if (isinf(m) && m < 0)
        m = 0;                                /* every score -inf: the reference's safe max */

    ACC sum = 0;
    for (int j = t; j < T_LEN; j += WG) {
        const ACC e = exp(scores[j] - m);
        scores[j] = e;
        sum += e;
    }
    sum = group_sum(red, sum);
    const ACC inv = open && sum != (ACC)0 ? (ACC)1 / sum : (ACC)0;
    barrier(CLK_GLOBAL_MEM_FENCE);            /* every item reads every score below */

#if QK_MODE == 3
    for (int j = t; j < T_LEN; j += WG)
        qk_row[j] = (T)(scores[j] * inv);
#endif
    __global T* yp = y + b * YB + h * YHS + i * YS;
    const int DV4 = DV & ~3;                  /* features taken 4 at a time, then the tail */
    for (int d = 4 * t; d < DV4; d += 4 * WG) {
        ACC4 acc = 0;
        for (int j = 0; j < T_LEN; ++j)
            acc += scores[j] * TO_ACC4(vload4(0, VALUE_ROW(j) + d));
        STORE4(acc * inv, yp + d);
    }
    for (int d = DV4 + t; d < DV; d += WG) {
        ACC acc = 0;
        for (int j = 0; j < T_LEN; ++j) {
            __global const T* vp = VALUE_ROW(j);
            acc += scores[j] * (ACC)vp[d];
        }
        yp[d] = (T)(acc * inv);
    }
}
