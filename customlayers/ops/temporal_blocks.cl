// A run of TCN temporal blocks in one launch (ops/nn/temporal_block.py). Each block:
//   h = relu(conv1(x) + b1); h2 = relu(conv2(h) + b2); out = relu(h2 + (wd * x + bd or x))
// with causal dilated 1-D convolutions (zero padding before the start only).
//
// Time t = r + D*m: residue r (mod D, the gcd of the run's dilations) and phase position m. A
// convolution of dilation d reads m - j*(d/D) of its own residue: the residues are independent
// sequences, so a work-group takes TILE_R residues and TILE_M phase positions of one batch
// item. It stages its input window (the tile plus the halo the receptive field needs) in local
// memory, computes each convolution over the window the next stage reads (recomputing the
// halo), and writes only the last block's output of its tile. Local memory holds three regions
// (input, middle, output of a block) of CH / 4 channel quads x (WINDOW + 1) positions x TILE_R
// residues of float4s (four channels), laid out [quad][position][residue] so that neighbouring
// work items read neighbouring float4s, one load for four input channels (the last position of
// each row holds zeros: the causal padding), then with WLOCAL the stage's weights. Channels
// past a stage's own (up to its multiple of 4) hold zeros.
//
// Weights are packed per block as [cin rounded up to 4][tap][cout rounded up to 4] (zero
// padded): a work item computes 4 output channels (one float4 weight load, the same for the
// whole warp, per input channel) at PB positions (a #define: 1 where a short chain per work
// item matters, batch 1 on a GPU; 4 for 4 * PB multiply-adds per weight load where throughput
// does), and stores them as one float4: the next stage's input quad.
//
// WLOCAL 1: each stage's weights and biases are copied to local memory first (one region after
// the three of the activations), where its work items read them. On a GPU a weight read from
// global memory waits on the L2 at every step of a chain few warps cannot hide (batch 1).
//
// The per-block table (int, FIELDS per block): see the F_* offsets below.
#ifndef WLOCAL
#define WLOCAL 0
#endif
#if WLOCAL
#define WSPACE __local
#else
#define WSPACE __global
#endif
#define F_CIN 0
#define F_COUT 1
#define F_K1 2
#define F_E1 3
#define F_K2 4
#define F_E2 5
#define F_DOWN 6
#define F_W1 7
#define F_B1 8
#define F_W2 9
#define F_B2 10
#define F_WD 11
#define F_BD 12
#define F_HIN 13
#define F_HMID 14
#define F_HOUT 15
#define FIELDS 16

// acc[pb] += sum over taps j and input channels ci of w[ci][j][co..co+3] * in[ci][m - (k-1-j)e]
// at positions m = lo_out + w_lane + pb * lanes (clamped into the window; only stored in it).
// A position before the start reads the zero at `zero_at` (each quad's row ends in one): the
// causal padding, without a multiply in the loop. An input quad a step: one float4 of the
// window and four weight rows, into two accumulators, each waiting on two multiply-adds before
// it, not four, where few warps hide no latency (batch 1 on a GPU).
/* ReLU that keeps a NaN (as the ReLU op does; fmax(NaN, 0) is 0) */
inline float4 relu4(float4 v) { return select(v, (float4)(0.0f), v < (float4)(0.0f)); }

inline void causal_taps(float4 acc[PB], __local const float4* in, int lo_in, int qstride,
                        int zero_at, int tile_r, int r, int lo_out, int w_lane, int lanes,
                        int width, int quads, int k, int e, WSPACE const float4* w, int cbs,
                        int cb) {
    const int wstep = k * cbs;            // one input channel's rows, in float4s
    float4 acc2[PB];
    #pragma unroll
    for (int pb = 0; pb < PB; pb++)
        acc2[pb] = (float4)(0.0f);
    for (int j = 0; j < k; j++) {
        const int shift = (k - 1 - j) * e;
        int at[PB];
        #pragma unroll
        for (int pb = 0; pb < PB; pb++) {
            const int q = lo_out + min(w_lane + pb * lanes, width - 1) - shift;
            at[pb] = (q >= 0 ? (q - lo_in) * tile_r : zero_at) + r;
        }
        WSPACE const float4* wj = w + j * cbs + cb;
        __local const float4* s = in;
        for (int cq = 0; cq < quads; cq++, wj += 4 * wstep, s += qstride) {
            const float4 w0 = wj[0], w1 = wj[wstep], w2 = wj[2 * wstep], w3 = wj[3 * wstep];
            #pragma unroll
            for (int pb = 0; pb < PB; pb++) {
                const float4 v = s[at[pb]];
                acc[pb] += w0 * v.x;
                acc2[pb] += w1 * v.y;
                acc[pb] += w2 * v.z;
                acc2[pb] += w3 * v.w;
            }
        }
    }
    #pragma unroll
    for (int pb = 0; pb < PB; pb++)
        acc[pb] += acc2[pb];
}

// How a stage ends: conv1 with a ReLU; conv2 with a ReLU, the residual (the block's input, or
// its 1x1 downsample), and a ReLU again.
#define RES_NONE 0
#define RES_IDENTITY 1
#define RES_DOWN 2

