/* Direct convolution with each output's input channels split among CS work items, for layers
 * too small to fill a GPU (a TCN at batch 1: 25 x 784 outputs, 175 terms each).
 *
 * There a kernel's time is the longest work item's chain of reads, not the device's
 * throughput: conv_direct.cl reads 175 values one after another per output. Here CS work items
 * of one work-group share an output, each summing every CS-th channel of the group (about
 * CG / CS channels), and the first adds the CS partial sums in slice order through __local
 * memory: CS times more work items, each CS times shorter.
 *
 * The sum order differs from conv_direct.cl's (CS partial chains, then their sum): the two
 * agree to fp32 rounding, not bit for bit.
 * NDRange: (OW rounded up to LX, OH * CS, N * O); local (LX, CS, 1). Needs the defines of
 * conv_direct.cl (conv_window.cl included), and CS, LX; the fused epilogue is conv_epilogue.cl's.
 */
#include "conv_epilogue.cl"
#include "conv_window.cl"
__kernel __attribute__((reqd_work_group_size(LX, CS, 1)))
void conv_direct_split(__global const float* restrict input,
                       __global const float* restrict weights,
                       __global float* restrict output EPILOGUE_ARGS CONV_SIZES)
{
    __local float partial[CS][LX];
    const int ox = get_global_id(0), oy = get_global_id(1) / CS, z = get_global_id(2);
    const int tx = get_local_id(0), slice = get_local_id(1);
    const int img = z / O, o = z % O, g = o / OG;
    float acc = 0.0f;
    if (ox < OW) {          /* no early return: every work item reaches the barrier */
        __global const float* w = weights + o * (CG * KH * KW);
        __global const float* in = input + (img * C + g * CG) * IH * IW;
        const int iy0 = oy * SY - PY, ix0 = ox * SX - PX;
        /* every CS-th channel from the slice's own; unrolled (with a remainder: CG is an
           argument) so that the slice's reads issue at once */
        #pragma unroll 4
        for (int c = slice; c < CG; c += CS)
            acc = conv_window(in, w, c, iy0, ix0, acc CONV_WINDOW_SIZES);
    }
    partial[slice][tx] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (slice == 0 && ox < OW) {
        float sum = partial[0][tx];
        #pragma unroll
        for (int s = 1; s < CS; ++s)
            sum += partial[s][tx];
        const int at = (z * OH + oy) * OW + ox;
        output[at] = EPILOGUE(at, o, sum);
    }
}
