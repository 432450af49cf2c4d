"""The sizes the convolution and MatMul kernels read as kernel arguments, so that one program
serves every shape of an op and variant (programs are keyed by source and options only).

A kernel declares them as parameters named as the sizes themselves (`const int OW`), from the
one parameter list rendered here (`params`, a #define the kernel file appends to its
signature); the launch passes the values in the same order (`args`). So the kernel text reads
`OW` as it did when OW was a #define, and the list has one spelling.

What stays a #define is the variant's shape, a few values per network: the GEMM tiles and
register blocks, a kernel's unroll factors, the convolution window KH x KW (every kernel unrolls
its loops over the window, and the implicit GEMM's divisions by KH * KW and KW strength-reduce),
the fused epilogue's flags, the MatMul's transposes.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ...jit.launch import Arg

# a 1-D or 2-D convolution (conv.py's _geometry); KH and KW are #defines
CONV_2D = ("NB", "C", "IH", "IW", "O", "OH", "OW", "G", "CG", "OG",
           "SY", "SX", "DY", "DX", "PY", "PX")
# a 3-D one (conv3d.cl, no unrolled window: the window is an argument too)
CONV_3D = CONV_2D + ("ID", "OD", "KD", "KH", "KW", "SZ", "DZ", "PZ")
# MatMul (matmul.cl): the GEMM's sizes, batch strides, a folded Gather's pick, the two
# numbers of the epilogue's channel expression (MatMul.plan's CHANNEL forms), then each
# operand's row stride and offset, A's rows in two levels, and where the output goes (a folded
# view's, passes/view_folding.py; ops/view_steps.py's GemmLayout), then where a broadcast
# residual's elements are (matmul.cl's RES_AT)
MATMUL = ("M", "N", "K", "OB1", "A_BS0", "A_BS1", "B_BS0", "B_BS1", "A_STEP_ARG", "A_PICK_ARG",
          "CH_DIV", "CH_MOD", "LDA", "LDB", "A_OFF", "B_OFF", "A_R0", "A_RS1",
          "O_BS0", "O_BS1", "LDO", "O_R0", "O_RS1",
          "R_BS0", "R_BS1", "R_MI", "R_B1", "R_M", "R_RS1", "R_RS0", "R_N")


def baked(values: Mapping[str, int], names: Sequence[str]) -> dict:
    """The sizes as #defines instead (the parameter list empty): a program per shape, which a
    GPU's compiler turns into constant divisions and unrolled loops. Measured on an H200 with
    the sizes as arguments: ResNet-50's kernels 23% slower at batch 32 (12.35 against 10.04
    ms), 3.5% at batch 1; a GPU builds a program in a fraction of PoCL's time, so the GPUs keep
    them baked and the CPU devices (PoCL: ~1 s a program) take them as arguments."""
    return {"SIZES_BAKED": 1, **{name: int(values[name]) for name in names}}


def params(names: Sequence[str]) -> str:
    """The kernel parameters `, const int A, const int B ...` (appended to a signature)."""
    return "".join(f", const int {name}" for name in names)


def args(values: Mapping[str, int], names: Sequence[str]) -> tuple[Arg, ...]:
    """The values of `names` as int scalar arguments, in the order of `params(names)`."""
    return tuple(Arg.scalar(np.int32(values[name])) for name in names)


def scalars(*values: int) -> tuple[Arg, ...]:
    """A kernel's own extra int arguments, in order."""
    return tuple(Arg.scalar(np.int32(v)) for v in values)
