// Concat: copies one input into its slice of the output, one work-item per input element,
// on a 2-D range (position in the chunk, outer index): no division by a size known only at
// run time (which left PoCL 5-9x slower than the constant divisions of a per-shape build).
// Both tensors are dense; seen as [outer][axis][inner], the input is a run of CHUNK elements
// per outer index that lands at OFFSET within each output run of OUT_CHUNK elements.
//
// Defined by ops/tensor/concat.py: IN_TYPE, OUT_TYPE. Arguments (so that one program serves
// every input of every Concat of that type): chunk (input axis size * inner), out_chunk
// (output axis size * inner), offset (elements of the inputs before this one along the axis,
// times inner). NDRange: (chunk padded, outer).
__kernel void concat_copy(__global const IN_TYPE* restrict in, __global OUT_TYPE* restrict out,
                          const uint chunk, const uint out_chunk, const uint offset)
{
    const uint r = get_global_id(0), outer = get_global_id(1);
    if (r >= chunk) return;
    out[outer * out_chunk + offset + r] = in[outer * chunk + r];
}
