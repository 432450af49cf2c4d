/* Convolution as a register-blocked micro-kernel for CPU OpenCL (PoCL): one work item computes
 * a PT-pixel x OB-channel block of the output, OB = VW or 2 VW channels (one or two vectors of
 * VW lanes per pixel, VW the device's preferred float vector width: 8 on AVX2, 16 on AVX-512),
 * PT x OB/VW vector accumulators kept in registers across the whole K loop (K = CG x KH x KW).
 * Per K step it loads OB packed weights as vectors (contiguous: the weights are packed at
 * compile time into [G][OG/OB][KH][KW][CG][OB]) and broadcasts one input value per pixel into
 * PT x OB/VW FMAs: the BLIS/oneDNN shape with the channels in the vector lanes, so no stride,
 * pad or odd width ever needs a masked vector load. VW is a define of the program variant:
 * float16 arithmetic is what makes PoCL's LLVM use AVX-512's zmm registers (float8 stays in
 * ymm, half the FMA rate: measured 82-149 against 227-281 GFLOP/s for one core pair here).
 * Padding is not checked here: the input is either read as it is (no padding) or a zero-padded
 * copy (conv_cpu_pad.cl) of IHP x IWP per channel. Each work item finds its PT input
 * offsets once; pixels past P repeat the last one and are not stored.
 * NDRange: (ceil(P/PT), G * ceil(OG/OB), NB), or with the argument BLOCKS_FIRST 1 its first
 * two dimensions swapped (neighbouring items then read the same input tile, where the input
 * would not stay in cache; _cpu_kernels.blocks_first), local (1,1,1): PoCL then compiles the work
 * item as it is, with no work-item loop around it (with 8 or 32 items per group it ran 1.3-3x
 * slower here: its work-item loop kept the accumulators in memory).
 * Needs: the micro-tile PT OB, the vector width VW (8 or 16), the window KH KW and FUSED_GELU
 * (0, 1 erf, 2 tanh) as #defines; the buffers input, packed weights, output, bias, residual
 * (bias and residual any buffer where the switches below say none: never read), then the
 * sizes (CONV_SIZES: NB C O G CG OG SY SX DY DX OH OW PY PX IH IW, ops/nn/_sizes.py), IHP IWP
 * (the padded copy's plane), BLOCKS_FIRST and the epilogue's switches HAS_BIAS HAS_RESIDUAL
 * PRE_RELU RELU (conv_epilogue.cl's FUSED_* of the same names) as kernel arguments.
 * The switches are arguments, not #defines, so that one program serves every fusion of a
 * micro-tile and window, and a uniform branch per stored value costs little beside the K
 * loop (the models' kernel times stayed within this machine's noise, +-15%). PoCL compiles
 * each kernel's work-group function (for its binary, or at the first enqueue where it
 * specializes work-groups): about 0.5 s on the 2-core machine, since one store loop
 * holds the only copy of the epilogue (1.0-1.2 s with a copy per pixel of the tile, 2.2-3.9
 * s with that unrolled). The window stays a #define: as arguments the compile cost the same,
 * and one run timed ResNet-18's convolutions 30 against 19 ms, which this machine's noise
 * could not settle (stop 27).
 */
/* conv_epilogue.cl's switches, but GELU's, are the kernel's arguments here (run_epilogue) */
#define FUSED_BIAS 0
#define FUSED_RESIDUAL 0
#define FUSED_PRE_RELU 0
#define FUSED_RELU 0
#include "conv_epilogue.cl"
#undef EPILOGUE_ARGS
#define EPILOGUE_ARGS , __global const float* restrict bias, \
                      __global const float* restrict residual
#define EPILOGUE_SWITCHES , const int HAS_BIAS, const int HAS_RESIDUAL, const int PRE_RELU, \
                          const int RELU

/* the value stored at output element `index` of channel `channel`: conv_epilogue.cl's order
   (bias, ReLU, residual, then GELU or ReLU), its switches read at run time (called from one
   place: the store loop at the kernel's end) */