// One convolution stage of a block, the loop both stages share: over the positions
// [lo_out, lo_out + width) of the tile, each work item takes 4 of the cout output channels
// (cb) at PB positions of one residue r, starts from the bias, adds the causal taps (k, e,
// weights w) of the cin channels of `in` (its window from lo_in), and ends as `residual` says,
// the residual read from the block's input `x_in` (its window from lo_x, xcin channels; wd,
// bd the downsample's weights and bias). The result goes to `out` in local memory, or, for
// the run's last stage (last), to the columns of batch item b of y.
inline void conv_stage(__local const float4* in, int lo_in, int cin, int k, int e,
                       WSPACE const float* w, WSPACE const float* bias, int cout,
                       int lo_out, int width, int residual, __local const float4* x_in, int lo_x,
                       int xcin, WSPACE const float* wd, WSPACE const float* bd,
                       __local float4* out, int last, __global float* y, int b, int length,
                       int r0, int dil, int tile_r, int qstride, int zero_at) {
    const int cop = (cout + 3) & ~3, cbs = cop / 4;
    // float4 words (cop is a multiple of 4, every offset too): one vector load, not four
    WSPACE const float4* w4 = (WSPACE const float4*)w;
    WSPACE const float4* wd4 = (WSPACE const float4*)wd;
    const int lanes = (width + PB - 1) / PB;
    const int lid = get_local_id(0), lsz = get_local_size(0);
    for (int i = lid; i < cbs * lanes * tile_r; i += lsz) {
        const int cb = i / (lanes * tile_r), p = i - cb * lanes * tile_r;
        const int w_lane = p / tile_r, r = p - w_lane * tile_r;
        const float4 b0 = ((WSPACE const float4*)bias)[cb];
        float4 acc[PB];
        #pragma unroll
        for (int pb = 0; pb < PB; pb++)
            acc[pb] = b0;
        causal_taps(acc, in, lo_in, qstride, zero_at, tile_r, r, lo_out, w_lane, lanes, width,
                    (cin + 3) / 4, k, e, w4, cbs, cb);
        #pragma unroll
        for (int pb = 0; pb < PB; pb++) {
            if (residual == RES_NONE) {
                acc[pb] = relu4(acc[pb]);
                continue;
            }
            const int at = min(w_lane + pb * lanes, width - 1);
            __local const float4* src = x_in + (lo_out + at - lo_x) * tile_r + r;
            float4 res;
            if (residual == RES_DOWN) {
                res = ((WSPACE const float4*)bd)[cb];
                for (int cq = 0; cq < (xcin + 3) / 4; cq++) {
                    const float4 v = src[cq * qstride];
                    WSPACE const float4* wq = wd4 + 4 * cq * cbs + cb;
                    res += wq[0] * v.x + wq[cbs] * v.y + wq[2 * cbs] * v.z + wq[3 * cbs] * v.w;
                }
            } else {
                res = src[cb * qstride];
            }
            acc[pb] = relu4(relu4(acc[pb]) + res);
        }
        #pragma unroll
        for (int pb = 0; pb < PB; pb++) {
            const int at = w_lane + pb * lanes;
            if (at >= width)
                continue;
            const float4 v = acc[pb];
            if (last) {
                const int t = r0 + r + dil * (lo_out + at);
                if (r0 + r < dil && t < length) {
                    __global float* dst = y + ((size_t)b * cout + cb * 4) * length + t;
                    const int co = cb * 4;
                    dst[0] = v.s0;
                    if (co + 1 < cout) dst[length] = v.s1;
                    if (co + 2 < cout) dst[2 * length] = v.s2;
                    if (co + 3 < cout) dst[3 * length] = v.s3;
                }
            } else {
                out[cb * qstride + at * tile_r + r] = v;
            }
        }
    }
}

#if WLOCAL
// count floats (a multiple of 4, from a 16-byte aligned offset) from params to local memory:
// eight loads a work item in flight before their stores (one wait on the L2, not eight)
inline void stage_weights(__local float* dst, __global const float* src, int count) {
    __local float4* d = (__local float4*)dst;
    __global const float4* s = (__global const float4*)src;
    const int n = count / 4, lid = get_local_id(0), lsz = get_local_size(0);
    for (int i = lid; i < n; i += 8 * lsz) {
        float4 v[8];
        #pragma unroll
        for (int u = 0; u < 8; u++)
            if (i + u * lsz < n)
                v[u] = s[i + u * lsz];
        #pragma unroll
        for (int u = 0; u < 8; u++)
            if (i + u * lsz < n)
                d[i + u * lsz] = v[u];
    }
}
#endif

