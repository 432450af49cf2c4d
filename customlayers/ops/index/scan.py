"""CumSum (OpenVINO CumSum-3, which is ONNX's) and CumProd (ONNX opset 26, the same form):
the axis is the constant input 1, `exclusive` and `reverse` attributes. Kernel: index_scan.cl,
one work-item per line along the axis."""
from __future__ import annotations

from ...jit.launch import Arg, DEFAULT_CONTEXT
from .._program import numel, program_text, shape_of
from ..base import Attr, Op, register_op
from ._launch import axis_of, const_scalar, launch, refuse, scalar


class _Cumulate(Op):
    input_count = (1, 2)
    const_inputs = (1,)
    attributes = (Attr("exclusive", "bool", False), Attr("reverse", "bool", False))
    combine = ""
    identity = ""

    def _axis(self, attrs, inputs, consts) -> int:
        rank = len(shape_of(inputs[0]))
        if rank == 0:
            raise refuse(self.type, attrs, "the input is a scalar; it needs an axis")
        if len(inputs) < 2:
            return 0
        if inputs[1].dtype not in ("i32", "i64"):
            raise refuse(self.type, attrs, f"the axis must be i32 or i64, found "
                                           f"{inputs[1].dtype}")
        return axis_of(self.type, attrs, int(const_scalar(self.type, attrs, consts, 1, "axis")),
                       rank)

    def infer_shapes(self, attrs, inputs, consts):
        self._axis(attrs, inputs, consts)
        return [(shape_of(inputs[0]), inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        shape = shape_of(inputs[0])
        axis = self._axis(attrs, inputs, consts)
        n, inner = shape[axis], numel(shape[axis + 1:])
        lines = numel(shape) // n
        t = inputs[0].cl_type
        src = program_text(self.type.lower(), {
            "DATA_TYPE": t, "COMBINE(a, b)": self.combine, "IDENTITY": f"(({t}){self.identity})"},
            "index_scan.cl")
        return [launch(src, "cumulate",
                       (Arg.input(0), Arg.output(0), scalar(lines), scalar(n), scalar(inner),
                        scalar(attrs["exclusive"]), scalar(attrs["reverse"])), lines,
                       self.type.lower())]


@register_op
class CumSum(_Cumulate):
    type = "CumSum"
    combine, identity = "((a) + (b))", "0"


@register_op
class CumProd(_Cumulate):
    type = "CumProd"
    combine, identity = "((a) * (b))", "1"
