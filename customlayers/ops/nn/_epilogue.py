"""The one wiring of a fused epilogue (jit.launch.FusedEpilogue: bias, residual, ReLU, folded by
passes/fusion.py) into a built-in op that declares `accepts_epilogue`: the extra kernel
arguments, and the FUSED_* flags that conv_epilogue.cl reads (the kernels #include it). Convolution
(every kernel) and MatMul store through it, so both check and bind the fused tensors alike.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ...jit.launch import Arg, FusedEpilogue
from ...jit.tensor import TensorDesc
from .._program import batch_strides, broadcasts_to, dense_strides


@dataclass(frozen=True)
class EpilogueWiring:
    args: tuple                 # input 0, input 1, output 0, then the bias and the residual
    flags: dict                 # FUSED_BIAS, FUSED_RELU, FUSED_RESIDUAL, FUSED_PRE_RELU


def wire_epilogue(op, attrs, epilogue: FusedEpilogue | None, inputs: Sequence[TensorDesc],
                  output: TensorDesc, channels: int,
                  broadcast_residual: bool = False) -> EpilogueWiring:
    """The wiring of `epilogue` (None: nothing fused) into a layer of two real inputs whose
    output has `channels` channels. The bias is the layer's input 2, the residual its last
    input (the other side of the residual Add), of the output's shape (or, with
    `broadcast_residual`, one that broadcasts to it: the layer reads it with its strides).
    `op` (a NamedOp) names the layer in a BindingError when a fused tensor does not fit."""
    ep = epilogue or FusedEpilogue()
    args = (Arg.input(0), Arg.input(1), Arg.output(0))
    if ep.bias:
        if inputs[2].count != channels:
            raise op.fail(attrs, f"the fused bias has {inputs[2].count} values for "
                                 f"{channels} output channels")
        args += (Arg.input(2),)
    if ep.residual:
        if tuple(inputs[-1].shape) != tuple(output.shape) and not (
                broadcast_residual and broadcasts_to(inputs[-1].shape, output.shape)):
            raise op.fail(attrs, f"the fused residual has shape {list(inputs[-1].shape)}, the "
                                 f"output {list(output.shape)}")
        args += (Arg.input(len(inputs) - 1),)
    flags = dict(FUSED_BIAS=int(ep.bias), FUSED_RELU=int(ep.relu),
                 FUSED_GELU={"": 0, "erf": 1, "tanh": 2}[ep.gelu],
                 FUSED_RESIDUAL=int(ep.residual),
                 FUSED_PRE_RELU=int(ep.residual and ep.pre_relu))
    return EpilogueWiring(args, flags)


def residual_strides(res_shape: tuple, out: tuple, rows_folded: bool) -> dict:
    """matmul.cl's RES_BROADCAST and R_* sizes for a residual of `res_shape` added to a MatMul
    output of `out` (rank 2 to 4: batch axes, rows, columns), read with 0 strides along the
    axes it is broadcast on. `rows_folded`: the output's batch axes are more rows of one GEMM
    (the row index then carries them, in up to three levels)."""
    zero = dict(RES_BROADCAST=0, R_BS0=0, R_BS1=0, R_MI=1, R_B1=1, R_M=0, R_RS1=0, R_RS0=0,
                R_N=0)
    if tuple(res_shape) == tuple(out):
        return zero
    padded = (1,) * (len(out) - len(res_shape)) + tuple(res_shape)
    st = [s if d > 1 else 0 for s, d in zip(dense_strides(padded), padded)]
    found = dict(zero, RES_BROADCAST=1, R_M=st[-2], R_N=st[-1], R_MI=out[-2])
    pad = batch_strides(padded[:-2], st)
    if rows_folded:
        dims = [1] * (4 - len(out)) + list(out[:-2])
        found.update(R_B1=dims[1], R_RS1=pad[1], R_RS0=pad[0])
    else:
        found.update(R_BS0=pad[0], R_BS1=pad[1])
    return found
