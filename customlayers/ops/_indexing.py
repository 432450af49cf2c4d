"""numpy basic indexing (slices, ints, None, Ellipsis) as a linear view: Slice and StridedSlice
(ops/tensor/misc.py) read their input through it on the map kernel."""
from __future__ import annotations

from typing import Sequence

from ..errors import BindingError
from ._program import LinearView


def apply_index(view: LinearView, items: Sequence[object], op_type: str) -> LinearView:
    """numpy basic indexing on a view: `items` holds slice objects, ints, None (new axis) and
    at most one Ellipsis; dims not covered are kept whole. BindingError for an index out of
    range; a slice that selects nothing gives a view with a 0 dim (a zero-size tensor)."""
    consuming = sum(1 for it in items if it is not None and it is not Ellipsis)
    if consuming > len(view.shape):
        raise BindingError(f"{op_type}: {consuming} axes are indexed, the input has rank "
                           f"{len(view.shape)}")
    if Ellipsis not in items:
        items = list(items) + [Ellipsis]
    shape, strides, offset = [], [], view.offset
    axis = 0
    for it in items:
        if it is Ellipsis:
            keep = len(view.shape) - consuming
            for _ in range(keep):
                shape.append(view.shape[axis])
                strides.append(view.strides[axis])
                axis += 1
            consuming = len(view.shape)  # a second Ellipsis keeps nothing
        elif it is None:
            shape.append(1)
            strides.append(0)
        elif isinstance(it, slice):
            if it.step == 0:
                raise BindingError(f"{op_type}: step 0 on axis {axis}")
            start, stop, step = it.indices(view.shape[axis])
            length = len(range(start, stop, step))   # 0: an empty view, which runs nothing
            offset += start * view.strides[axis]
            shape.append(length)
            strides.append(step * view.strides[axis])
            axis += 1
        else:
            dim, index = view.shape[axis], int(it)
            if not -dim <= index < dim:
                raise BindingError(f"{op_type}: index {index} is out of range for axis {axis} "
                                   f"of size {dim}")
            offset += (index + dim if index < 0 else index) * view.strides[axis]
            axis += 1
    return LinearView(tuple(shape), tuple(strides), offset)
