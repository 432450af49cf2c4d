/* ONNX RotaryEmbedding (opset 23): each output element of x is one half of a rotated pair
 * (x1, x2) of its head's first RD features: cos*x1 - sin*x2 (the first) or sin*x1 + cos*x2 (the
 * second); features from RD on are copied. NDRange: (COUNT padded), one item per element.
 *
 * x is 4-D (B, H, S, HD) or, with SEQ_MAJOR, 3-D (B, S, H*HD). The pairs are (2k, 2k+1) with
 * INTERLEAVED, else (k, k + RD/2). cos/sin rows: cache[position_ids[b, s]] (HAS_POSITIONS, the
 * caches (max position, RD/2); a position out of range is clamped into it), else the caches
 * are (B or 1, S, RD/2), batch stride CB. Defines: T, SEQ_MAJOR, INTERLEAVED, HAS_POSITIONS.
 */
__kernel void rotary(__global const T* restrict x, __global const T* restrict cos_cache,
                     __global const T* restrict sin_cache,
#if HAS_POSITIONS
                     __global const long* restrict positions,
#endif
                     __global T* restrict out, const int COUNT, const int S, const int H,
                     const int HD, const int RD, const int CB, const int MAX_POS)
{
    const int i = get_global_id(0);
    if (i >= COUNT)
        return;
    const int d = i % HD;
    if (d >= RD) {
        out[i] = x[i];
        return;
    }
#if SEQ_MAJOR
    const int s = (i / (HD * H)) % S;
#else
    const int s = (i / HD) % S;
#endif
    const int b = i / (HD * H * S);
    const int hr = RD / 2;      /* pairs */
    const int row = i - d;
#if INTERLEAVED
    const int k = d / 2, second = d & 1;
    const T x1 = x[row + 2 * k], x2 = x[row + 2 * k + 1];
#else
    const int second = d >= hr, k = second ? d - hr : d;
    const T x1 = x[row + k], x2 = x[row + k + hr];
#endif
#if HAS_POSITIONS
    const int p = clamp((int)positions[b * S + s], 0, MAX_POS - 1);
    const int c = p * hr + k;
#else
    const int c = b * CB + s * hr + k;
#endif
    const T cs = cos_cache[c], sn = sin_cache[c];
    out[i] = second ? sn * x1 + cs * x2 : cs * x1 - sn * x2;
}
