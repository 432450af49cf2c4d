"""RoiAlign: ONNX RoiAlign (opset 10, 16, 22) on roi_align.cl (one program per element type
and mode; dims, sampling_ratio and spatial_scale are kernel arguments).

Data N,C,H,W, rois R,4 (x1, y1, x2, y2) and batch_indices R give R,C,output_height,
output_width. A batch index outside 0..N-1 gives NaN for that ROI (it is data, known only
when the network runs).
"""
from __future__ import annotations

import numpy as np

from ...errors import BindingError
from ...jit.launch import Arg, DEFAULT_CONTEXT, KernelLaunch
from .._program import global_1d, numel, program_text, shape_of
from ..base import Attr, Op, register_op


@register_op
class RoiAlign(Op):
    type = "RoiAlign"
    input_count = (3, 3)
    attributes = (Attr("mode", "str", "avg"), Attr("output_height", "int", 1),
                  Attr("output_width", "int", 1), Attr("sampling_ratio", "int", 0),
                  Attr("spatial_scale", "float", 1.0), Attr("half_pixel", "int", 1))

    def parse_attributes(self, raw, layer):
        attrs = super().parse_attributes(raw, layer)
        if attrs["mode"] not in ("avg", "max"):
            raise BindingError(f"layer '{layer}' (RoiAlign): mode='{attrs['mode']}' is not one "
                               f"of avg, max")
        if attrs["output_height"] < 1 or attrs["output_width"] < 1 or \
                attrs["sampling_ratio"] < 0:
            raise BindingError(f"layer '{layer}' (RoiAlign): output_height "
                               f"{attrs['output_height']} and output_width "
                               f"{attrs['output_width']} must be positive, sampling_ratio "
                               f"{attrs['sampling_ratio']} not negative")
        return attrs

    def infer_shapes(self, attrs, inputs, consts):
        x, rois, idx = (shape_of(t) for t in inputs)
        if len(x) != 4 or len(rois) != 2 or rois[1] != 4 or tuple(idx) != (rois[0],):
            raise BindingError(f"RoiAlign: expected data N,C,H,W, rois R,4 and batch_indices R; "
                               f"found {list(x)}, {list(rois)} and {list(idx)}")
        if inputs[0].dtype not in ("f32", "f16") or inputs[1].dtype != inputs[0].dtype or \
                inputs[2].dtype not in ("i64", "i32"):
            raise BindingError(f"RoiAlign: expected f32 or f16 data and rois and i64 batch "
                               f"indices; found {', '.join(t.dtype for t in inputs)}")
        return [((rois[0], x[1], attrs["output_height"], attrs["output_width"]),
                 inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        n, c, h, w = shape_of(inputs[0])
        values = {"T": inputs[0].cl_type, "I": inputs[2].cl_type,
                  "MAX_MODE": int(attrs["mode"] == "max")}
        count = numel(outputs[0].shape)
        source = program_text(f"roi_align_{attrs['mode']}", values, "roi_align.cl")
        ints = [np.int32(v) for v in (n, c, h, w, attrs["output_height"],
                                      attrs["output_width"], attrs["sampling_ratio"])]
        args = (Arg.input(0), Arg.input(1), Arg.input(2), Arg.output(0),
                *(Arg.scalar(v) for v in ints), Arg.scalar(np.float32(attrs["spatial_scale"])),
                Arg.scalar(np.int32(attrs["half_pixel"])), Arg.scalar(np.uint32(count)))
        return [KernelLaunch(source, "roi_align", args, global_1d(count),
                             label=f"roi_align_{attrs['mode']}")]
