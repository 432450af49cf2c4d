"""GridSample: ONNX GridSample (opset 16, 20, 22) over 1 to 3 spatial axes, on grid_sample.cl
(one program per element type, mode and padding mode; the dims are kernel arguments).

Data N,C,D1..Dk and grid N,O1..Ok,k (normalized coordinates, x first) give N,C,O1..Ok.
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
