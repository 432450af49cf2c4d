/* The epilogue of a convolution: what happens to a result as it is stored.
 * FUSED_BIAS  1: a per-channel bias (the Add that followed the layer in the model) is an extra
 *                kernel argument, added to every output of its channel
 * FUSED_RELU  1: the ReLU that followed is applied last
 * (runtime/fusion.py decides; both 0 gives the plain convolution)
 */
#if FUSED_BIAS
#define EPILOGUE_ARGS , __global const float* restrict bias
#define ADD_BIAS(channel, v) ((v) + bias[channel])
#else
#define EPILOGUE_ARGS
#define ADD_BIAS(channel, v) (v)
#endif
#if FUSED_RELU
#define EPILOGUE(channel, v) fmax(ADD_BIAS(channel, v), 0.0f)
#else
#define EPILOGUE(channel, v) ADD_BIAS(channel, v)
#endif