inline float run_epilogue(float v, int index, int channel, __global const float* bias,
                          __global const float* residual, int has_bias, int has_residual,
                          int pre_relu, int relu)
{
    if (has_bias)
        v += bias[channel];
    if (pre_relu)
        v = RELU_KEEPING_NAN(v);
    if (has_residual)
        v += residual[index];
    v = EPILOGUE(index, channel, v);          /* GELU where FUSED_GELU says, else v itself */
    return relu ? RELU_KEEPING_NAN(v) : v;
}
#define STORE_VALUE(index, channel, v) run_epilogue(v, index, channel, bias, residual, \
                                                    HAS_BIAS, HAS_RESIDUAL, PRE_RELU, RELU)
#define PADDED_SIZES CONV_SIZES, const int IHP, const int IWP
#define P (OH * OW)
#define OGB ((OG + OB - 1) / OB)
#define KSTEPS (CG * KH * KW)
#include "cpu_vector.cl"
#if OB != VW && OB != 2 * VW
#error "conv_cpu_blocked: OB must be VW or 2 VW"
#endif

/* One K step (input channel c of tap ky, kx): OB weights as vectors, and the input at
   AT(j) for pixel j, broadcast */
#if OB == 2 * VW
#define K_STEP(AT) { \
        const floatV w0 = LOADV(0, w), w1 = LOADV(1, w); \
        w += OB; \
        _Pragma("unroll") \
        for (int j = 0; j < PT; ++j) { \
            const floatV v = (floatV)(AT(j)); \
            a0[j] = fma(v, w0, a0[j]); \
            a1[j] = fma(v, w1, a1[j]); \
        } }
#else
#define K_STEP(AT) { \
        const floatV w0 = LOADV(0, w); \
        w += OB; \
        _Pragma("unroll") \
        for (int j = 0; j < PT; ++j) \
            a0[j] = fma((floatV)(AT(j)), w0, a0[j]); }
#endif
/* a ReLU on every accumulator (the epilogue on vectors, below) */
#if OB == 2 * VW
#define RELU_ALL() do { \
    _Pragma("unroll") \
    for (int j = 0; j < PT; ++j) { \
        a0[j] = RELU_KEEPING_NAN(a0[j]); \
        a1[j] = RELU_KEEPING_NAN(a1[j]); \
    } } while (0)
#else
#define RELU_ALL() do { \
    _Pragma("unroll") \
    for (int j = 0; j < PT; ++j) \
        a0[j] = RELU_KEEPING_NAN(a0[j]); \
    } while (0)
#endif
#define AT_OFFSET(j) xt[off[j]]
#define AT_RUN(j) xt[j]

