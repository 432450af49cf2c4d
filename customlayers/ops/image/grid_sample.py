"""GridSample: ONNX GridSample (opset 16, 20, 22) over 1 to 3 spatial axes, on grid_sample.cl
(one program per element type, mode and padding mode; the dims are kernel arguments).

Data N,C,D1..Dk and grid N,O1..Ok,k (normalized coordinates, x first) give N,C,O1..Ok.
AffineGrid (opset 20) makes such grids from affine maps, on affine_grid.cl.
"""
from __future__ import annotations

import numpy as np

from ...errors import BindingError
from ...jit.launch import Arg, DEFAULT_CONTEXT, KernelLaunch
from .._program import global_1d, numel, program_text, shape_of
from ..base import Attr, Op, register_op

TAPS = {"nearest": 1, "linear": 2, "cubic": 4}
PADDINGS = ("zeros", "border", "reflection")


@register_op
class GridSample(Op):
    type = "GridSample"
    input_count = (2, 2)
    attributes = (Attr("mode", "str", "linear"), Attr("padding_mode", "str", "zeros"),
                  Attr("align_corners", "int", 0))

    def parse_attributes(self, raw, layer):
        attrs = super().parse_attributes(raw, layer)
        for key, allowed in (("mode", tuple(TAPS)), ("padding_mode", PADDINGS)):
            if attrs[key] not in allowed:
                raise BindingError(f"layer '{layer}' (GridSample): {key}='{attrs[key]}' is not "
                                   f"one of {', '.join(allowed)}")
        return attrs

    def infer_shapes(self, attrs, inputs, consts):
        x, grid = shape_of(inputs[0]), shape_of(inputs[1])
        k = len(x) - 2
        if not 1 <= k <= 3 or len(grid) != k + 2 or grid[0] != x[0] or grid[-1] != k:
            raise BindingError(f"GridSample: expected data N,C and 1 to 3 spatial dims and a "
                               f"grid N,O1..Ok,k of the same N; found {list(x)} and {list(grid)}")
        if inputs[0].dtype not in ("f32", "f16") or inputs[1].dtype != inputs[0].dtype:
            raise BindingError(f"GridSample: data and grid must both be f32 or f16 (it computes "
                               f"in float); found "
                               f"{inputs[0].dtype} and {inputs[1].dtype}")
        return [((x[0], x[1], *grid[1:-1]), inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        x, y = inputs[0], outputs[0]
        spatial_in, spatial_out = shape_of(x)[2:], shape_of(y)[2:]
        dims = np.array([len(spatial_in), *spatial_in, *spatial_out], np.int32)
        values = {"T": x.cl_type, "TAPS": TAPS[attrs["mode"]],
                  "PADDING": PADDINGS.index(attrs["padding_mode"])}
        count = numel(y.shape)
        source = program_text(f"grid_sample_{attrs['mode']}_{attrs['padding_mode']}", values,
                              "grid_sample.cl")
        args = (Arg.input(0), Arg.input(1), Arg.output(0), Arg.const(dims),
                Arg.scalar(np.int32(shape_of(x)[1])), Arg.scalar(np.int32(attrs["align_corners"])),
                Arg.scalar(np.uint32(count)))
        return [KernelLaunch(source, "grid_sample", args, global_1d(count),
                             label=f"grid_sample_{attrs['mode']}")]


def _normalized_coordinates(n: int, align_corners: bool) -> np.ndarray:
    """The normalized coordinates of the n points of an axis (onnx's reference,
    construct_original_grid: the ends at -1 and 1 with align_corners, else pixel centres)."""
    if align_corners:
        return np.linspace(-1.0, 1.0, n) if n > 1 else np.array([-1.0])
    return -1.0 + (2.0 * np.arange(n) + 1.0) / n


@register_op
class AffineGrid(Op):
    """ONNX AffineGrid (opset 20): theta N,2,3 (N,3,4) and size (N,C,H,W) ((N,C,D,H,W), a
    compile-time value) give the grid N,H,W,2 (N,D,H,W,3) on affine_grid.cl."""
    type = "AffineGrid"
    input_count = (2, 2)
    const_inputs = (1,)
    attributes = (Attr("align_corners", "int", 0),)

    def _spatial(self, inputs, consts) -> tuple[int, ...]:
        theta = shape_of(inputs[0])
        if 1 not in consts:
            raise BindingError("AffineGrid: the size (input 1) must be a constant or a graph "
                               "input given per run")
        size = [int(v) for v in np.asarray(consts[1]).reshape(-1)]
        s = len(size) - 2
        if s not in (2, 3) or theta != (size[0], s, s + 1) or min(size) < 1:
            raise BindingError(f"AffineGrid: expected theta N,2,3 with size N,C,H,W or theta "
                               f"N,3,4 with size N,C,D,H,W (positive); found theta {list(theta)} "
                               f"and size {size}")
        if inputs[0].dtype not in ("f32", "f16"):
            raise BindingError(f"AffineGrid: theta has element type {inputs[0].dtype}; "
                               f"supported: f32, f16")
        return tuple(size[2:])

    def infer_shapes(self, attrs, inputs, consts):
        spatial = self._spatial(inputs, consts)
        return [((shape_of(inputs[0])[0], *spatial, len(spatial)), inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        spatial = self._spatial(inputs, consts)
        base = np.concatenate([_normalized_coordinates(d, bool(attrs["align_corners"]))
                               for d in spatial]).astype(np.float32)
        count = numel(outputs[0].shape)
        source = program_text("affine_grid", {"T": inputs[0].cl_type}, "affine_grid.cl")
        args = (Arg.input(0), Arg.output(0), Arg.const(base),
                Arg.const(np.array([len(spatial), *spatial], np.int32)),
                Arg.scalar(np.uint32(count)))
        return [KernelLaunch(source, "affine_grid", args, global_1d(count), label="affine_grid")]
