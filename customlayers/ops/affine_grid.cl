// ONNX AffineGrid (opset 20): the sampling grid of an affine map per batch item, as GridSample
// reads it: out[n, p, k] = sum_j theta[n, k, j] * base_j(p) + theta[n, k, S], where base_0 is the
// normalized coordinate of point p along the last axis (x), base_1 along the one before (y)...
//
// Baked: T. Kernel arguments: `base`, the normalized coordinates of each spatial axis in turn
// (axis 0 first), `dims` = S, then the S spatial dims; the output element count.
#define MAX_S 3

__kernel void affine_grid(__global const T* theta, __global T* out,
                          __global const float* base, __global const int* dims,
                          const uint count)
{
    const uint i = get_global_id(0);
    if (i >= count) return;
    const int S = dims[0];
    const int k = i % S;
    uint rest = i / S;
    float coord[MAX_S];
    int offset = 0;
    for (int a = 0; a < S; ++a) offset += dims[1 + a];
    for (int a = S - 1; a >= 0; --a) {          // axis a's coordinate, last axis fastest
        const int d = dims[1 + a];
        offset -= d;
        coord[S - 1 - a] = base[offset + rest % d];
        rest /= d;
    }
    __global const T* row = theta + (rest * S + k) * (S + 1);
    float acc = (float)row[S];
    for (int j = 0; j < S; ++j) acc += (float)row[j] * coord[j];
    out[i] = (T)acc;
}
