// The discrete Fourier transform of ONNX's DFT and STFT (ops/signal/dft.py): a direct sum per
// output bin, O(length) work per work-item; sizes and strides are kernel arguments.
//
// Baked: DATA_TYPE (float or double). The twiddles and the sums are in double wherever the
// device has it (cl_khr_fp64 is then defined), in DATA_TYPE elsewhere: an f32 spectrum is
// then rounded once, as a float64 reference's is, and a bin that is 0 comes out 0 to ~1e-12
// rather than to float's error of the terms' magnitude. A complex value is a trailing pair
// (re, im); a real input has one value per element (in_complex = 0).
//
// Output element (o, f, k, i) of [outer, frames, bins, inner] sums input elements
// x[o * s_outer + f * s_frame + n * s_n + i * s_inner] (in elements of 1 or 2 values) for
// n < n_read, times window[n] where has_window, times exp(sign * 2 pi i * k * n / length).
// The angle's numerator (k * n) mod length is exact in integers, so the twiddle loses no
// precision to a large k * n.
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define ACC_TYPE double
#define TWO_PI 6.283185307179586
#else
#define ACC_TYPE DATA_TYPE
#define TWO_PI 6.2831855f
#endif

inline ACC_TYPE twiddle_angle(long k, long n, int length)
{
    return (TWO_PI / (ACC_TYPE)length) * (ACC_TYPE)((k * n) % length);
}

__kernel void dft(__global const DATA_TYPE* restrict x,
                  __global const DATA_TYPE* restrict window,
                  __global DATA_TYPE* restrict y,
                  const int count, const int frames, const int bins, const int inner,
                  const int length, const int n_read, const int s_outer, const int s_frame,
                  const int s_n, const int s_inner, const int in_complex, const int sign,
                  const int has_window, const int inverse)
{
    const int gid = get_global_id(0);
    if (gid >= count) return;
    const int i = gid % inner;
    int t = gid / inner;
    const int k = t % bins;
    t /= bins;
    const int f = t % frames, o = t / frames;
    const int width = in_complex ? 2 : 1;
    const long base = (long)o * s_outer + (long)f * s_frame + (long)i * s_inner;
    ACC_TYPE acc_re = 0, acc_im = 0;
    for (int n = 0; n < n_read; ++n) {
        const long at = (base + (long)n * s_n) * width;
        ACC_TYPE re = x[at], im = in_complex ? x[at + 1] : (ACC_TYPE)0;
        if (has_window) {
            re *= window[n];
            im *= window[n];
        }
        const ACC_TYPE angle = twiddle_angle(k, n, length);
        const ACC_TYPE c = cos(angle), s = sign * sin(angle);
        acc_re += re * c - im * s;
        acc_im += re * s + im * c;
    }
    const ACC_TYPE scale = inverse ? (ACC_TYPE)1 / (ACC_TYPE)length : (ACC_TYPE)1;
    y[2 * (long)gid] = (DATA_TYPE)(acc_re * scale);
    y[2 * (long)gid + 1] = (DATA_TYPE)(acc_im * scale);
}

// The inverse of a one-sided spectrum (numpy's irfft): the first length / 2 + 1 bins (those
// past n_read are 0) extended by Hermitian symmetry, X[length - j] = conj(X[j]); the output
// is real, one value per element of [outer, length, inner].
__kernel void irfft(__global const DATA_TYPE* restrict x,
                    __global DATA_TYPE* restrict y,
                    const int count, const int length, const int inner, const int n_read,
                    const int s_outer, const int s_n, const int in_complex)
{
    const int gid = get_global_id(0);
    if (gid >= count) return;
    const int i = gid % inner;
    const int n = (gid / inner) % length, o = gid / inner / length;
    const int width = in_complex ? 2 : 1;
    const long base = (long)o * s_outer + i;
    ACC_TYPE acc = 0;
    for (int j = 0; j < length; ++j) {
        const int mirrored = j > length / 2;
        const int src = mirrored ? length - j : j;
        if (src >= n_read) continue;
        const long at = (base + (long)src * s_n) * width;
        const ACC_TYPE re = x[at], im = in_complex ? x[at + 1] : (ACC_TYPE)0;
        const ACC_TYPE angle = twiddle_angle(j, n, length);
        // Re(X e^{i angle}), with X conjugated on the mirrored half
        acc += re * cos(angle) + (mirrored ? im : -im) * sin(angle);
    }
    y[gid] = (DATA_TYPE)(acc / (ACC_TYPE)length);
}
