"""LayerNormalization (ONNX opset 17) as one op: the normalization over the trailing axes from
`axis` on, times a scale and plus a bias of the normalized shape, and optionally the rows' mean
and inverse standard deviation (ONNX's Mean and InvStdDev outputs). One launch where the
decomposition into reductions and elementwise layers took nine (each LayerNorm of a ViT cost
80 µs of ReduceMean alone on the H100): layer_norm.cl, a work-group per row on a GPU, a work
item per row on a CPU, the row length as an argument (one program per variant, not per shape).
"""
from __future__ import annotations

import numpy as np

from ..base import Attr, register_op
from .._nn import NamedOp, require_f32
from .._program import defines, kernel_source
from ...jit.launch import Arg, DEFAULT_CONTEXT, KernelLaunch

_WG_GPU = 128


@register_op
class LayerNorm(NamedOp):
    """Inputs: x, scale[, bias] (scale and bias hold the normalized shape's elements);
    outputs: y[, mean, inv_std_dev] (with `stats`: kept dims of 1 from `axis` on)."""
    input_count = (2, 3)
    type = "LayerNorm"
    attributes = (Attr("axis", "int", -1), Attr("epsilon", "float", 1e-5),
                  Attr("stats", "bool", False))

    def _rows(self, attrs, inputs) -> tuple[int, int, int]:
        """(rows, row length, the axis as a non-negative index)."""
        require_f32(self, attrs, inputs)
        shape = tuple(inputs[0].shape)
        axis = attrs["axis"]
        if not -len(shape) <= axis < len(shape):
            raise self.fail(attrs, f"axis {axis} is out of range for input 0 of shape "
                                   f"{list(shape)}")
        axis %= len(shape)
        d = int(np.prod(shape[axis:], dtype=np.int64))
        for k, what in ((1, "scale"), (2, "bias")):
            if k < len(inputs) and int(np.prod(inputs[k].shape, dtype=np.int64)) != d:
                raise self.fail(attrs, f"the {what} has shape {list(inputs[k].shape)}: it "
                                       f"needs the {d} values of the normalized axes "
                                       f"{list(shape[axis:])}")
        return int(np.prod(shape[:axis], dtype=np.int64)), d, axis

    def infer_shapes(self, attrs, inputs, consts):
        _, _, axis = self._rows(attrs, inputs)
        shape = tuple(inputs[0].shape)
        outs = [(shape, "f32")]
        if attrs["stats"]:
            kept = shape[:axis] + (1,) * (len(shape) - axis)
            outs += [(kept, "f32"), (kept, "f32")]
        return outs

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        rows, d, _ = self._rows(attrs, inputs)
        wg = 1 if ctx.on_cpu else _WG_GPU
        bias = len(inputs) > 2
        # d and epsilon are arguments (one program for every shape and epsilon); WG is the
        # device's variant (a CPU's one item per row). HAS_BIAS and STATS stay defines: they
        # are not numbers but the kernel's argument list (a bias input, two more outputs), which
        # exist only in that variant, so a flag argument would need buffers bound for nothing
        src = defines(WG=wg, HAS_BIAS=int(bias), STATS=int(attrs["stats"])) + \
            kernel_source("layer_norm.cl")
        args = [Arg.input(0), Arg.input(1)] + ([Arg.input(2)] if bias else []) + \
            [Arg.output(0)] + ([Arg.output(1), Arg.output(2)] if attrs["stats"] else []) + \
            [Arg.scalar(np.int32(d)), Arg.scalar(np.float32(attrs["epsilon"]))]
        return [KernelLaunch(source=src, entry="layer_norm", args=tuple(args),
                             global_size=(rows * wg,), local_size=(wg,),
                             label=f"layer_norm_{d}")]
