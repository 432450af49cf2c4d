// YOLO v2 reorg, with darknet's (and OpenVINO's ReorgYolo's) element order. That order is
// defined on flat indices: the input element at flat position d (counted over the input's
// [F,Y,X]) lands at flat position d of the output, and it is read from the input viewed as
// [F/(s*s), Y*s, X*s]. Flat positions are turned back into coordinates so that both tensors
// are addressed through their pitches (any format, padding).
__kernel void reorg_kernel(const __global INPUT0_TYPE* input0, __global OUTPUT0_TYPE* output0)
{
    const uint x = get_global_id(0);
    // the global X is rounded up to a multiple of 8: the extra work items do nothing
    if (x >= INPUT0_DIMS[3])
        return;
    const uint y = get_global_id(1);
    const uint bf = get_global_id(2);
    const uint c = bf % INPUT0_DIMS[1];
    const uint b = bf / INPUT0_DIMS[1];

    const uint C = INPUT0_DIMS[1], H = INPUT0_DIMS[2], W = INPUT0_DIMS[3];
    const uint out_c = C / (STRIDE * STRIDE);
    const uint shift = c / out_c;
    const uint c2 = c % out_c;
    const uint h2 = y * STRIDE + shift / STRIDE;
    const uint w2 = x * STRIDE + shift % STRIDE;

    // source: flat index in the [out_c, H*s, W*s] view, back to input coordinates
    const uint src = (c2 * H * STRIDE + h2) * W * STRIDE + w2;
    const uint sc = src / (H * W), sy = (src / W) % H, sx = src % W;
    // destination: flat index over the input's [C, H, W], back to output coordinates
    const uint dst = (c * H + y) * W + x;
    const uint OH = OUTPUT0_DIMS[2], OW = OUTPUT0_DIMS[3];
    const uint dc = dst / (OH * OW), dy = (dst / OW) % OH, dx = dst % OW;

    output0[OUTPUT0_OFFSET + b * OUTPUT0_PITCHES[0] + dc * OUTPUT0_PITCHES[1]
            + dy * OUTPUT0_PITCHES[2] + dx * OUTPUT0_PITCHES[3]] =
        input0[INPUT0_OFFSET + b * INPUT0_PITCHES[0] + sc * INPUT0_PITCHES[1]
               + sy * INPUT0_PITCHES[2] + sx * INPUT0_PITCHES[3]];
}
