// A separable resampling (ONNX Resize and Upsample, every mode): output element i is
//     sum over the taps t_a of every axis a of  prod_a W[a][c_a][t_a] * in[sum_a I[a][c_a][t_a] * stride_a]
// where c_a is i's coordinate on axis a. The host (ops/image/_resize_tables.py) works out the
// taps of each axis (I: input index, W: weight) per output coordinate; an index of -1 in the
// first tap marks a coordinate outside the input (tf_crop_and_resize), which gets the
// extrapolation value.
//
// One work item per output row (all of the last axis): the taps of the other axes are worked
// out once per row (into private arrays, up to MAX_OUTER of them) and the row's loop reads
// only the last axis's table, which a CPU compiler keeps simple.
//
// Baked: T (the tensor's type), ACC (the type it sums in, and of the weights: T itself for
// integer data, which only mode nearest takes: one tap of weight 1). Kernel arguments: the
// per-axis table `axes`, 4 ints per axis (output dim, input stride, taps, offset of its rows
// in `index` and `weight`), the rank, the number of rows, the extrapolation value.
#define MAX_RANK 8
#define MAX_OUTER 64

__kernel void resample(__global const T* in, __global T* out, __global const int* axes,
                       __global const int* index, __global const ACC* weight,
                       const int rank, const uint rows, const float extrapolation)
{
    const uint r = get_global_id(0);
    if (r >= rows) return;
    const int last = rank - 1;
    const int width = axes[4 * last], last_taps = axes[4 * last + 2];
    __global const int* last_index = index + axes[4 * last + 3];
    __global const ACC* last_weight = weight + axes[4 * last + 3];
    __global T* dst = out + (size_t)r * width;
    int row[MAX_RANK], taps[MAX_RANK], stride[MAX_RANK];
    uint rest = r;
    int total = 1;
    bool outside = false;
    for (int a = last - 1; a >= 0; --a) {
        const uint dim = (uint)axes[4 * a];
        const uint c = rest % dim;
        rest /= dim;
        stride[a] = axes[4 * a + 1];
        taps[a] = axes[4 * a + 2];
        row[a] = axes[4 * a + 3] + (int)c * taps[a];
        outside = outside || index[row[a]] < 0;
        total *= taps[a];
    }
    if (outside) {
        for (int x = 0; x < width; ++x) dst[x] = (T)extrapolation;
        return;
    }
    // the other axes' taps of this row: input offset and weight product
    int offsets[MAX_OUTER];
    ACC weights[MAX_OUTER];
    const int cached = min(total, MAX_OUTER);
    for (int t = 0; t < cached; ++t) {
        int u = t, at = 0;
        ACC w = (ACC)1;
        for (int a = last - 1; a >= 0; --a) {
            const int k = u % taps[a];
            u /= taps[a];
            at += index[row[a] + k] * stride[a];
            w *= weight[row[a] + k];
        }
        offsets[t] = at;
        weights[t] = w;
    }
    for (int x = 0; x < width; ++x) {
        const int lx = x * last_taps;
        if (last_index[lx] < 0) {
            dst[x] = (T)extrapolation;
            continue;
        }
        ACC acc = (ACC)0;
        for (int t = 0; t < total; ++t) {
            int at;
            ACC w;
            if (t < MAX_OUTER) {
                at = offsets[t];
                w = weights[t];
            } else {                     // more taps than cached (antialiased 3-D and up)
                int u = t;
                at = 0;
                w = (ACC)1;
                for (int a = last - 1; a >= 0; --a) {
                    const int k = u % taps[a];
                    u /= taps[a];
                    at += index[row[a] + k] * stride[a];
                    w *= weight[row[a] + k];
                }
            }
            ACC sum = (ACC)0;
            for (int k = 0; k < last_taps; ++k)
                sum += last_weight[lx + k] * (ACC)in[at + last_index[lx + k]];
            acc += w * sum;
        }
        dst[x] = (T)acc;
    }
}
