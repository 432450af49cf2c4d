// ONNX RoiAlign (opset 10, 16, 22), as onnx's reference computes it
// (onnx/reference/ops/op_roi_align.py, after Detectron's RoIAlign): output (r, c, ph, pw)
// pools roi_bin_grid_h x roi_bin_grid_w bilinear samples of bin (ph, pw) of ROI r
// (x1, y1, x2, y2, scaled by spatial_scale) on the image batch_indices[r], by average or
// (MAX_MODE) by the reference's maximum of each sample's four weighted corners.
//
// Baked: T (the tensor's type), I (the batch indices' type), MAX_MODE. Kernel arguments:
// the dims (batches, channels, height, width, pooled height, pooled width), sampling_ratio,
// spatial_scale, half_pixel, the output element count.

__kernel void roi_align(__global const T* in, __global const T* rois, __global const I* batch,
                        __global T* out, const int batches, const int channels,
                        const int height, const int width, const int pooled_h,
                        const int pooled_w, const int sampling_ratio,
                        const float spatial_scale, const int half_pixel, const uint count)
{
    const uint i = get_global_id(0);
    if (i >= count) return;
    const int pw = i % pooled_w;
    const int ph = (i / pooled_w) % pooled_h;
    const int c = (i / (pooled_w * pooled_h)) % channels;
    const int r = i / (pooled_w * pooled_h * channels);
    const long b = (long)batch[r];
    if (b < 0 || b >= batches) {          // an index past the batch: no image to pool
        out[i] = (T)NAN;
        return;
    }
    const float offset = half_pixel ? 0.5f : 0.0f;
    const float start_w = (float)rois[4 * r] * spatial_scale - offset;
    const float start_h = (float)rois[4 * r + 1] * spatial_scale - offset;
    float roi_w = (float)rois[4 * r + 2] * spatial_scale - offset - start_w;
    float roi_h = (float)rois[4 * r + 3] * spatial_scale - offset - start_h;
    if (!half_pixel) {                    // malformed ROIs are forced to 1x1
        roi_w = fmax(roi_w, 1.0f);
        roi_h = fmax(roi_h, 1.0f);
    }
    const float bin_h = roi_h / pooled_h, bin_w = roi_w / pooled_w;
    const int grid_h = sampling_ratio > 0 ? sampling_ratio : (int)ceil(roi_h / pooled_h);
    const int grid_w = sampling_ratio > 0 ? sampling_ratio : (int)ceil(roi_w / pooled_w);
    const int samples = max(grid_h * grid_w, 1);
    __global const T* src = in + ((long)b * channels + c) * height * width;
    float acc = 0.0f;
    bool first = true;
    for (int iy = 0; iy < grid_h; ++iy) {
        float y = start_h + ph * bin_h + (iy + 0.5f) * bin_h / grid_h;
        for (int ix = 0; ix < grid_w; ++ix) {
            float x = start_w + pw * bin_w + (ix + 0.5f) * bin_w / grid_w;
            float v1 = 0.0f, v2 = 0.0f, v3 = 0.0f, v4 = 0.0f;
            if (!(y < -1.0f || y > height || x < -1.0f || x > width)) {
                float yy = fmax(y, 0.0f), xx = fmax(x, 0.0f);
                int y_low = (int)yy, x_low = (int)xx, y_high, x_high;
                if (y_low >= height - 1) { y_high = y_low = height - 1; yy = y_low; }
                else y_high = y_low + 1;
                if (x_low >= width - 1) { x_high = x_low = width - 1; xx = x_low; }
                else x_high = x_low + 1;
                const float ly = yy - y_low, lx = xx - x_low, hy = 1.0f - ly, hx = 1.0f - lx;
                v1 = hy * hx * (float)src[y_low * width + x_low];
                v2 = hy * lx * (float)src[y_low * width + x_high];
                v3 = ly * hx * (float)src[y_high * width + x_low];
                v4 = ly * lx * (float)src[y_high * width + x_high];
            }
#if MAX_MODE
            const float v = fmax(fmax(v1, v2), fmax(v3, v4));
            acc = first ? v : fmax(acc, v);
            first = false;
#else
            acc += v1 + v2 + v3 + v4;
#endif
        }
    }
#if !MAX_MODE
    acc /= samples;
#endif
    out[i] = (T)acc;
}
