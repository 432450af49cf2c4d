// QuantizeLinear and DequantizeLinear (ops/quant/linear.py): one work-item per element.
// The scale (and zero point, of the same shape) of element i is found from its coordinates in
// x seen as [outer, axis_len, inner]: scale index = outer * s_outer + (a / block) * s_axis +
// inner * s_inner, so per-tensor (all strides 0), per-axis (s_axis 1, block 1) and blocked
// (block_size) share one kernel; the dims are kernel arguments, not baked. The zero point is
// read at the scale's index, or (zp_step 0) is one value for all.
//
// Baked: X_TYPE, Y_TYPE, SCALE_TYPE (float), ZP_TYPE, HAS_ZP, QMIN, QMAX (quantize only).

inline long scale_index(const long i, const int axis_len, const int inner, const int block,
                        const int s_outer, const int s_axis, const int s_inner)
{
    const long outer = i / ((long)axis_len * inner);
    const int a = (int)((i / inner) % axis_len);
    const int in = (int)(i % inner);
    return outer * s_outer + (long)(a / block) * s_axis + (long)in * s_inner;
}

// y = saturate(rint(x / scale) + zero_point): rint rounds half to even, as ONNX says
__kernel void quantize(__global const X_TYPE* restrict x, __global const SCALE_TYPE* restrict scale,
#if HAS_ZP
                       __global const ZP_TYPE* restrict zp,
#endif
                       __global Y_TYPE* restrict y, const long count, const int axis_len,
                       const int inner, const int block, const int s_outer, const int s_axis,
                       const int s_inner, const int zp_step)
{
    const long i = get_global_id(0);
    if (i >= count) return;
    const long s = scale_index(i, axis_len, inner, block, s_outer, s_axis, s_inner);
    float v = rint((float)x[i] / (float)scale[s]);
#if HAS_ZP
    v += (float)zp[s * zp_step];
#endif
    v = fmin(fmax(v, (float)QMIN), (float)QMAX);
    y[i] = isnan(v) ? (Y_TYPE)0 : (Y_TYPE)v;
}

// y = (x - zero_point) * scale, the difference taken in float as ONNX's reference does
__kernel void dequantize(__global const X_TYPE* restrict x, __global const SCALE_TYPE* restrict scale,
#if HAS_ZP
                         __global const ZP_TYPE* restrict zp,
#endif
                         __global Y_TYPE* restrict y, const long count, const int axis_len,
                         const int inner, const int block, const int s_outer, const int s_axis,
                         const int s_inner, const int zp_step)
{
    const long i = get_global_id(0);
    if (i >= count) return;
    const long s = scale_index(i, axis_len, inner, block, s_outer, s_axis, s_inner);
    float d = (float)x[i];
#if HAS_ZP
    d -= (float)zp[s * zp_step];
#endif
    y[i] = d * (float)scale[s];
}

// Requantize (QLinearMatMul, QLinearConv): an int32 sum times its multiplier
// (scale_a * scale_b / scale_y, in float as ONNX Runtime), y = saturate(rint(x * m) + zp)
__kernel void requantize(__global const X_TYPE* restrict x, __global const SCALE_TYPE* restrict scale,
#if HAS_ZP
                         __global const ZP_TYPE* restrict zp,
#endif
                         __global Y_TYPE* restrict y, const long count, const int axis_len,
                         const int inner, const int block, const int s_outer, const int s_axis,
                         const int s_inner, const int zp_step)
{
    const long i = get_global_id(0);
    if (i >= count) return;
    const long s = scale_index(i, axis_len, inner, block, s_outer, s_axis, s_inner);
    float v = rint((float)x[i] * (float)scale[s]);
#if HAS_ZP
    v += (float)zp[s * zp_step];
#endif
    v = fmin(fmax(v, (float)QMIN), (float)QMAX);
    y[i] = isnan(v) ? (Y_TYPE)0 : (Y_TYPE)v;
}
