// GRN with a line buffer in __local memory. A work group is one row (y, b) of the image; the
// group copies that row of every channel into `line` ([C][W] floats, the local_data argument
// of X*F*4 bytes), then each work item x sums the squares of its pixel over the channels from
// local memory and scales it: out = x / sqrt(sum_c x^2 + bias).
__kernel void grn_line(__global const float* restrict src_data,
                       __global float* restrict dst_data,
                       __local float* restrict line,
                       int C,
                       float bias)
{
    const int x = get_global_id(0);
    const int W = get_global_size(0);
    const int y = get_global_id(1);
    const int H = get_global_size(1);
    const int b = get_global_id(2);

    event_t copies = 0;
    for (int c = 0; c < C; ++c)
        copies = async_work_group_copy(line + c * W, src_data + ((b * C + c) * H + y) * W,
                                       (size_t)W, copies);
    wait_group_events(1, &copies);

    float sum = 0.0f;
    for (int c = 0; c < C; ++c) {
        const float v = line[c * W + x];
        sum += v * v;
    }
    const float scale = 1.0f / sqrt(sum + bias);
    for (int c = 0; c < C; ++c)
        dst_data[((b * C + c) * H + y) * W + x] = line[c * W + x] * scale;
}
