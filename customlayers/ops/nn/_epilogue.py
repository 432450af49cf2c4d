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


@dataclass(frozen=True)
class EpilogueWiring:
    args: tuple                 # input 0, input 1, output 0, then the bias and the residual
    flags: dict                 # FUSED_BIAS, FUSED_RELU, FUSED_RESIDUAL, FUSED_PRE_RELU


def wire_epilogue(op, attrs, epilogue: FusedEpilogue | None, inputs: Sequence[TensorDesc],
                  output: TensorDesc, channels: int) -> EpilogueWiring:
    """The wiring of `epilogue` (None: nothing fused) into a layer of two real inputs whose
    output has `channels` channels. The bias is the layer's input 2, the residual its last
    input (the other side of the residual Add), of the output's shape. `op` (a NamedOp) names
    the layer in a BindingError when a fused tensor does not fit."""
    ep = epilogue or FusedEpilogue()
    args = (Arg.input(0), Arg.input(1), Arg.output(0))
    if ep.bias:
        if inputs[2].count != channels:
            raise op.fail(attrs, f"the fused bias has {inputs[2].count} values for "
                                 f"{channels} output channels")
        args += (Arg.input(2),)
    if ep.residual:
        if tuple(inputs[-1].shape) != tuple(output.shape):
            raise op.fail(attrs, f"the fused residual has shape {list(inputs[-1].shape)}, the "
                                 f"output {list(output.shape)}")
        args += (Arg.input(len(inputs) - 1),)
    flags = dict(FUSED_BIAS=int(ep.bias), FUSED_RELU=int(ep.relu),
                 FUSED_GELU={"": 0, "erf": 1, "tanh": 2}[ep.gelu],
                 FUSED_RESIDUAL=int(ep.residual),
                 FUSED_PRE_RELU=int(ep.residual and ep.pre_relu))
    return EpilogueWiring(args, flags)
