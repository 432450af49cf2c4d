"""Select-1 (ONNX Where): out = cond ? then : else, elementwise, the three inputs broadcast to
the output with numpy rules (auto_broadcast numpy; 'none' needs equal shapes), on every element
type the runtime holds (the dtype table's OpenCL C type).

Its kernel, select.cl, takes the geometry (the output's dims and each input's strides) as a
small buffer argument: one program per element type pair, whatever the shapes.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ...errors import BindingError
from ...jit.launch import Arg, DEFAULT_CONTEXT, KernelLaunch
from ...jit.tensor import TensorDesc
from .._program import (LinearView, broadcast_shapes, coalesce, global_1d, numel,
                        program_text, shape_of)
from ..base import Attr, Op, register_op


@register_op
class Select(Op):
    input_count = (3, 3)
    type = "Select"
    attributes = (Attr("auto_broadcast", "str", "numpy"),)

    def parse_attributes(self, raw: Mapping[str, str], layer: str) -> dict[str, Any]:
        attrs = super().parse_attributes(raw, layer)
        attrs["auto_broadcast"] = attrs["auto_broadcast"].lower()
        if attrs["auto_broadcast"] not in ("numpy", "none"):
            raise BindingError(f"layer '{layer}' (Select): auto_broadcast="
                               f"'{attrs['auto_broadcast']}' is not supported; expected numpy "
                               f"or none")
        return attrs

    def infer_shapes(self, attrs, inputs: Sequence[TensorDesc], consts):
        if len(inputs) != 3:
            raise BindingError(f"Select: expected 3 inputs (cond, then, else), found "
                               f"{len(inputs)}")
        shapes = [shape_of(t) for t in inputs]
        if attrs.get("auto_broadcast", "numpy") == "none" and len(set(shapes)) > 1:
            raise BindingError(f"Select: auto_broadcast='none' needs equal shapes, found "
                               f"{', '.join(str(list(s)) for s in shapes)}")
        if inputs[1].dtype != inputs[2].dtype:
            raise BindingError(f"Select: 'then' and 'else' have element types "
                               f"{inputs[1].dtype} and {inputs[2].dtype}; they must be the same")
        return [(broadcast_shapes(self.type, *shapes), inputs[1].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT) -> list[KernelLaunch]:
        shape = shape_of(outputs[0])
        views = [LinearView.dense(shape_of(t)).broadcast_to(shape) for t in inputs]
        dims, *strides = coalesce(shape, *(v.strides for v in views))
        geo = np.array([*dims, *(s for st in strides for s in st), 0], np.int32)
        count = numel(shape)
        source = program_text("select", {"COND_TYPE": inputs[0].cl_type,
                                         "T": outputs[0].cl_type}, "select.cl")
        return [KernelLaunch(source, "select_map",
                             (Arg.input(0), Arg.input(1), Arg.input(2), Arg.output(0),
                              Arg.const(geo), Arg.scalar(np.int32(len(dims))),
                              Arg.scalar(np.uint32(count))),
                             global_1d(count), label="select")]
