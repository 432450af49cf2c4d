/* LayerNormalization over the last D values of each row (ONNX opset 17, axis to the end):
 *     mean = sum(x) / D,  var = sum((x - mean)^2) / D,  inv = 1 / sqrt(var + eps)
 *     y = (x - mean) * inv * scale + bias
 * in ONNX's own order (two passes: the variance of the centered values, in float), one
 * work-group of WG items per row, whose sums are tree reductions (group_reduce.cl); a CPU
 * device runs a row per work item (WG 1: no barrier tree for it to emulate).
 * STATS 1 also writes the row's mean and inv (ONNX's Mean and InvStdDev outputs); HAS_BIAS 0:
 * no bias input. Rows and D are arguments: one program serves every shape.
 * NDRange: (rows * WG), local (WG).
 */
#include "group_reduce.cl"

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void layer_norm(__global const float* restrict x, __global const float* restrict scale,
#if HAS_BIAS
                __global const float* restrict bias,
#endif
                __global float* restrict y,
#if STATS
                __global float* restrict mean_out, __global float* restrict inv_out,
#endif
                const int d, const float eps)
{
    __local float scratch[WG];
    const int t = get_local_id(0);
    const size_t row = get_group_id(0);
    __global const float* in = x + row * d;
    __global float* out = y + row * d;
    float s = 0.0f;
    for (int i = t; i < d; i += WG)
        s += in[i];
    const float mean = group_sum(scratch, s) / (float)d;
    float v = 0.0f;
    for (int i = t; i < d; i += WG) {
        const float c = in[i] - mean;
        v = fma(c, c, v);
    }
    const float inv = 1.0f / sqrt(group_sum(scratch, v) / (float)d + eps);
    for (int i = t; i < d; i += WG) {
#if HAS_BIAS
        out[i] = fma((in[i] - mean) * inv, scale[i], bias[i]);
#else
        out[i] = (in[i] - mean) * inv * scale[i];
#endif
    }
#if STATS
    if (t == 0) {
        mean_out[row] = mean;
        inv_out[row] = inv;
    }
#endif
}
