"""Reorder: copy a tensor between two descriptions of the same logical shape (format, padding,
element type). Inserted by the network where a custom layer asks for a format other than the one
its producer writes, and where it is handed a padded tensor. The padding of the destination is
written too (with zeros), so a reused buffer never leaks old values into a kernel that reads it.
"""
from __future__ import annotations

from ..jit.tensor import FORMAT_ORDER, TensorDesc
from ..jit.launch import Arg, KernelLaunch

_SOURCE = """
__kernel void reorder(__global const {src_t}* restrict src, __global {dst_t}* restrict dst)
{{
    const int i = get_global_id(0);
    if (i >= {dst_count}) return;
    /* position of i in the destination's padded B,F,Y,X space (memory order {dst_fmt}) */
    int rest = i;
    int pos[4];
{dst_decompose}
    const int b = pos[0] - {dlb}, f = pos[1] - {dlf}, y = pos[2] - {dly}, x = pos[3] - {dlx};
    if (b < 0 || b >= {B} || f < 0 || f >= {F} || y < 0 || y >= {Y} || x < 0 || x >= {X}) {{
        dst[i] = ({dst_t})0;
        return;
    }}
    const int s = {src_off} + b * {sp0} + f * {sp1} + y * {sp2} + x * {sp3};
    dst[i] = ({dst_t})src[s];
}}
"""


def reorder_launch(src: TensorDesc, dst: TensorDesc) -> KernelLaunch:
    if src.dims != dst.dims:
        raise ValueError(f"reorder between different shapes {src.dims} and {dst.dims}")
    padded = dst.padded_dims
    order = FORMAT_ORDER[dst.format]
    lines = []
    for axis in reversed(order):        # innermost first
        lines.append(f"    pos[{axis}] = rest % {padded[axis]}; rest /= {padded[axis]};")
    b, f, y, x = dst.dims
    source = _SOURCE.format(
        src_t=src.cl_type, dst_t=dst.cl_type, dst_count=dst.buffer_count,
        dst_fmt=dst.format, dst_decompose="\n".join(lines),
        dlb=dst.lower_pad[0], dlf=dst.lower_pad[1], dly=dst.lower_pad[2], dlx=dst.lower_pad[3],
        B=b, F=f, Y=y, X=x, src_off=src.offset,
        sp0=src.pitches[0], sp1=src.pitches[1], sp2=src.pitches[2], sp3=src.pitches[3])
    return KernelLaunch(source=source, entry="reorder", args=(Arg.input(0), Arg.output(0)),
                        global_size=(dst.buffer_count,), local_size=None,
                        label=f"reorder {src.describe()} -> {dst.describe()}")
