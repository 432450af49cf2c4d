"""Ops that make a tensor from indices or positions: OneHot (OpenVINO OneHot-1, with ONNX's
wrapping of negative indices as an option), Range (Range-4; start, stop and step known when the
plan is compiled: constants or value inputs), Eye (Eye-9), Trilu (ONNX; k is data) and
ReverseSequence (ReverseSequence-1). Kernels: index_make.cl."""
from __future__ import annotations

import math

import numpy as np

from ...jit.launch import Arg, DEFAULT_CONTEXT
from ...jit.tensor import TensorError, normalize_dtype
from .._program import numel, shape_of
from ..base import Attr, Op, register_op
from ._launch import (INT_MAX, axis_of, check_index_type, const_scalar, launch, program, refuse,
                      scalar)


@register_op
class OneHot(Op):
    """indices (any numeric type), depth (constant), on_value, off_value (one element each):
    the indices' shape with `depth` inserted at `axis`."""
    input_count = (4, 4)
    type = "OneHot"
    const_inputs = (1,)
    attributes = (Attr("axis", "int", -1), Attr("negative_indices", "str", "off"))

    def _geometry(self, attrs, inputs, consts):
        if attrs["negative_indices"] not in ("off", "wrap"):
            raise refuse(self.type, attrs, f"negative_indices='{attrs['negative_indices']}' "
                                           f"is not one of off, wrap")
        shape = shape_of(inputs[0])
        axis = axis_of(self.type, attrs, attrs["axis"], len(shape) + 1)
        depth = int(const_scalar(self.type, attrs, consts, 1, "depth"))
        if not 1 <= depth * numel(shape) <= INT_MAX:
            raise refuse(self.type, attrs, f"depth {depth} is not positive, or makes an output "
                                           f"of more than {INT_MAX} elements")
        if any(numel(t.shape) != 1 for t in inputs[2:]) or inputs[2].dtype != inputs[3].dtype:
            raise refuse(self.type, attrs, "on_value and off_value must be one element each, "
                                           "of one type")
        return shape, axis, depth

    def infer_shapes(self, attrs, inputs, consts):
        shape, axis, depth = self._geometry(attrs, inputs, consts)
        return [(shape[:axis] + (depth,) + shape[axis:], inputs[2].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        shape, axis, depth = self._geometry(attrs, inputs, consts)
        count = numel(outputs[0].shape)
        src = program("one_hot", "index_make.cl", data=inputs[2].cl_type, idx=inputs[0].cl_type)
        return [launch(src, "one_hot",
                       (Arg.input(0), Arg.input(2), Arg.input(3), Arg.output(0), scalar(count),
                        scalar(depth), scalar(numel(shape[axis:])),
                        scalar(attrs["negative_indices"] == "wrap")), count, "one_hot")]


@register_op
class Range(Op):
    """start + i * step for i while short of stop: max(ceil((stop - start) / step), 0)
    elements, all three of one type (the output's)."""
    input_count = (3, 3)
    type = "Range"
    const_inputs = (0, 1, 2)
    attributes = (Attr("output_type", "str", ""),)

    def _count(self, attrs, inputs, consts) -> int:
        start, stop, step = (const_scalar(self.type, attrs, consts, k, what)
                             for k, what in enumerate(("start", "stop", "step")))
        if len({t.dtype for t in inputs}) != 1 or \
                attrs["output_type"] not in ("", inputs[0].dtype):
            raise refuse(self.type, attrs, f"start, stop, step and the output must be of one "
                                           f"type, found {[t.dtype for t in inputs]} and "
                                           f"output_type '{attrs['output_type']}'")
        if step == 0:
            raise refuse(self.type, attrs, "step is 0")
        count = max(int(math.ceil((float(stop) - float(start)) / float(step))), 0)
        if count == 0:
            raise refuse(self.type, attrs, f"Range({start}, {stop}, {step}) is empty; empty "
                                           f"tensors are not supported")
        return count

    def infer_shapes(self, attrs, inputs, consts):
        return [((self._count(attrs, inputs, consts),), inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        count = self._count(attrs, inputs, consts)
        src = program("range", "index_make.cl", data=inputs[0].cl_type)
        return [launch(src, "range", (Arg.input(0), Arg.input(2), Arg.output(0), scalar(count)),
                       count, "range")]


@register_op
class Eye(Op):
    """num_rows, num_columns, diagonal_index (and batch_shape), all constant: ones where
    column - row == diagonal_index, of output_type."""
    input_count = (3, 4)
    type = "Eye"
    const_inputs = (0, 1, 2, 3)
    attributes = (Attr("output_type", "str", "f32"),)

    def _geometry(self, attrs, consts, count: int):
        rows, cols, k = (int(const_scalar(self.type, attrs, consts, j, what))
                         for j, what in enumerate(("num_rows", "num_columns", "diagonal_index")))
        batch = tuple(int(v) for v in np.asarray(consts[3]).reshape(-1)) if count > 3 else ()
        if rows < 1 or cols < 1 or any(b < 1 for b in batch):
            raise refuse(self.type, attrs, f"an eye of {list(batch) + [rows, cols]} is empty")
        return batch + (rows, cols), k

    def infer_shapes(self, attrs, inputs, consts):
        shape, _ = self._geometry(attrs, consts, len(inputs))
        try:
            return [(shape, normalize_dtype(attrs["output_type"]))]
        except TensorError as e:
            raise refuse(self.type, attrs, f"output_type: {e}") from None

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        shape, k = self._geometry(attrs, consts, len(inputs))
        count = numel(shape)
        src = program("eye", "index_make.cl", data=outputs[0].cl_type)
        return [launch(src, "eye", (Arg.output(0), scalar(count), scalar(shape[-2]),
                                    scalar(shape[-1]), scalar(k)), count, "eye")]


@register_op
class Trilu(Op):
    """The upper (upper=true) or lower triangle of the last two axes from diagonal k, the
    rest 0; k (input 1, i64, one element) is data."""
    input_count = (2, 2)
    type = "Trilu"
    attributes = (Attr("upper", "bool", True),)

    def infer_shapes(self, attrs, inputs, consts):
        shape = shape_of(inputs[0])
        if len(shape) < 2 or inputs[1].dtype != "i64" or numel(inputs[1].shape) != 1:
            raise refuse(self.type, attrs, f"expected an input of rank 2 or more and k an i64 "
                                           f"of one element; found {list(shape)} and "
                                           f"{inputs[1].dtype} {list(inputs[1].shape)}")
        return [(shape, inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        shape = shape_of(inputs[0])
        count = numel(shape)
        src = program("trilu", "index_make.cl", data=inputs[0].cl_type)
        return [launch(src, "trilu", (Arg.input(0), Arg.input(1), Arg.output(0), scalar(count),
                                      scalar(shape[-2]), scalar(shape[-1]),
                                      scalar(attrs["upper"])), count, "trilu")]


@register_op
class ReverseSequence(Op):
    """The first seq_lengths[b] elements along seq_axis of each batch b (on batch_axis)
    reversed, the rest kept."""
    input_count = (2, 2)
    type = "ReverseSequence"
    attributes = (Attr("batch_axis", "int", 0), Attr("seq_axis", "int", 1))

    def _axes(self, attrs, inputs):
        shape = shape_of(inputs[0])
        check_index_type(self.type, attrs, inputs[1], "seq_lengths")
        b = axis_of(self.type, attrs, attrs["batch_axis"], len(shape))
        t = axis_of(self.type, attrs, attrs["seq_axis"], len(shape))
        if b == t or shape_of(inputs[1]) != (shape[b],):
            raise refuse(self.type, attrs, f"batch_axis {b} and seq_axis {t} must differ and "
                                           f"seq_lengths have shape [{shape[b]}]; found "
                                           f"{list(shape_of(inputs[1]))}")
        return shape, b, t

    def infer_shapes(self, attrs, inputs, consts):
        self._axes(attrs, inputs)
        return [(shape_of(inputs[0]), inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        shape, b, t = self._axes(attrs, inputs)
        count = numel(shape)
        src = program("reverse_sequence", "index_make.cl", data=inputs[0].cl_type,
                      idx=inputs[1].cl_type)
        return [launch(src, "reverse_sequence",
                       (Arg.input(0), Arg.input(1), Arg.output(0), scalar(count),
                        scalar(numel(shape[b + 1:])), scalar(shape[b]),
                        scalar(numel(shape[t + 1:])), scalar(shape[t])), count,
                       "reverse_sequence")]
