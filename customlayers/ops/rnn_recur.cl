// The recurrence of a recurrent op (ONNX LSTM, GRU, RNN) over every time step in one launch:
// one work-group per (direction d, batch row b) walks its steps in order, its work-items
// sharing the hidden units (8 neighbouring j each: j0 = 8 * lid, 8 * (lid + L), ...); a barrier
// after each step publishes the new h to the whole group, so no launch and no host wait
// separates two steps. The state lives in scratch buffers (hs: two h rows, read one and write
// the other; cs: the cell), xw holds the input projection of every step (rnn_project.cl),
// biases folded in, and rt is R transposed (rt[d][k][n] = R[d][n][k]): the 8 units of a
// work-item are one REAL8 load per k, as in the project's CPU GEMV (matmul_gemv_cpu.cl).
//
// A row's steps past its sequence length are not run: Y there is 0, and Y_h/Y_c hold the last
// valid step (0 for a length of 0, as ONNX Runtime gives). The reverse direction walks from the
// row's last valid step down to 0.
//
// Baked by ops/recurrent/rnn.py: REAL, REAL8, CELL (1 RNN, 2 GRU, 3 LSTM), G (gates),
// REVERSE(d) (direction d runs backwards), the activations F(d, x), GG(d, x), HH(d, x),
// CLIP(v), and the flags HAS_B, HAS_SEQ_LENS, HAS_H0, HAS_C0, HAS_P, INPUT_FORGET,
// LINEAR_BEFORE_RESET, WRITE_Y, WRITE_YH, WRITE_YC. Dimensions and strides are arguments:
// xw's row of (t, b) is t * xr_t + b * xr_b; Y[t][d][b][j] is at t * y_t + d * y_d + b * y_b + j
// and a state [d][b][j] at d * s_d + b * s_b + j (the layout).

/* out[u] = sum_k rt[k * GH + col + u] * h[k], u < nj (8: one vector per k) */
static void dots(__global const REAL* rt, int GH, int H, int col, __global const REAL* h,
                 int nj, REAL* out)
{
    if (nj == 8) {
        REAL8 acc = (REAL8)0;
        for (int k = 0; k < H; ++k)
            acc = mad((REAL8)h[k], vload8(0, rt + (size_t)k * GH + col), acc);
        vstore8(acc, 0, out);
        return;
    }
    for (int u = 0; u < nj; ++u) {
        REAL s = 0;
        for (int k = 0; k < H; ++k)
            s = mad(h[k], rt[(size_t)k * GH + col + u], s);
        out[u] = s;
    }
}

#define Y_AT(t, j) y[(size_t)(t) * y_t + d * y_d + b * y_b + (j)]

__kernel void rnn_recur(__global const REAL* restrict xw, __global const REAL* restrict rt,
                        __global const REAL* restrict bias, __global const int* restrict lens,
                        __global const REAL* restrict h0, __global const REAL* restrict c0,
                        __global const REAL* restrict peep, __global REAL* restrict y,
                        __global REAL* restrict yh, __global REAL* restrict yc,
                        __global REAL* hs, __global REAL* cs, __global REAL* aux,
                        int S, int NB, int H, int xr_t, int xr_b, int y_t, int y_d, int y_b,
                        int s_d, int s_b)
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
    __global const REAL* rd = rt + (size_t)d * H * GH;
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
        __global const REAL* x = xw + ((size_t)d * S * NB + t * xr_t + b * xr_b) * GH;
        for (int j0 = lid * 8; j0 < H; j0 += L * 8) {
            const int nj = min(8, H - j0);
            REAL a0[8], a1[8], a2[8];
#if CELL == 3                                   /* LSTM: gates i, o, f, c */
            REAL a3[8];
            dots(rd, GH, H, j0, hp, nj, a0);
            dots(rd, GH, H, H + j0, hp, nj, a1);
            dots(rd, GH, H, 2 * H + j0, hp, nj, a2);
            dots(rd, GH, H, 3 * H + j0, hp, nj, a3);
            for (int u = 0; u < nj; ++u) {
                const int j = j0 + u;
                REAL gi = x[j] + a0[u], go = x[H + j] + a1[u], gf = x[2 * H + j] + a2[u];
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
                const REAL cn = fg * cp + ig * GG(d, CLIP(x[3 * H + j] + a3[u]));
#if HAS_P
                go += pd[H + j] * cn;
#endif
                const REAL h = F(d, CLIP(go)) * HH(d, cn);
                cell[j] = cn;
                hn[j] = h;
#if WRITE_Y
                Y_AT(t, j) = h;
#endif
            }
#elif CELL == 2                                 /* GRU: gates z, r, h */
            dots(rd, GH, H, j0, hp, nj, a0);
            dots(rd, GH, H, H + j0, hp, nj, a1);
#if LINEAR_BEFORE_RESET
            dots(rd, GH, H, 2 * H + j0, hp, nj, a2);
#endif
            for (int u = 0; u < nj; ++u) {
                const int j = j0 + u;
                const REAL z = F(d, CLIP(x[j] + a0[u]));
                const REAL r = F(d, CLIP(x[H + j] + a1[u]));
#if LINEAR_BEFORE_RESET
                REAL rb = 0;
#if HAS_B
                rb = bias[(size_t)d * 2 * GH + GH + 2 * H + j];
#endif
                const REAL n = GG(d, CLIP(x[2 * H + j] + r * (a2[u] + rb)));
                const REAL h = ((REAL)1 - z) * n + z * hp[j];
                hn[j] = h;
#if WRITE_Y
                Y_AT(t, j) = h;
#endif
#else
                tmp[j] = z;
                tmp[H + j] = r * hp[j];       /* r * h_prev, which every unit reads next */
#endif
            }
#else                                           /* RNN: one gate */
            dots(rd, GH, H, j0, hp, nj, a0);
            for (int u = 0; u < nj; ++u) {
                const int j = j0 + u;
                const REAL h = F(d, CLIP(x[j] + a0[u]));
                hn[j] = h;
#if WRITE_Y
                Y_AT(t, j) = h;
#endif
            }
#endif
        }
#if CELL == 2 && !LINEAR_BEFORE_RESET
        barrier(CLK_GLOBAL_MEM_FENCE);
        for (int j0 = lid * 8; j0 < H; j0 += L * 8) {
            const int nj = min(8, H - j0);
            REAL a2[8];
            dots(rd, GH, H, 2 * H + j0, tmp + H, nj, a2);
            for (int u = 0; u < nj; ++u) {
                const int j = j0 + u;
                const REAL z = tmp[j];
                const REAL h = ((REAL)1 - z) * GG(d, CLIP(x[2 * H + j] + a2[u])) + z * hp[j];
                hn[j] = h;
#if WRITE_Y
                Y_AT(t, j) = h;
#endif
            }
        }
#endif
        barrier(CLK_GLOBAL_MEM_FENCE);
    }
    /* each work-item reads back only units it wrote itself (8 per run): no barrier needed */
    __global const REAL* hf = hbuf + (len & 1) * H;
    for (int j0 = lid * 8; j0 < H; j0 += L * 8)
        for (int j = j0; j < min(j0 + 8, H); ++j) {
#if WRITE_YH
            yh[st + j] = len > 0 ? hf[j] : (REAL)0;
#endif
#if WRITE_YC
            yc[st + j] = len > 0 ? cell[j] : (REAL)0;
#endif
        }
#if WRITE_Y
    for (int i = lid; i < (S - len) * H; i += L)
        Y_AT(len + i / H, i % H) = 0;
#endif
}
