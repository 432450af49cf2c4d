// ONNX Col2Im (opset 18): the sum of sliding blocks back into an image. Input
// (N, C * prod(block), prod(blocks)), output (N, C, image...); output pixel p of channel c sums
// the columns of every block offset k whose block b has p = b * stride - pad_begin + k * dilation.
//
// Baked: T. Kernel arguments: `dims` = S, then per spatial axis: image dim, block dim, number of
// blocks, stride, dilation, pad_begin (6 ints each); the channels; the output element count.
#define MAX_S 8

__kernel void col2im(__global const T* in, __global T* out, __global const int* dims,
                     const int channels, const uint count)
{
    const uint i = get_global_id(0);
    if (i >= count) return;
    const int S = dims[0];
    int pix[MAX_S];
    uint rest = i;
    int kernel_size = 1, blocks = 1;
    for (int a = S - 1; a >= 0; --a) {
        const int d = dims[1 + 6 * a];
        pix[a] = rest % d;
        rest /= d;
        kernel_size *= dims[2 + 6 * a];
        blocks *= dims[3 + 6 * a];
    }
    const uint c = rest % channels, n = rest / channels;
    float acc = 0.0f;
    for (int k = 0; k < kernel_size; ++k) {
        int u = k, b = 0, bstep = 1, ok = 1;
        for (int a = S - 1; a >= 0 && ok; --a) {
            __global const int* m = dims + 1 + 6 * a;
            const int ka = u % m[1];
            u /= m[1];
            const int t = pix[a] + m[5] - ka * m[4];
            if (t < 0 || t % m[3] != 0 || t / m[3] >= m[2]) ok = 0;
            b += (t / m[3]) * bstep;
            bstep *= m[2];
        }
        if (ok) acc += (float)in[((n * channels + c) * kernel_size + k) * blocks + b];
    }
    out[i] = (T)acc;
}
