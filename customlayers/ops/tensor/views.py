"""Ops that only rename a dense tensor's shape: Reshape, Squeeze, Unsqueeze, Flatten.

`is_view = True`: no kernel runs; the executor gives output 0 input 0's buffer. What they must
get right is the shape, read from the constant inputs, and a clear error when it is impossible.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ...errors import BindingError
from ...jit.launch import DEFAULT_CONTEXT
from ...jit.tensor import TensorDesc
from .._program import numel, shape_of
from ..base import Attr, Op, register_op


def const_values(op_type: str, consts, index: int, what: str) -> list[int]:
    if index not in consts:
        raise BindingError(f"{op_type}: the {what} (input {index}) must be a constant")
    return [int(v) for v in np.asarray(consts[index]).reshape(-1)]


class ViewOp(Op):
    is_view = True

    def out_shape(self, attrs, shape: tuple[int, ...], consts) -> tuple[int, ...]:
        raise NotImplementedError

    def infer_shapes(self, attrs, inputs: Sequence[TensorDesc], consts):
        return [(self.out_shape(attrs, shape_of(inputs[0]), consts), inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        return []


@register_op
class Reshape(ViewOp):
    """opset1: target from input 1; with special_zero a 0 copies the input's dim at that index
    (without it a 0 is a dim of 0, ONNX's allowzero);
    one -1 takes what is left."""
    input_count = (2, 2)
    type = "Reshape"
    attributes = (Attr("special_zero", "bool", False),)
    const_inputs = (1,)

    def out_shape(self, attrs, shape, consts):
        target = const_values("Reshape", consts, 1, "target shape")
        dims: list[int] = []
        for k, d in enumerate(target):
            if d == 0 and attrs.get("special_zero"):
                if k >= len(shape):
                    raise BindingError(f"Reshape: target {target} copies dim {k} (special_zero) "
                                       f"but the input {list(shape)} has rank {len(shape)}")
                d = shape[k]
            elif d < -1:          # a 0 without special_zero is a dim of 0 (ONNX allowzero)
                raise BindingError(f"Reshape: target {target} has dim {d} at index {k}; "
                                   f"expected a size or -1")
            dims.append(d)
        if dims.count(-1) > 1:
            raise BindingError(f"Reshape: target {target} has more than one -1")
        known = numel(d for d in dims if d != -1)
        total = numel(shape)
        if -1 in dims:
            if known == 0:
                dims[dims.index(-1)] = _empty_rest(target, shape, attrs)
                return tuple(dims)
            if total % known:
                raise BindingError(f"Reshape: cannot reshape {list(shape)} ({total} elements) to "
                                   f"{target}: {total} is not divisible by {known}")
            dims[dims.index(-1)] = total // known
        elif known != total:
            raise BindingError(f"Reshape: cannot reshape {list(shape)} ({total} elements) to "
                               f"{target} ({known} elements)")
        return tuple(dims)


def _empty_rest(target, shape, attrs) -> int:
    """The -1 of a target whose other dims hold a 0 (an input with no element): what the input
    dims not copied by special_zero leave for it (Flatten's [0, -1] of a batch of 0: the product
    of the other axes), as total // known gives it for an input with elements."""
    copied = {k for k, d in enumerate(target) if d == 0} if attrs.get("special_zero") else set()
    rest = numel(d for k, d in enumerate(shape) if k not in copied)
    others = numel(d for k, d in enumerate(target) if k not in copied and d != -1)
    if others == 0 or rest % others:
        raise BindingError(f"Reshape: target {target} has a -1 and a dim of 0: the -1 cannot "
                           f"be inferred for the input {list(shape)}")
    return rest // others


@register_op
class Squeeze(ViewOp):
    """opset1: removes the axes of input 1 (each must have size 1), or with no input 1 (or an
    empty one, as ONNX Runtime has it) every size-1 axis. Input 1 is read at compile time: a
    graph input there is a value input; one computed at run time is refused, never taken for
    "no axes"."""
    input_count = (1, 2)
    type = "Squeeze"
    const_inputs = (1,)

    def infer_shapes(self, attrs, inputs: Sequence[TensorDesc], consts):
        if len(inputs) > 1 and 1 not in consts:
            raise BindingError("Squeeze: the axes (input 1) must be a constant or a graph input "
                               "(compiled in by value); this one is computed at run time")
        return super().infer_shapes(attrs, inputs, consts)

    def out_shape(self, attrs, shape, consts):
        axes_in = const_values("Squeeze", consts, 1, "axes") if 1 in consts else []
        if not axes_in:
            return tuple(d for d in shape if d != 1)
        rank = len(shape)
        axes = set()
        for a in axes_in:
            if not -rank <= a < rank:
                raise BindingError(f"Squeeze: axis {a} is out of range for shape {list(shape)}")
            a = a + rank if a < 0 else a
            if shape[a] != 1:
                raise BindingError(f"Squeeze: axis {a} of shape {list(shape)} has size "
                                   f"{shape[a]}; only size-1 axes can be removed")
            axes.add(a)
        return tuple(d for k, d in enumerate(shape) if k not in axes)


@register_op
class Unsqueeze(ViewOp):
    """opset1: inserts size-1 axes at the positions of input 1 (in the output's numbering)."""
    input_count = (2, 2)
    type = "Unsqueeze"
    const_inputs = (1,)

    def out_shape(self, attrs, shape, consts):
        axes_in = const_values("Unsqueeze", consts, 1, "axes")
        rank = len(shape) + len(axes_in)
        axes = set()
        for a in axes_in:
            if not -rank <= a < rank:
                raise BindingError(f"Unsqueeze: axis {a} is out of range for the output rank "
                                   f"{rank}")
            a = a + rank if a < 0 else a
            if a in axes:
                raise BindingError(f"Unsqueeze: axis {a} is given twice in {axes_in}")
            axes.add(a)
        rest = iter(shape)
        return tuple(1 if k in axes else next(rest) for k in range(rank))


@register_op
class Flatten(ViewOp):
    """ONNX Flatten: [prod(dims before axis), prod(dims from axis)]."""
    input_count = (1, 1)
    type = "Flatten"
    attributes = (Attr("axis", "int", 1),)

    def out_shape(self, attrs, shape, consts):
        rank, axis = len(shape), attrs.get("axis", 1)
        if not -rank <= axis <= rank:
            raise BindingError(f"Flatten: axis {axis} is out of range for rank {rank} "
                               f"(expected {-rank}..{rank})")
        axis = axis + rank if axis < 0 else axis
        return (numel(shape[:axis]), numel(shape[axis:]))
