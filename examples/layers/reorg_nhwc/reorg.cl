// YOLO v2 reorg on NHWC (BYXF) tensors, for the seed's MVCL config: one work item per input row,
// which walks the row's pixels and channels. Element order is darknet's (and OpenVINO
// ReorgYolo's), defined on flat indices over [C,H,W]: the input element at flat position d lands
// at flat position d of the output [C*s*s, H/s, W/s], and is read from the input viewed as
// [C/(s*s), H*s, W*s]. The seed's kernel is in half (the VPU's native type); this one is in
// float, the element type of the networks customlayers runs.
// The work grid has no batch axis (global "(Y+7)/8*8,1,1"), so the layer takes batch 1.
__kernel void reorg_nhwc(__global const float *src, __global float *out,
                         int w, int h, int c, int stride)
{
    const int y = get_global_id(0);
    // the global size is Y rounded up to a multiple of the local size 8
    if (y >= h)
        return;
    const int out_c = c / (stride * stride);
    const int ow = w / stride, oh = h / stride, oc = c * stride * stride;
    for (int x = 0; x < w; ++x) {
        for (int ch = 0; ch < c; ++ch) {
            const int shift = ch / out_c;
            const int c2 = ch % out_c;
            const int h2 = y * stride + shift / stride;
            const int w2 = x * stride + shift % stride;
            // read: flat index in the [out_c, h*s, w*s] view, back to input (ch, y, x)
            const int s = (c2 * h * stride + h2) * w * stride + w2;
            const int sc = s / (h * w), sy = (s / w) % h, sx = s % w;
            // write: flat index over the input's [c, h, w], back to output (ch, y, x)
            const int d = (ch * h + y) * w + x;
            const int dc = d / (oh * ow), dy = (d / ow) % oh, dx = d % ow;
            out[(dy * ow + dx) * oc + dc] = src[(sy * w + sx) * c + sc];
        }
    }
}
