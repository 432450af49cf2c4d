"""ScatterElementsUpdate (OpenVINO opset 12: ONNX ScatterElements and Scatter) and ScatterNDUpdate
(opset 15: ONNX ScatterND), with the reductions none, sum, prod, min, max; and ONNX
TensorScatter (a KV cache's update). The updates are
applied in the order ONNX lists them (index_scatter.cl), so duplicate indices give what ONNX
Runtime gives; negative indices count from the end; an update whose index is out of range is
skipped (_launch.py)."""
from __future__ import annotations

from ...jit.launch import Arg, DEFAULT_CONTEXT
from .._program import numel, program_text, shape_of
from ..base import Attr, Op, register_op
from ._launch import (axis_of, check_index_type, const_scalar, dense_strides, ints, launch,
                      refuse, scalar)

# reduction -> REDUCE(a, b) of the old value a and the update b (a C expression for any type);
# min and max keep the old value only where it is strictly better, as ONNX Runtime does, so
# that a NaN on either side comes out as ONNX Runtime's does (an update replaces an old NaN)
REDUCTIONS = {"none": "(b)", "sum": "((a) + (b))", "prod": "((a) * (b))",
              "min": "((a) < (b) ? (a) : (b))", "max": "((b) < (a) ? (a) : (b))"}


def _program(label: str, inputs, reduction: str) -> str:
    values = {"DATA_TYPE": inputs[0].cl_type, "IDX_TYPE": inputs[1].cl_type,
              "REDUCE(a, b)": REDUCTIONS[reduction]}
    return program_text(label, values, "index_scatter.cl")


def _copy(source: str, count: int):
    return launch(source, "scatter_copy", (Arg.input(0), Arg.output(0), scalar(count)), count,
                  "scatter_copy")


class _Scatter(Op):
    attributes = (Attr("reduction", "str", "none"), Attr("use_init_val", "bool", True))

    def parse_attributes(self, raw, layer):
        attrs = super().parse_attributes(raw, layer)
        if attrs["reduction"] not in REDUCTIONS:
            raise refuse(self.type, attrs, f"reduction='{attrs['reduction']}' is not supported; "
                                           f"supported: {', '.join(REDUCTIONS)}")
        if not attrs["use_init_val"]:
            raise refuse(self.type, attrs, "use_init_val=false is not supported")
        return attrs

    def _check_types(self, attrs, inputs):
        check_index_type(self.type, attrs, inputs[1])
        if inputs[2].dtype != inputs[0].dtype:
            raise refuse(self.type, attrs, f"the updates are {inputs[2].dtype} and the data "
                                           f"{inputs[0].dtype}; they must be of one type")

    def infer_shapes(self, attrs, inputs, consts):
        self._geometry(attrs, inputs, consts)
        return [(shape_of(inputs[0]), inputs[0].dtype)]


@register_op
class ScatterElementsUpdate(_Scatter):
    """out = data; out[c with c[axis] = indices[c]] = reduce(that, updates[c]) for every c of
    the indices (which have the updates' shape); axis: the constant input 3."""
    input_count = (4, 4)
    type = "ScatterElementsUpdate"
    const_inputs = (3,)

    def _geometry(self, attrs, inputs, consts):
        self._check_types(attrs, inputs)
        data, idx, upd = (shape_of(t) for t in inputs[:3])
        axis = axis_of(self.type, attrs, int(const_scalar(self.type, attrs, consts, 3, "axis")),
                       len(data))
        if idx != upd or len(idx) != len(data) or any(
                i > d for k, (i, d) in enumerate(zip(idx, data)) if k != axis):
            raise refuse(self.type, attrs, f"indices {list(idx)} and updates {list(upd)} must "
                                           f"have one shape, of data {list(data)}'s rank and "
                                           f"no larger on axes other than {axis}")
        return data, upd, axis

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        data, upd, axis = self._geometry(attrs, inputs, consts)
        src = _program("scatter_elements", inputs, attrs["reduction"])
        lines = numel(upd) // upd[axis]
        return [_copy(src, numel(data)),
                launch(src, "scatter_elements",
                       (Arg.input(1), Arg.input(2), Arg.output(0),
                        ints(list(upd) + dense_strides(data)), scalar(lines), scalar(len(data)),
                        scalar(axis), scalar(data[axis])), lines, "scatter_elements")]


