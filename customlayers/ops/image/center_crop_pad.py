"""CenterCropPad: ONNX CenterCropPad (opset 18) as the tensor room's Pad (constant mode, zero
fill) with pads worked out from the target shape: negative pads crop. The target shape (input 1)
is a compile-time value (a constant, or a graph input given per run); `axes` (an attribute)
names the axes it sets."""
from __future__ import annotations

import numpy as np

from ...errors import BindingError
from ...jit.launch import DEFAULT_CONTEXT
from .._program import shape_of
from ..base import Attr, Op, get_op, register_op


@register_op
class CenterCropPad(Op):
    type = "CenterCropPad"
    input_count = (2, 2)
    const_inputs = (1,)
    attributes = (Attr("axes", "ints", None),)

    @staticmethod
    def pads(attrs, shape, consts) -> tuple[list[int], list[int]]:
        if 1 not in consts:
            raise BindingError("CenterCropPad: the shape (input 1) must be a constant or a "
                               "graph input given per run")
        target = [int(v) for v in np.asarray(consts[1]).reshape(-1)]
        rank = len(shape)
        axes = attrs["axes"]
        axes = list(range(rank)) if axes is None else [a + rank if a < 0 else a for a in axes]
        if len(target) != len(axes) or any(not 0 <= a < rank for a in axes) or \
                len(set(axes)) != len(axes) or min(target, default=1) < 1:
            raise BindingError(f"CenterCropPad: shape {target} must hold one positive size per "
                               f"axis of {axes} (distinct axes of the rank-{rank} input)")
        begin, end = [0] * rank, [0] * rank
        for a, size in zip(axes, target):
            grow = size - shape[a]
            # crop: the start is (dim - size) // 2; pad: (size - dim) // 2 in front
            begin[a] = grow // 2 if grow >= 0 else -((-grow) // 2)
            end[a] = grow - begin[a]
        return begin, end

    def infer_shapes(self, attrs, inputs, consts):
        shape = shape_of(inputs[0])
        begin, end = self.pads(attrs, shape, consts)
        return [(tuple(d + b + e for d, b, e in zip(shape, begin, end)), inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        begin, end = self.pads(attrs, shape_of(inputs[0]), consts)
        pads = {1: np.array(begin, np.int64), 2: np.array(end, np.int64)}
        return get_op("Pad").launches({"pad_mode": "constant"}, inputs[:1], outputs, pads, ctx)
