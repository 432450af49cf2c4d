/* The epilogue of a convolution: what happens to a result as it is stored.
 * FUSED_BIAS      1: a per-channel bias (the Add that followed the layer in the model) is an
 *                    extra kernel argument, added to every output of its channel
 * FUSED_RESIDUAL  1: the other input of a residual Add that followed (a tensor of the output's
 *                    shape) is the next argument, added element by element after the bias
 * FUSED_PRE_RELU  1: a ReLU between the bias and the residual Add (conv, ReLU, Add, ReLU)
 * FUSED_RELU      1: the ReLU that followed is applied last
 * FUSED_GELU      1 (erf) or 2 (tanh): the GELU that followed is applied last instead (a
 *                    transformer's feed-forward Linear; the Gelu op's own formulas)
 * EPILOGUE(index, channel, v): the value to store at output element `index` (dense BFYX) of
 * channel `channel` (`v` a float; a vector only where FUSED_RESIDUAL and FUSED_GELU are 0).
 * (passes/fusion.py decides; all 0 gives the plain convolution)
 */
/* ReLU that keeps a NaN (as the ReLU op does): fmax(NaN, 0) is 0, which turned a NaN input into
   zeros wherever the ReLU was fused into its producer. A float or a float vector (the ternary
   then selects per lane) */
#define RELU_KEEPING_NAN(v) ((v) < 0.0f ? 0.0f : (v))
#if FUSED_BIAS
#define BIAS_ARG , __global const float* restrict bias
#define ADD_BIAS(channel, v) ((v) + bias[channel])
#else
#define BIAS_ARG
#define ADD_BIAS(channel, v) (v)
#endif
#if FUSED_PRE_RELU
#define BIAS_RELU(channel, v) RELU_KEEPING_NAN(ADD_BIAS(channel, v))
#else
#define BIAS_RELU(channel, v) ADD_BIAS(channel, v)
#endif
#if FUSED_RESIDUAL
#define EPILOGUE_ARGS BIAS_ARG, __global const float* restrict residual
#define ADD_RESIDUAL(index, channel, v) (BIAS_RELU(channel, v) + residual[index])
#else
#define EPILOGUE_ARGS BIAS_ARG
#define ADD_RESIDUAL(index, channel, v) ADD_BIAS(channel, v)
#endif
#if FUSED_GELU == 1
#include "erf.cl"
#define GELU_OF(x) (0.5f * (x) * (1.0f + erf_rational((x) * M_SQRT1_2_F)))
#elif FUSED_GELU == 2
#define GELU_OF(x) (0.5f * (x) * (1.0f + tanh(0.7978845608028654f * \
                                              ((x) + 0.044715f * (x) * (x) * (x)))))
#endif
#if FUSED_GELU
inline float fused_gelu(float x) { return GELU_OF(x); }
#define EPILOGUE(index, channel, v) fused_gelu(ADD_RESIDUAL(index, channel, v))
#elif FUSED_RELU
#define EPILOGUE(index, channel, v) RELU_KEEPING_NAN(ADD_RESIDUAL(index, channel, v))
#else
#define EPILOGUE(index, channel, v) ADD_RESIDUAL(index, channel, v)
#endif
