"""Concat (opset1): inputs joined along `axis` (negative counts from the end).

One launch per input, each copying the input into its slice of the output (concat.cl): a
model's Concat has from 2 to a few dozen inputs, and separate launches keep the kernel free of
a per-element search for the input that owns an element. Sizes and offsets are kernel
arguments: one program per element type serves every input of every Concat.
"""
from __future__ import annotations

from typing import Sequence

from ...errors import BindingError
from ...jit.tensor import TensorDesc
from ...jit.launch import Arg, DEFAULT_CONTEXT, KernelLaunch
from .._half_io import moved_type
from .._program import (GROUP_MULTIPLE, global_1d, normalize_axis, numel, program_text,
                        shape_of, uint_arg)
from ..base import Attr, Op, register_op


def _copy_range(chunk: int, outer: int) -> tuple[int, int]:
    """concat.cl's NDRange: (position in the chunk, outer index). A chunk of 64 or more is
    padded to a multiple of 64 (the driver may then choose any work-group size); a shorter one
    is exact, so that a Concat of narrow rows (the last axis) idles no work items."""
    return (global_1d(chunk)[0] if chunk >= GROUP_MULTIPLE else chunk, outer)


@register_op
class Concat(Op):
    input_count = (1, None)
    type = "Concat"
    reads_half = True        # copies half as its bits (moved_type)
    attributes = (Attr("axis", "int", required=True),)
    skips_empty_inputs = True   # ONNX: an empty part adds nothing to the output

    def infer_shapes(self, attrs, inputs: Sequence[TensorDesc], consts):
        if not inputs:
            raise BindingError("Concat: expected at least one input, found none")
        first = shape_of(inputs[0])
        axis = normalize_axis(attrs["axis"], len(first), "Concat")
        total = 0
        for k, desc in enumerate(inputs):
            shape = shape_of(desc)
            if len(shape) != len(first) or any(a != b for j, (a, b) in
                                               enumerate(zip(shape, first)) if j != axis):
                raise BindingError(f"Concat: input {k} has shape {list(shape)}, which does not "
                                   f"match input 0's {list(first)} outside axis {axis}")
            if desc.dtype != inputs[0].dtype:
                raise BindingError(f"Concat: input {k} is {desc.dtype}, input 0 is "
                                   f"{inputs[0].dtype}; expected one element type")
            total += shape[axis]
        out = list(first)
        out[axis] = total
        return [(tuple(out), inputs[0].dtype)]

    def input_offsets(self, call, outputs):
        """Each input is one contiguous range of the output when every dim before the axis is
        1 (channels of a batch of one, or axis 0): then the inputs lie end to end, in order."""
        out_shape = shape_of(outputs[0])
        axis = normalize_axis(call.attrs["axis"], len(out_shape), "Concat")
        if numel(out_shape[:axis]) != 1:
            return None
        offsets, offset = [], 0
        for desc in call.inputs:
            offsets.append(offset)
            offset += desc.nbytes
        return offsets

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT) -> list[KernelLaunch]:
        out_shape = shape_of(outputs[0])
        axis = normalize_axis(attrs["axis"], len(out_shape), "Concat")
        inner = numel(out_shape[axis + 1:])
        launches, offset = [], 0
        for k, desc in enumerate(inputs):
            size = shape_of(desc)[axis]
            types = {"IN_TYPE": moved_type(desc), "OUT_TYPE": moved_type(outputs[0])}
            chunk = size * inner
            sizes = (chunk, out_shape[axis] * inner, offset * inner)
            launches.append(KernelLaunch(program_text("concat", types, "concat.cl"),
                                         "concat_copy", (Arg.input(k), Arg.output(0)) +
                                         tuple(uint_arg(v) for v in sizes),
                                         _copy_range(chunk, numel(out_shape[:axis])),
                                         label=f"concat_input{k}"))
            offset += size
        return launches
