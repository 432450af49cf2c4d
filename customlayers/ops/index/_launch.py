"""What the index ops share: their programs (one per op and element type: the shapes are kernel
arguments, never baked), the arguments that carry shapes (a small constant buffer of ints,
int scalars), and the checks of axes and index types that name the layer.

Out-of-range indices: every kernel here wraps a negative index once (ONNX) and then *clamps
the access*: a gather reads 0 and a scatter skips the update for an index still outside its
axis, so no index a model computes can make a kernel read or write outside a buffer.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ...errors import BindingError
from ...jit.launch import Arg, KernelLaunch
from .._program import global_1d, program_text

INDEX_TYPES = ("i32", "i64")


def layer_of(attrs) -> str:
    return str(getattr(attrs, "layer", "?"))


def refuse(op_type: str, attrs, why: str) -> BindingError:
    return BindingError(f"layer '{layer_of(attrs)}' ({op_type}): {why}")


# the kernels index with int: a size, stride or count past it is refused, not wrapped
INT_MAX = 2**31 - 1


def _int32(value: int) -> int:
    if not -INT_MAX <= int(value) <= INT_MAX:
        raise BindingError(f"a size, stride or index of {int(value)} is past what the index "
                           f"kernels address (int32: at most {INT_MAX})")
    return int(value)


def ints(values: Sequence[int]) -> Arg:
    """A small constant buffer of ints (dims, strides): the kernel's `meta`."""
    return Arg.const(np.array([_int32(v) for v in values] or [0], np.int32))


def scalar(value: int) -> Arg:
    return Arg.scalar(np.int32(_int32(value)))


def program(label: str, cl_file: str, **types: str) -> str:
    """The program of `cl_file` for these element types (NAME_TYPE defines, OpenCL C types
    from the dtype table through TensorDesc.cl_type)."""
    return program_text(label, {f"{k.upper()}_TYPE": v for k, v in types.items()}, cl_file)


def launch(source: str, entry: str, args: Sequence[Arg], count: int, label: str) -> KernelLaunch:
    """One work-item per element of `count` (padded; the kernels guard the tail)."""
    return KernelLaunch(source, entry, tuple(args), global_1d(count), label=label)


def axis_of(op_type: str, attrs, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise refuse(op_type, attrs, f"axis {axis} is out of range for rank {rank} "
                                     f"(expected {-rank}..{rank - 1})")
    return axis + rank if axis < 0 else axis


def check_index_type(op_type: str, attrs, desc, what: str = "indices") -> None:
    if desc.dtype not in INDEX_TYPES:
        raise refuse(op_type, attrs, f"the {what} must be i32 or i64, found {desc.dtype}")


def const_scalar(op_type: str, attrs, consts, index: int, what: str):
    """The one value of constant input `index` (a numpy scalar)."""
    if index not in consts:
        raise refuse(op_type, attrs, f"the {what} (input {index}) must be a constant")
    value = np.asarray(consts[index]).reshape(-1)
    if value.size != 1:
        raise refuse(op_type, attrs, f"the {what} (input {index}) must be one value, found "
                                     f"{value.size}")
    return value[0]


def dense_strides(shape: Sequence[int]) -> list[int]:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= int(d)
    return list(reversed(strides))
