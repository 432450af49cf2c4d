// Gather (batch_dims = 0): out[outer][p][inner] = data[outer][indices[p]][inner], one
// work-item per output element. Negative indices count from the end; an index still out of
// range reads as 0 (OpenVINO's behaviour) instead of reading outside the buffer.
//
// Defined by ops/tensor/misc.py: IN_TYPE, IDX_TYPE, OUT_TYPE. Arguments (one program per
// element types serves every shape and axis): count (output elements), inner (elements after
// the axis), nidx (number of indices), axis_dim (data's size on the axis).
__kernel void gather(__global const IN_TYPE* restrict data,
                     __global const IDX_TYPE* restrict indices,
                     __global OUT_TYPE* restrict out, const uint count, const uint inner,
                     const uint nidx, const uint axis_dim)
{
    const uint i = get_global_id(0);
    if (i >= count) return;
    const uint r = i % inner;
    const uint t = i / inner;
    const uint p = t % nidx;
    const uint o = t / nidx;
    long k = (long)indices[p];
    if (k < 0) k += axis_dim;
    out[i] = (k >= 0 && k < axis_dim) ? data[(o * axis_dim + (uint)k) * inner + r]
                                      : (OUT_TYPE)0;
}