@register_op
class ScatterNDUpdate(_Scatter):
    """out = data; for each index tuple p (the last axis of the indices, m values naming data's
    first m axes): out[tuple p] = reduce(that, updates[p]), a slice of data.shape[m:]."""
    input_count = (3, 3)
    type = "ScatterNDUpdate"

    def _geometry(self, attrs, inputs, consts):
        self._check_types(attrs, inputs)
        data, idx, upd = (shape_of(t) for t in inputs[:3])
        m = idx[-1] if idx else 0
        if not 1 <= m <= len(data) or upd != idx[:-1] + data[m:]:
            raise refuse(self.type, attrs, f"indices {list(idx)} and updates {list(upd)} do not "
                                           f"fit data {list(data)} (updates must be "
                                           f"indices.shape[:-1] + data.shape[m:], m = "
                                           f"indices.shape[-1] at most the data's rank)")
        return data, idx, m

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        data, idx, m = self._geometry(attrs, inputs, consts)
        src = _program("scatter_nd", inputs, attrs["reduction"])
        slice_ = numel(data[m:])
        return [_copy(src, numel(data)),
                launch(src, "scatter_nd",
                       (Arg.input(1), Arg.input(2), Arg.output(0),
                        ints(list(data[:m]) + dense_strides(data)[:m]), scalar(slice_),
                        scalar(numel(idx[:-1])), scalar(m)), slice_, "scatter_nd")]


@register_op
class TensorScatter(Op):
    """ONNX TensorScatter (opset 24, a KV cache's update): past_cache with update written
    along `axis` from write_indices[batch] (input 2, default 0) on; mode linear (a position past
    the axis is skipped) or circular (modulo the axis)."""
    input_count = (2, 3)
    type = "TensorScatter"
    attributes = (Attr("axis", "int", -2), Attr("mode", "str", "linear"))

    def _geometry(self, attrs, inputs):
        if attrs["mode"] not in ("linear", "circular"):
            raise refuse(self.type, attrs, f"mode='{attrs['mode']}' is not one of linear, "
                                           f"circular")
        cache, upd = shape_of(inputs[0]), shape_of(inputs[1])
        axis = axis_of(self.type, attrs, attrs["axis"], len(cache))
        if axis == 0 or len(upd) != len(cache) or inputs[1].dtype != inputs[0].dtype or any(
                u != c for k, (u, c) in enumerate(zip(upd, cache)) if k != axis) or \
                upd[axis] > cache[axis]:
            raise refuse(self.type, attrs, f"the update {list(upd)} ({inputs[1].dtype}) does "
                                           f"not fit the cache {list(cache)} "
                                           f"({inputs[0].dtype}) along axis {axis} (not the "
                                           f"batch axis 0)")
        if len(inputs) > 2:
            check_index_type(self.type, attrs, inputs[2], "write_indices")
            if shape_of(inputs[2]) != (cache[0],):
                raise refuse(self.type, attrs, f"write_indices must have shape [{cache[0]}], "
                                               f"found {list(shape_of(inputs[2]))}")
        return cache, upd, axis

    def infer_shapes(self, attrs, inputs, consts):
        self._geometry(attrs, inputs)
        return [(shape_of(inputs[0]), inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        cache, upd, axis = self._geometry(attrs, inputs)
        has_indices = len(inputs) > 2
        src = program_text("tensor_scatter", {
            "DATA_TYPE": inputs[0].cl_type, "REDUCE(a, b)": REDUCTIONS["none"],
            "IDX_TYPE": inputs[2].cl_type if has_indices else "long"}, "index_scatter.cl")
        count = numel(upd)
        return [_copy(src, numel(cache)),
                launch(src, "tensor_scatter",
                       (Arg.input(1), Arg.input(2) if has_indices else Arg.input(1),
                        Arg.output(0), scalar(count), scalar(upd[axis]),
                        scalar(numel(upd[axis + 1:])), scalar(cache[axis]),
                        scalar(numel(cache[1:axis])), scalar(attrs["mode"] == "circular"),
                        scalar(has_indices)), count, "tensor_scatter")]
