// Concat: copies one input into its slice of the output, one work-item per input element.
// Both tensors are dense; seen as [outer][axis][inner], the input is a run of CHUNK elements
// per outer index that lands at OFFSET within each output run of OUT_CHUNK elements.
//
// Defined by ops/tensor/concat.py: IN_TYPE, OUT_TYPE. Arguments (so that one program serves
// every input of every Concat of that type): count (input elements), chunk (input axis size *
// inner), out_chunk (output axis size * inner), offset (elements of the inputs before this one
// along the axis, times inner).
__kernel void concat_copy(__global const IN_TYPE* restrict in, __global OUT_TYPE* restrict out,
                          const uint count, const uint chunk, const uint out_chunk,
                          const uint offset)
{
    const uint i = get_global_id(0);
    if (i >= count) return;
    const uint outer = i / chunk;
    out[outer * out_chunk + offset + (i - outer * chunk)] = in[i];
}
