// Gather (batch_dims = 0): out[outer][p][inner] = data[outer][indices[p]][inner], one
// work-item per output element. Negative indices count from the end; an index still out of
// range reads as 0 (OpenVINO's behaviour) instead of reading outside the buffer.
//
// Baked by ops/misc.py: COUNT (output elements), INNER (elements after the axis), NIDX
// (number of indices), AXIS_DIM (data's size on the axis), IN_TYPE, IDX_TYPE, OUT_TYPE.
__kernel void gather(__global const IN_TYPE* restrict data,
                     __global const IDX_TYPE* restrict indices,
                     __global OUT_TYPE* restrict out)
{
    const uint i = get_global_id(0);
    if (i >= COUNT) return;
    const uint r = i % INNER;
    const uint t = i / INNER;
    const uint p = t % NIDX;
    const uint o = t / NIDX;
    long k = (long)indices[p];
    if (k < 0) k += AXIS_DIM;
    out[i] = (k >= 0 && k < AXIS_DIM) ? data[(o * AXIS_DIM + (uint)k) * INNER + r]
                                      : (OUT_TYPE)0;
}
