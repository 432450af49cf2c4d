// The recurrence of a recurrent op (ONNX LSTM, GRU, RNN) over every time step in one launch:
// one work-group per (direction d, batch row b) walks its steps in order, its work-items
// sharing the hidden units j (j = lid, lid + L, ...); a barrier after each step publishes the
// new h to the whole group, so no launch and no host wait separates two steps. The state lives
// in scratch buffers (hs: two h rows, read one and write the other; cs: the cell), and xw holds
// the input projection of every step (rnn_project.cl), biases folded in.
//
// A row's steps past its sequence length are not run: Y there is 0, and Y_h/Y_c hold the last
// valid step (0 for a length of 0, as ONNX Runtime gives). The reverse direction walks from the
// row's last valid step down to 0.
//
// Baked by ops/recurrent/rnn.py: REAL, CELL (1 RNN, 2 GRU, 3 LSTM), G (gates), REVERSE(d)
// (direction d runs backwards), the activations F(d, x), GG(d, x), HH(d, x), CLIP(v), and the
// flags HAS_B, HAS_SEQ_LENS, HAS_H0, HAS_C0, HAS_P, INPUT_FORGET, LINEAR_BEFORE_RESET,
// WRITE_Y, WRITE_YH, WRITE_YC. Dimensions and output strides are arguments: Y[t][d][b][j] at
// t * y_t + d * y_d + b * y_b + j, a state [d][b][j] at d * s_d + b * s_b + j (the layout).
__kernel void rnn_recur(__global const REAL* restrict xw, __global const REAL* restrict rw,
                        __global const REAL* restrict bias, __global const int* restrict lens,
                        __global const REAL* restrict h0, __global const REAL* restrict c0,
                        __global const REAL* restrict peep, __global REAL* restrict y,
                        __global REAL* restrict yh, __global REAL* restrict yc,
                        __global REAL* hs, __global REAL* cs, __global REAL* aux,
                        int S, int NB, int H, int y_t, int y_d, int y_b, int s_d, int s_b)
{
    const int group = get_group_id(0);
    const int d = group / NB, b = group % NB;
    const int lid = get_local_id(0), L = get_local_size(0);
    const int GH = G * H;
    int len = S;
#if HAS_SEQ_LENS
    len = clamp(lens[b], 0, S);
#endif
    __global REAL* hbuf = hs + (size_t)group * 2 * H;
    __global REAL* cell = cs + (size_t)group * H;
    __global REAL* tmp = aux + (size_t)group * 2 * H;
    __global const REAL* rd = rw + (size_t)d * GH * H;
    const int st = d * s_d + b * s_b;
    for (int j = lid; j < H; j += L) {
#if HAS_H0
        hbuf[j] = h0[st + j];
#else
        hbuf[j] = 0;
#endif
#if HAS_C0
        cell[j] = c0[st + j];
#else
        cell[j] = 0;
#endif
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
    for (int s = 0; s < len; ++s) {
        const int t = REVERSE(d) ? len - 1 - s : s;
        __global const REAL* hp = hbuf + (s & 1) * H;
        __global REAL* hn = hbuf + ((s & 1) ^ 1) * H;
        __global const REAL* x = xw + (((size_t)d * S + t) * NB + b) * GH;
#if CELL == 3                                   /* LSTM: gates i, o, f, c */
        for (int j = lid; j < H; j += L) {
            __global const REAL* ri = rd + (size_t)j * H;
            __global const REAL* ro = ri + (size_t)H * H;
            __global const REAL* rf = ro + (size_t)H * H;
            __global const REAL* rc = rf + (size_t)H * H;
            REAL gi = x[j], go = x[H + j], gf = x[2 * H + j], gc = x[3 * H + j];
            for (int k = 0; k < H; ++k) {
                const REAL hk = hp[k];
                gi += ri[k] * hk; go += ro[k] * hk; gf += rf[k] * hk; gc += rc[k] * hk;
            }
            const REAL cp = cell[j];
#if HAS_P
            __global const REAL* pd = peep + (size_t)d * 3 * H;
            gi += pd[j] * cp;
            gf += pd[2 * H + j] * cp;
#endif
            const REAL ig = F(d, CLIP(gi));
#if INPUT_FORGET
            const REAL fg = (REAL)1 - ig;
#else
            const REAL fg = F(d, CLIP(gf));
#endif
            const REAL cn = fg * cp + ig * GG(d, CLIP(gc));
#if HAS_P
            go += pd[H + j] * cn;
#endif
            const REAL h = F(d, CLIP(go)) * HH(d, cn);
            cell[j] = cn;
            hn[j] = h;
#if WRITE_Y
            y[(size_t)t * y_t + d * y_d + b * y_b + j] = h;
#endif
        }
#elif CELL == 2                                 /* GRU: gates z, r, h */
        __global const REAL* rb = bias + (size_t)d * 2 * GH + GH;
        for (int j = lid; j < H; j += L) {
            __global const REAL* rz = rd + (size_t)j * H;
            __global const REAL* rr = rz + (size_t)H * H;
            REAL gz = x[j], gr = x[H + j];
#if LINEAR_BEFORE_RESET
            __global const REAL* rh = rr + (size_t)H * H;
            REAL gh = 0;
#if HAS_B
            gh = rb[2 * H + j];
#endif
            for (int k = 0; k < H; ++k) {
                const REAL hk = hp[k];
                gz += rz[k] * hk; gr += rr[k] * hk; gh += rh[k] * hk;
            }
            const REAL z = F(d, CLIP(gz));
            const REAL n = GG(d, CLIP(x[2 * H + j] + F(d, CLIP(gr)) * gh));
            const REAL h = ((REAL)1 - z) * n + z * hp[j];
            hn[j] = h;
#if WRITE_Y
            y[(size_t)t * y_t + d * y_d + b * y_b + j] = h;
#endif
#else
            for (int k = 0; k < H; ++k) {
                const REAL hk = hp[k];
                gz += rz[k] * hk; gr += rr[k] * hk;
            }
            tmp[j] = F(d, CLIP(gz));
            tmp[H + j] = F(d, CLIP(gr)) * hp[j];     /* r * h_prev, which every j reads */
#endif
        }
#if !LINEAR_BEFORE_RESET
        barrier(CLK_GLOBAL_MEM_FENCE);
        for (int j = lid; j < H; j += L) {
            __global const REAL* rh = rd + (size_t)(2 * H + j) * H;
            REAL gh = x[2 * H + j];
            for (int k = 0; k < H; ++k)
                gh += rh[k] * tmp[H + k];
            const REAL z = tmp[j];
            const REAL h = ((REAL)1 - z) * GG(d, CLIP(gh)) + z * hp[j];
            hn[j] = h;
#if WRITE_Y
            y[(size_t)t * y_t + d * y_d + b * y_b + j] = h;
#endif
        }
#endif
#else                                           /* RNN: one gate */
        for (int j = lid; j < H; j += L) {
            __global const REAL* ri = rd + (size_t)j * H;
            REAL g = x[j];
            for (int k = 0; k < H; ++k)
                g += ri[k] * hp[k];
            const REAL h = F(d, CLIP(g));
            hn[j] = h;
#if WRITE_Y
            y[(size_t)t * y_t + d * y_d + b * y_b + j] = h;
#endif
        }
#endif
        barrier(CLK_GLOBAL_MEM_FENCE);
    }
    /* each work-item reads back only the units j it wrote itself: no barrier needed */
    __global const REAL* hf = hbuf + (len & 1) * H;
    for (int j = lid; j < H; j += L) {
#if WRITE_YH
        yh[st + j] = len > 0 ? hf[j] : (REAL)0;
#endif
#if WRITE_YC
        yc[st + j] = len > 0 ? cell[j] : (REAL)0;
#endif
    }
#if WRITE_Y
    for (int i = lid; i < (S - len) * H; i += L) {
        const int t = len + i / H, j = i % H;
        y[(size_t)t * y_t + d * y_d + b * y_b + j] = 0;
    }
#endif
}
