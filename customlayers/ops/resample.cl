// A separable resampling (ONNX Resize and Upsample, every mode): output element i is
//     sum over the taps t_a of every axis a of  prod_a W[a][c_a][t_a] * in[sum_a I[a][c_a][t_a] * stride_a]
// where c_a is i's coordinate on axis a. The host (ops/image/_resize_tables.py) works out the
// taps of each axis (I: input index, W: weight) per output coordinate; an index of -1 in the
// first tap marks a coordinate outside the input (tf_crop_and_resize), which gets EXTRAPOLATION.
//
// Baked: T (the tensor's type), ACC (the type it sums in, and of the weights: T itself for
// integer data, which only mode nearest takes: one tap of weight 1). Kernel arguments: the per-axis
// table `axes`, 4 ints per axis (output dim, input stride, taps, offset of its rows in
// `index` and `weight`), the rank, the output element count, the extrapolation value.
#define MAX_RANK 8

__kernel void resample(__global const T* in, __global T* out, __global const int* axes,
                       __global const int* index, __global const ACC* weight,
                       const int rank, const uint count, const float extrapolation)
{
    const uint i = get_global_id(0);
    if (i >= count) return;
    int row[MAX_RANK], taps[MAX_RANK], stride[MAX_RANK];
    uint rest = i;
    int total = 1;
    for (int a = rank - 1; a >= 0; --a) {
        const uint dim = (uint)axes[4 * a];
        const uint c = rest % dim;
        rest /= dim;
        stride[a] = axes[4 * a + 1];
        taps[a] = axes[4 * a + 2];
        row[a] = axes[4 * a + 3] + (int)c * taps[a];
        if (index[row[a]] < 0) {
            out[i] = (T)extrapolation;
            return;
        }
        total *= taps[a];
    }
    ACC acc = (ACC)0;
    for (int t = 0; t < total; ++t) {
        int u = t, at = 0;
        ACC w = (ACC)1;
        for (int a = rank - 1; a >= 0; --a) {
            const int k = u % taps[a];
            u /= taps[a];
            at += index[row[a] + k] * stride[a];
            w *= weight[row[a] + k];
        }
        acc += w * (ACC)in[at];
    }
    out[i] = (T)acc;
}