__kernel void conv_cpu_blocked(__global const float* restrict input,
                               __global const float* restrict packed,
                               __global float* restrict output EPILOGUE_ARGS PADDED_SIZES,
                               const int BLOCKS_FIRST EPILOGUE_SWITCHES)
{
    /* BLOCKS_FIRST: the NDRange is (blocks, tiles), neighbouring items share a pixel tile */
    const int tile = get_global_id(BLOCKS_FIRST ? 1 : 0);
    const int gb = get_global_id(BLOCKS_FIRST ? 0 : 1), img = get_global_id(2);
    const int g = gb / OGB, ob = gb % OGB;
    const int p0 = tile * PT;
    __global const float* x = input + (img * C + g * CG) * (IHP * IWP);
    /* the PT input offsets, stepped along the output row (one division, not PT of them) */
    int off[PT];
    int oy = p0 / OW, ox = p0 % OW;
    #pragma unroll
    for (int j = 0; j < PT; ++j) {
        off[j] = oy * SY * IWP + ox * SX;
        if (p0 + j + 1 < P && ++ox == OW) {      /* pixels past P repeat the last one */
            ox = 0;
            ++oy;
        }
    }
    /* a run: the PT pixels read PT consecutive inputs (stride 1 within one row, or a 1x1
       window over an unpadded plane): addressed from one pointer, no offsets to hold. Only a
       whole tile: there every step is at least 1, so PT - 1 apart means every step is 1; in
       a last tile the pixels past P repeat an offset (a step of 0) that can hide a row jump */
    const int run = p0 + PT <= P && off[PT - 1] - off[0] == PT - 1;
    floatV a0[PT];
#if OB == 2 * VW
    floatV a1[PT];
#endif
    #pragma unroll
    for (int j = 0; j < PT; ++j) {
        a0[j] = (floatV)0.0f;
#if OB == 2 * VW
        a1[j] = (floatV)0.0f;
#endif
    }
    __global const float* w = packed + (size_t)gb * (KSTEPS * OB);
    for (int ky = 0; ky < KH; ++ky) {
        for (int kx = 0; kx < KW; ++kx) {
            __global const float* xt = x + ky * DY * IWP + kx * DX;
            if (run) {
                xt += off[0];
                for (int c = 0; c < CG; ++c, xt += IHP * IWP)
                    K_STEP(AT_RUN)
            } else {
                for (int c = 0; c < CG; ++c, xt += IHP * IWP)
                    K_STEP(AT_OFFSET)
            }
        }
    }
    const int o0 = g * OG + ob * OB;
    __global float* out = output + (img * O + o0) * P;
    const int pixels = min(PT, P - p0), channels = min(OB, OG - ob * OB);
    /* Without a residual or a GELU, the bias and the ReLU go on the accumulators, OB channels
       of a pixel per vector (the channels are the lanes): run_epilogue's add and max, each a
       vector op for VW outputs instead of a scalar call per output with its switches, and the
       store loop below is a copy. The same values (a NaN's sign bit may differ where the sum
       and the bias are both NaN: the compiler may swap the add's operands).
       Measured on PoCL (AVX-512, 2 cores; base and this in one process, interleaved, the
       same outputs): ResNet-50's 1x1 layers without a residual took 0.86-0.97 of
       the time in 11 of 12 comparisons (1.05 once), a 3x3 layer 0.95-0.97, while a layer with
       a residual (unchanged) took 0.99-1.02. With a residual, copying it into the
       accumulators' [pixel][channel] order first was slower (1.11) than the scalar epilogue,
       which it keeps. */
    const int on_vectors = !HAS_RESIDUAL && !FUSED_GELU;
    float tile_out[PT][OB];
    if (on_vectors && HAS_BIAS) {
        #pragma unroll 1
        for (int i = 0; i < OB; ++i)       /* a last block's missing channels: never stored */
            tile_out[0][i] = i < channels ? bias[o0 + i] : 0.0f;
        const floatV b0 = LOADV(0, tile_out[0]);
#if OB == 2 * VW
        const floatV b1 = LOADV(1, tile_out[0]);
#endif
        #pragma unroll
        for (int j = 0; j < PT; ++j) {
            a0[j] += b0;
#if OB == 2 * VW
            a1[j] += b1;
#endif
        }
    }
    if (on_vectors && (PRE_RELU || RELU))  /* (both: one max, as two would give) */
        RELU_ALL();
    /* the accumulators to a private tile first (PT vector stores, unrolled: a0[j] is a
       register), then one loop stores them (with GELU: applies the epilogue and stores): one
       copy of it in the program, not one per pixel of the tile (2 x PT copies took PoCL
       about 1.9 s to compile at the first enqueue) */
    #pragma unroll
    for (int j = 0; j < PT; ++j) {
        STOREV(a0[j], 0, tile_out[j]);
#if OB == 2 * VW
        STOREV(a1[j], 1, tile_out[j]);
#endif
    }
    if (on_vectors) {
        #pragma unroll 1
        for (int i = 0; i < channels; ++i) {
            #pragma unroll 1
            for (int j = 0; j < pixels; ++j)
                out[i * P + p0 + j] = tile_out[j][i];
        }
        return;
    }
    #pragma unroll 1
    for (int j = 0; j < pixels; ++j) {
        const int at = (img * O + o0) * P + p0 + j;      /* channel o0, pixel p0 + j */
        #pragma unroll 1
        for (int i = 0; i < channels; ++i)
            out[i * P + p0 + j] = STORE_VALUE(at + i * P, o0 + i, tile_out[j][i]);
    }
}