__kernel void temporal_blocks(__global const float* restrict x,
                              __global const float* restrict params,
                              __global float* restrict y, __constant int* table, int blocks,
                              int length, int dil, int tile_r, int tile_m, int window, int ch,
                              int r_tiles, int m_tiles, int phase_len,
                              __local float4* scratch4) {
    // (declared float4: a local argument is aligned for its pointee; NVIDIA's float4 reads
    // fault on one aligned for float)
    const int tiles = r_tiles * m_tiles;
    const int g = get_group_id(0);
    const int b = g / tiles;
    const int r0 = ((g - b * tiles) / m_tiles) * tile_r;
    const int m0 = ((g - b * tiles) % m_tiles) * tile_m;
    const int hi = min(m0 + tile_m, phase_len);
    const int lid = get_local_id(0), lsz = get_local_size(0);
    // each quad's row: the window's positions, then one of zeros (zero_at: causal_taps)
    const int zero_at = window * tile_r, qstride = zero_at + tile_r, quads = ch / 4;
    __local float4* buf_in = scratch4;
    __local float4* buf_mid = scratch4 + quads * qstride;
    __local float4* buf_out = scratch4 + 2 * quads * qstride;
#if WLOCAL
    // a stage's weights, bias and downsample, as packed (offsets from the stage's first)
    __local float* wbuf = (__local float*)(scratch4 + 3 * quads * qstride);
    stage_weights(wbuf, params + table[F_W1], table[F_W2] - table[F_W1]);
#endif

    for (int i = lid; i < 3 * quads * tile_r; i += lsz)
        scratch4[(i / tile_r) * qstride + zero_at + i % tile_r] = (float4)(0.0f);

    // the run's input window [lo_in, hi), zero where t is past the end or the residue is not one
    // (channels past cin0, up to its multiple of 4, zero)
    const int cin0 = table[F_CIN];
    int lo_in = max(0, m0 - table[F_HIN]);
    {
        const int span = (hi - lo_in) * tile_r;
        __global const float* xb = x + (size_t)b * cin0 * length;
        __local float* words = (__local float*)buf_in;
        for (int i = lid; i < ((cin0 + 3) & ~3) * span; i += lsz) {
            const int c = i / span, p = i - c * span;
            const int w = p / tile_r, r = p - w * tile_r;
            const int t = r0 + r + dil * (lo_in + w);
            words[((c / 4) * qstride + p) * 4 + c % 4] =
                (c < cin0 && r0 + r < dil && t < length) ? xb[c * length + t] : 0.0f;
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    for (int blk = 0; blk < blocks; blk++) {
        __constant int* f = table + blk * FIELDS;
        const int cin = f[F_CIN], cout = f[F_COUT];
        const int cop = (cout + 3) & ~3;
#if WLOCAL
        if (blk > 0) {
            stage_weights(wbuf, params + f[F_W1], f[F_W2] - f[F_W1]);
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        WSPACE const float* w1 = wbuf;
        WSPACE const float* b1 = wbuf + (f[F_B1] - f[F_W1]);
#else
        WSPACE const float* w1 = params + f[F_W1];
        WSPACE const float* b1 = params + f[F_B1];
#endif

        // conv1 + bias + ReLU over the middle window [lo_mid, hi)
        const int lo_mid = max(0, m0 - f[F_HMID]);
        conv_stage(buf_in, lo_in, cin, f[F_K1], f[F_E1], w1, b1,
                   cout, lo_mid, hi - lo_mid, RES_NONE, buf_in, lo_in, cin, w1, b1,
                   buf_mid, 0, y, b, length, r0, dil, tile_r, qstride, zero_at);
        barrier(CLK_LOCAL_MEM_FENCE);

#if WLOCAL
        // w2, b2 and (with a downsample) wd, bd lie one after another
        stage_weights(wbuf, params + f[F_W2], f[F_BD] + (f[F_DOWN] ? cop : 0) - f[F_W2]);
        barrier(CLK_LOCAL_MEM_FENCE);
        WSPACE const float* w2 = wbuf;
        WSPACE const float* b2 = wbuf + (f[F_B2] - f[F_W2]);
        WSPACE const float* wd = wbuf + (f[F_WD] - f[F_W2]);
        WSPACE const float* bd = wbuf + (f[F_BD] - f[F_W2]);
#else
        WSPACE const float* w2 = params + f[F_W2];
        WSPACE const float* b2 = params + f[F_B2];
        WSPACE const float* wd = params + f[F_WD];
        WSPACE const float* bd = params + f[F_BD];
#endif
        // conv2 + bias + ReLU, the residual (identity or 1x1 downsample), ReLU over [lo_out, hi)
        const int lo_out = max(0, m0 - f[F_HOUT]);
        conv_stage(buf_mid, lo_mid, cout, f[F_K2], f[F_E2], w2, b2,
                   cout, lo_out, hi - lo_out, f[F_DOWN] ? RES_DOWN : RES_IDENTITY, buf_in, lo_in,
                   cin, wd, bd, buf_out, blk == blocks - 1, y, b,
                   length, r0, dil, tile_r, qstride, zero_at);
        barrier(CLK_LOCAL_MEM_FENCE);
        // the output is the next block's input; the old input region takes its output
        __local float4* old_in = buf_in;
        buf_in = buf_out;
        buf_out = old_in;
        lo_in = lo_out;
    }
}
