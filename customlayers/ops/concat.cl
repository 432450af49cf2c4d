// Concat: copies one input into its slice of the output, one work-item per input element.
// Both tensors are dense; seen as [outer][axis][inner], the input is a run of CHUNK elements
// per outer index that lands at OFFSET within each output run of OUT_CHUNK elements.
//
// Baked by ops/concat.py: COUNT (input elements), CHUNK (input axis size * inner), OUT_CHUNK
// (output axis size * inner), OFFSET (elements of the inputs before this one along the axis,
// times inner), IN_TYPE, OUT_TYPE.
__kernel void concat_copy(__global const IN_TYPE* restrict in, __global OUT_TYPE* restrict out)
{
    const uint i = get_global_id(0);
    if (i >= COUNT) return;
    const uint outer = i / CHUNK;
    out[outer * OUT_CHUNK + OFFSET + (i - outer * CHUNK)] = in[i];
}
