// out[b,f,y,x] = in[b,f,y,x] * mask[b,0,y,x]. The grid is the mask's (X, Y, B): each work item
// reads its mask value once and applies it to every feature of the data input.
__kernel void spatial_mask_kernel(const __global INPUT0_TYPE* data,
                                  const __global INPUT1_TYPE* mask,
                                  __global OUTPUT0_TYPE* out)
{
    const uint x = get_global_id(0);
    const uint y = get_global_id(1);
    const uint b = get_global_id(2);

    const INPUT1_TYPE m = mask[INPUT1_OFFSET + b * INPUT1_PITCHES[0] + y * INPUT1_PITCHES[2]
                               + x * INPUT1_PITCHES[3]];
    const uint in_base = INPUT0_OFFSET + b * INPUT0_PITCHES[0] + y * INPUT0_PITCHES[2]
                       + x * INPUT0_PITCHES[3];
    const uint out_base = OUTPUT0_OFFSET + b * OUTPUT0_PITCHES[0] + y * OUTPUT0_PITCHES[2]
                        + x * OUTPUT0_PITCHES[3];
    for (uint f = 0; f < OUTPUT0_DIMS[1]; ++f)
        out[out_base + f * OUTPUT0_PITCHES[1]] =
            (OUTPUT0_TYPE)(data[in_base + f * INPUT0_PITCHES[1]] * m);
}
