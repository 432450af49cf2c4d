// ONNX GridSample (opset 16 to 22) over 1 to 3 spatial axes, as onnx's reference computes it
// (onnx/reference/ops/op_grid_sample.py, after PyTorch's GridSampler): the grid holds, per
// output point, normalized coordinates in [-1, 1] in reverse axis order (x first).
//
// Baked: T (the tensor's type), TAPS (1 nearest, 2 linear, 4 cubic), PADDING (0 zeros,
// 1 border, 2 reflection). Kernel arguments: `dims` = the spatial rank D, the D input dims, the
// D output dims; the channels; align_corners; the output element count.
#define MAX_D 3

inline float gs_reflect(float x, float lo, float hi)
{
    const float range = hi - lo;
    if (range <= 0.0f) return lo;
    if (x < lo) {
        const float dx = lo - x;
        const int n = (int)(dx / range);
        const float r = dx - n * range;
        return (n % 2 == 0) ? lo + r : hi - r;
    }
    if (x > hi) {
        const float dx = x - hi;
        const int n = (int)(dx / range);
        const float r = dx - n * range;
        return (n % 2 == 0) ? hi - r : lo + r;
    }
    return x;
}

// Keys' cubic convolution weights (A = -0.75) of a point at t in [0, 1) past tap 1
inline void gs_cubic(float t, float* w)
{
    const float a = -0.75f;
    const float x0 = t + 1.0f, x1 = t, x2 = 1.0f - t, x3 = 2.0f - t;
    w[0] = ((a * x0 - 5.0f * a) * x0 + 8.0f * a) * x0 - 4.0f * a;
    w[1] = ((a + 2.0f) * x1 - (a + 3.0f)) * x1 * x1 + 1.0f;
    w[2] = ((a + 2.0f) * x2 - (a + 3.0f)) * x2 * x2 + 1.0f;
    w[3] = ((a * x3 - 5.0f * a) * x3 + 8.0f * a) * x3 - 4.0f * a;
}

__kernel void grid_sample(__global const T* in, __global const T* grid, __global T* out,
                          __global const int* dims, const int channels, const int align,
                          const uint count)
{
    const uint i = get_global_id(0);
    if (i >= count) return;
    const int D = dims[0];
    int o[MAX_D];
    uint rest = i, points = 1, volume = 1;
    for (int a = D - 1; a >= 0; --a) {
        const uint od = (uint)dims[1 + D + a];
        o[a] = rest % od;
        rest /= od;
        points *= od;
        volume *= (uint)dims[1 + a];
    }
    const uint n = rest / (uint)channels;
    uint point = 0;
    for (int a = 0; a < D; ++a) point = point * (uint)dims[1 + D + a] + o[a];
    __global const T* g = grid + (n * points + point) * D;
    __global const T* src = in + rest * volume;

    int base[MAX_D];
    float w[MAX_D][4];
    float lo[MAX_D], hi[MAX_D];
    for (int a = 0; a < D; ++a) {
        const int d = dims[1 + a];
        const float v = (float)g[D - 1 - a];
        lo[a] = align ? 0.0f : -0.5f;
        hi[a] = align ? d - 1.0f : d - 0.5f;
        float x = align ? (v + 1.0f) / 2.0f * (d - 1) : ((v + 1.0f) * d - 1.0f) / 2.0f;
#if TAPS == 1
        x = rint(x);
#endif
        if (x < lo[a] || x > hi[a]) {
#if PADDING == 1 && TAPS != 4     // cubic: each tap is bounded instead (PyTorch, ONNX Runtime)
            x = clamp(x, 0.0f, d - 1.0f);
#elif PADDING == 2
            x = gs_reflect(x, lo[a], hi[a]);
#endif
        }
#if TAPS == 1
        base[a] = (int)x;
        w[a][0] = 1.0f;
#elif TAPS == 2
        const float f = floor(x);
        base[a] = (int)f;
        w[a][0] = 1.0f - (x - f);
        w[a][1] = x - f;
#else
        const float f = floor(x);
        base[a] = (int)f - 1;
        gs_cubic(x - f, w[a]);
#endif
    }
    int total = 1;
    for (int a = 0; a < D; ++a) total *= TAPS;
    float acc = 0.0f;
    for (int t = 0; t < total; ++t) {
        int u = t, at = 0;
        float wt = 1.0f;
        bool inside = true;
        for (int a = D - 1, step = 1; a >= 0; --a) {
            const int k = u % TAPS;
            u /= TAPS;
            const int d = dims[1 + a];
            int j = base[a] + k;
#if PADDING == 0
            inside = inside && j >= 0 && j < d;
#elif PADDING == 1
            j = clamp(j, 0, d - 1);
#else
            j = clamp((int)gs_reflect((float)j, lo[a], hi[a]), 0, d - 1);
#endif
            at += j * step;
            step *= d;
            wt *= w[a][k];
        }
        if (inside) acc += wt * (float)src[at];
    }
    out[i] = (T)acc;
}
