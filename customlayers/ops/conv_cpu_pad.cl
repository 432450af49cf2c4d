/* The zero-padded copy of the input that conv_cpu_blocked.cl reads, a program of its own: one
 * program serves every convolution's copy, whatever its window and epilogue (PoCL compiles a
 * kernel again for each program that holds it, about 0.45 s each on the 2-core machine).
 * Needs: CONV_SIZES (ops/nn/_sizes.py); then IHP IWP as kernel arguments. */
#define PADDED_SIZES CONV_SIZES, const int IHP, const int IWP

/* NB*C planes of IHP x IWP, the input at (PY, PX). One work item per element of the copy,
 * NDRange (IWP, IHP, NB * C): the coordinates come from the NDRange, not from divisions of a
 * linear index by sizes that are arguments (a vector of integer divisions costs more than the
 * copy); PoCL vectorizes along x. */
__kernel void conv_cpu_pad(__global const float* restrict input, __global float* restrict out
                           PADDED_SIZES)
{
    const int xp = get_global_id(0), yp = get_global_id(1), plane = get_global_id(2);
    const int x = xp - PX, y = yp - PY;
    const int inside = (uint)x < (uint)IW && (uint)y < (uint)IH;
    out[(plane * IHP + yp) * IWP + xp] =
        inside ? input[(plane * IH + clamp(y, 0, IH - 1)) * IW + clamp(x, 0, IW - 1)] : 0.0f;
}
