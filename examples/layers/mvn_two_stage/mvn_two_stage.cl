// Two-stage MVN. Both stages are in one file; each CustomLayer stage names its entry.

// Stage 0: one work item per (f, b) plane of `plane` rows of `width` pixels computes the mean,
// then the variance around it (two passes: the one-pass E[x^2]-E[x]^2 loses precision).
__kernel void mvn_statistics(__global const float* restrict src,
                             __global float* restrict mean,
                             __global float* restrict variance,
                             int plane, int width)
{
    const int f = get_global_id(0);
    const int F = get_global_size(0);
    const int b = get_global_id(1);
    const int n = plane * width;
    __global const float* p = src + (b * F + f) * n;
    float sum = 0.0f;
    for (int i = 0; i < n; ++i)
        sum += p[i];
    const float m = sum / n;
    float sq = 0.0f;
    for (int i = 0; i < n; ++i)
        sq += (p[i] - m) * (p[i] - m);
    mean[b * F + f] = m;
    variance[b * F + f] = sq / n;
}

// Stage 1: one work item per element: subtract the plane's mean and, when normalize_variance
// is set, divide by sqrt(variance + eps).
__kernel void mvn_normalize(__global const float* restrict src,
                            __global float* restrict dst,
                            __global const float* restrict mean,
                            __global const float* restrict variance,
                            int normalize_variance,
                            float eps)
{
    const int x = get_global_id(0);
    const int W = get_global_size(0);
    const int y = get_global_id(1);
    const int H = get_global_size(1);
    const int bf = get_global_id(2);
    const int i = (bf * H + y) * W + x;
    float v = src[i] - mean[bf];
    if (normalize_variance)
        v /= sqrt(variance[bf] + eps);
    dst[i] = v;
}
