"""ShuffleChannels (opset1): split `axis` into (group, C/group), swap the two, merge back.

As a view: input reshaped to [outer, group, C/group, inner], transposed to
[outer, C/group, group, inner], whose element order is the output's; run on unary_map.cl.
"""
from __future__ import annotations

from ...errors import BindingError
from ...jit.launch import DEFAULT_CONTEXT, KernelLaunch
from .._program import (items_per_work_item, LinearView, normalize_axis, numel,
                       shape_of, unary_map_launch)
from ..base import Attr, Op, register_op


@register_op
class ShuffleChannels(Op):
    input_count = (1, 1)
    type = "ShuffleChannels"
    reads_half = True        # map kernels: half read and written as float (_half_io.py)
    attributes = (Attr("axis", "int", 1), Attr("group", "int", 1))

    def parse_attributes(self, raw, layer):
        attrs = super().parse_attributes(raw, layer)
        if attrs["group"] < 1:
            raise BindingError(f"layer '{layer}' (ShuffleChannels): group={attrs['group']} must "
                               f"be at least 1")
        return attrs

    def _split(self, attrs, shape):
        axis = normalize_axis(attrs["axis"], len(shape), "ShuffleChannels")
        channels, group = shape[axis], attrs["group"]
        if channels % group:
            raise BindingError(f"ShuffleChannels: dim {channels} of axis {axis} is not divisible "
                               f"by group={group}")
        return numel(shape[:axis]), group, channels // group, numel(shape[axis + 1:])

    def infer_shapes(self, attrs, inputs, consts):
        shape = shape_of(inputs[0])
        self._split(attrs, shape)
        return [(shape, inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT) -> list[KernelLaunch]:
        split = self._split(attrs, shape_of(inputs[0]))
        view = LinearView.dense(split).transpose((0, 2, 1, 3))
        return [unary_map_launch("shuffle_channels", inputs[0], outputs[0],
                                 src_view=view,
                                 per_item=items_per_work_item(ctx))]
