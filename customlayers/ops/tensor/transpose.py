"""Transpose (opset1): output axis k is input axis order[k]; `order` is the constant input 1
(empty: reverse the axes). A linear view of the input, run on unary_map.cl."""
from __future__ import annotations

import numpy as np

from ...errors import BindingError
from ...jit.launch import DEFAULT_CONTEXT, KernelLaunch
from .._program import items_per_work_item, LinearView, shape_of, unary_map_launch
from ..base import Op, register_op


def transpose_order(consts, rank: int) -> tuple[int, ...]:
    if 1 not in consts:
        raise BindingError("Transpose: the order (input 1) must be a constant")
    order = tuple(int(v) for v in np.asarray(consts[1]).reshape(-1))
    if not order:
        return tuple(range(rank - 1, -1, -1))
    if sorted(order) != list(range(rank)):
        raise BindingError(f"Transpose: order {list(order)} is not a permutation of the "
                           f"{rank} axes 0..{rank - 1}")
    return order


@register_op
class Transpose(Op):
    input_count = (2, 2)
    type = "Transpose"
    reads_half = True        # map kernels: half read and written as float (_half_io.py)
    const_inputs = (1,)

    def infer_shapes(self, attrs, inputs, consts):
        shape = shape_of(inputs[0])
        order = transpose_order(consts, len(shape))
        return [(tuple(shape[a] for a in order), inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT) -> list[KernelLaunch]:
        shape = shape_of(inputs[0])
        view = LinearView.dense(shape).transpose(transpose_order(consts, len(shape)))
        return [unary_map_launch("transpose", inputs[0], outputs[0],
                                 src_view=view,
                                 per_item=items_per_work_item(ctx))]
