"""SpaceToDepth and DepthToSpace (opset1): block rearrangements between the spatial dims and
the channels. Each is a reshape to 6-D, a transpose and a reshape back, so it is one linear view
of the input on the shared unary_map kernel (no intermediate tensor)."""
from __future__ import annotations

from ...errors import BindingError
from ...jit.launch import DEFAULT_CONTEXT, KernelLaunch
from ..base import Attr, Op, register_op
from .._program import items_per_work_item, LinearView, shape_of, unary_map_launch

MODES = ("blocks_first", "depth_first")


def _dims(op: str, inputs) -> tuple[int, int, int, int]:
    """N, C, H, W of input 0, checked before they are unpacked (a rank-3 or rank-5 input was a
    ValueError of the unpacking)."""
    shape = shape_of(inputs[0])
    if len(shape) != 4:
        raise BindingError(f"{op}: only rank-4 (N,C,H,W) inputs are supported, found "
                           f"{list(shape)}")
    return shape


def _check(op: str, attrs, shape) -> tuple[int, str]:
    s, mode = attrs["block_size"], attrs["mode"]
    if s < 1:
        raise BindingError(f"{op}: block_size must be at least 1, found {s}")
    if mode not in MODES:
        raise BindingError(f"{op}: mode '{mode}' is not one of {', '.join(MODES)}")
    return s, mode


@register_op
class SpaceToDepth(Op):
    input_count = (1, 1)
    type = "SpaceToDepth"
    reads_half = True        # map kernels: half read and written as float (_half_io.py)
    attributes = (Attr("block_size", "int", 1), Attr("mode", "str", "blocks_first"))

    def infer_shapes(self, attrs, inputs, consts):
        n, c, h, w = _dims(self.type, inputs)
        s, _ = _check(self.type, attrs, (n, c, h, w))
        if h % s or w % s:
            raise BindingError(f"SpaceToDepth: H={h} and W={w} must be multiples of block_size={s}")
        return [((n, c * s * s, h // s, w // s), inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT) -> list[KernelLaunch]:
        n, c, h, w = _dims(self.type, inputs)
        s, mode = _check(self.type, attrs, (n, c, h, w))
        six = LinearView.dense((n, c, h // s, s, w // s, s))
        order = (0, 3, 5, 1, 2, 4) if mode == "blocks_first" else (0, 1, 3, 5, 2, 4)
        view = six.transpose(order)
        return [unary_map_launch("space_to_depth", inputs[0], outputs[0],
                                 src_view=view,
                                 per_item=items_per_work_item(ctx))]


@register_op
class DepthToSpace(Op):
    input_count = (1, 1)
    type = "DepthToSpace"
    reads_half = True        # map kernels: half read and written as float (_half_io.py)
    attributes = (Attr("block_size", "int", 1), Attr("mode", "str", "blocks_first"))

    def infer_shapes(self, attrs, inputs, consts):
        n, c, h, w = _dims(self.type, inputs)
        s, _ = _check(self.type, attrs, (n, c, h, w))
        if c % (s * s):
            raise BindingError(f"DepthToSpace: C={c} must be a multiple of block_size²={s * s}")
        return [((n, c // (s * s), h * s, w * s), inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT) -> list[KernelLaunch]:
        n, c, h, w = _dims(self.type, inputs)
        s, mode = _check(self.type, attrs, (n, c, h, w))
        c2 = c // (s * s)
        if mode == "blocks_first":      # input viewed as (n, s, s, c2, h, w)
            six = LinearView.dense((n, s, s, c2, h, w))
            order = (0, 3, 4, 1, 5, 2)
        else:                           # input viewed as (n, c2, s, s, h, w)
            six = LinearView.dense((n, c2, s, s, h, w))
            order = (0, 1, 4, 2, 5, 3)
        view = six.transpose(order)
        return [unary_map_launch("depth_to_space", inputs[0], outputs[0],
                                 src_view=view,
                                 per_item=items_per_work_item(ctx))]
