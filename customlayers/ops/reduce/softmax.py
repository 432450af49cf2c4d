"""SoftMax: opset1 (axis >= 0) and opset8 (negative axis counts from the end), one registration;
LogSoftmax (opset5) on the same kernels: one launch where ONNX's decomposition took six;
Hardmax (ONNX) on its own kernel."""
from __future__ import annotations

import numpy as np

from ..base import Attr, register_op
from .._nn import NamedOp, axis_view, require_f32
from .._program import global_1d, program_text
from ...jit.launch import Arg, DEFAULT_CONTEXT, KernelLaunch

_WG = 64  # work items per row when a whole work-group shares one row


@register_op
class SoftMax(NamedOp):
    input_count = (1, 1)
    type = "SoftMax"
    attributes = (Attr("axis", "int", 1),)
    log = False           # LogSoftmax: (x - max) - log(sum) instead of exp(x - max) / sum

    def _view(self, attrs, inputs):
        """[OUTER, L, INNER] around the axis."""
        require_f32(self, attrs, inputs[:1])
        return axis_view(self, attrs, inputs[0], dtypes=None)

    def infer_shapes(self, attrs, inputs, consts):
        self._view(attrs, inputs)
        return [(inputs[0].shape, "f32")]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        outer, length, inner = self._view(attrs, inputs)
        per_item = inner == 1 and ctx.on_cpu
        per_group = inner == 1 and length >= _WG and not ctx.on_cpu
        form = dict(ROW_PER_GROUP=int(per_group), ROW_PER_ITEM=int(per_item), WG=_WG,
                    LOG_SOFTMAX=int(self.log))
        src = program_text("softmax", form, "softmax.cl")
        args = (Arg.input(0), Arg.output(0), Arg.scalar(np.int32(outer)),
                Arg.scalar(np.int32(length)), Arg.scalar(np.int32(inner)))
        if per_item:
            return [KernelLaunch(source=src, entry="softmax", args=args, global_size=(outer,),
                                 local_size=(1,), label=f"{self.type.lower()}_{length}_cpu")]
        if per_group:
            return [KernelLaunch(source=src, entry="softmax", args=args,
                                 global_size=(outer * _WG,), local_size=(_WG,),
                                 label=f"{self.type.lower()}_{length}_rows")]
        return [KernelLaunch(source=src, entry="softmax", args=args,
                             global_size=(outer * inner,), label=f"{self.type.lower()}_{length}")]


@register_op
class LogSoftmax(SoftMax):
    type = "LogSoftmax"
    log = True


@register_op
class Hardmax(NamedOp):
    """ONNX Hardmax (opset 13): the one-hot of the first largest value along `axis`, f32 or
    f64, on hardmax.cl (dims as kernel arguments: one program per element type)."""
    input_count = (1, 1)
    type = "Hardmax"
    attributes = (Attr("axis", "int", -1),)

    def _view(self, attrs, inputs) -> tuple[int, int, int]:
        return axis_view(self, attrs, inputs[0])

    def infer_shapes(self, attrs, inputs, consts):
        self._view(attrs, inputs)
        return [(inputs[0].shape, inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        outer, length, inner = self._view(attrs, inputs)
        src = program_text("hardmax", {"T": inputs[0].cl_type}, "hardmax.cl")
        return [KernelLaunch(src, "hardmax", (Arg.input(0), Arg.output(0),
                                              Arg.scalar(np.int32(length)),
                                              Arg.scalar(np.int32(inner)),
                                              Arg.scalar(np.int32(outer * inner))),
                             global_1d(outer * inner), label="hardmax")]
