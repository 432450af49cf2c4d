"""ONNX -> IR translations of the detection and segmentation ops: Resize (opset 10 to 19) and
Upsample (7, 9) onto the built-in Resize (ops/image/resize.py), GridSample, RoiAlign, AffineGrid,
Col2Im, CenterCropPad; and why NonMaxSuppression, whose output shape depends on the data, has
no translation.

Resize's roi, scales and sizes must be known when the network compiles: a constant, a value
the shape pass folds, or a graph input (the Network compiles a plan per value given,
runtime/compile/network.py).
"""
from __future__ import annotations

import numpy as np

from ..deferred import is_known
from ..translate import (float_text, ints_text, not_translated, optional_input,
                         text_attr, translates)

_COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                     "align_corners", "asymmetric", "tf_crop_and_resize", "tf_half_pixel_for_nn")
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _value_input(r, node, k: int, what: str) -> str | None:
    """Input k as the IR node's input, checked to be known at compile time; None if absent."""
    name = optional_input(node, k)
    if name is None:
        return None
    if not is_known(r, name) and not r.is_graph_input(name):
        r.refuse(f"the {what} (input {k}, '{name}') must be a constant or a graph input: the "
                 f"output shape depends on it, and this one is computed at run time")
    folded = r.folded(name)
    if folded is not None and folded.size == 0:
        return None                               # an empty tensor stands for "not given"
    return name


@translates("Resize", "Upsample")
def _resize(r, node, name: str, attrs: dict) -> None:
    opset = r.opset.get("ai.onnx", 19)
    mode = text_attr(r, attrs, "mode", "nearest", ("nearest", "linear", "cubic"))
    legacy = node.op_type == "Upsample" or opset < 11   # Upsample-9 semantics
    if legacy and mode == "cubic":
        r.refuse(f"mode 'cubic' is not part of {node.op_type} at opset {opset}")
    ir = {"mode": mode}
    operands: dict[str, str] = {}
    if legacy:
        ir["coordinate_transformation_mode"] = "asymmetric"
        ir["nearest_mode"] = "simple"
        if "scales" in attrs:                     # Upsample-7: an attribute
            operands["scales"] = r.const(f"{name}/scales",
                                         np.array(attrs["scales"], np.float32))
        else:
            scales = _value_input(r, node, 1, "scales")
            if scales is None:
                r.refuse("the scales (input 1) are missing")
            operands["scales"] = scales
    else:
        ctm = text_attr(r, attrs, "coordinate_transformation_mode", "half_pixel",
                        _COORDINATE_MODES)
        ir["coordinate_transformation_mode"] = ctm
        ir["nearest_mode"] = text_attr(r, attrs, "nearest_mode", "round_prefer_floor",
                                       _NEAREST_MODES)
        ir["cubic_coeff_a"] = float_text(attrs.get("cubic_coeff_a", -0.75))
        ir["exclude_outside"] = str(int(attrs.get("exclude_outside", 0)))
        ir["extrapolation_value"] = float_text(attrs.get("extrapolation_value", 0.0))
        antialias = int(attrs.get("antialias", 0))
        if antialias and mode == "nearest":
            r.refuse("antialias applies to modes linear and cubic, not nearest")
        ir["antialias"] = str(antialias)
        ir["keep_aspect_ratio_policy"] = text_attr(r, attrs, "keep_aspect_ratio_policy",
                                                   "stretch",
                                                   ("stretch", "not_larger", "not_smaller"))
        if "axes" in attrs:
            ir["axes"] = ints_text(attrs["axes"])
        roi = _value_input(r, node, 1, "roi")
        if roi is not None and ctm == "tf_crop_and_resize":   # the other modes ignore it
            operands["roi"] = roi
        for k, what in ((2, "scales"), (3, "sizes")):
            value = _value_input(r, node, k, what)
            if value is not None:
                operands[what] = value
        if ("scales" in operands) == ("sizes" in operands):
            r.refuse(f"exactly one of scales and sizes must be given; found "
                     f"{' and '.join(operands) or 'neither'}")
        if ir["keep_aspect_ratio_policy"] != "stretch" and "sizes" not in operands:
            r.refuse("keep_aspect_ratio_policy applies only to sizes")
    ir["operands"] = ",".join(operands)
    r.emit("Resize", [node.input[0], *operands.values()], [node.output[0]], name, ir)


@translates("GridSample")
def _grid_sample(r, node, name: str, attrs: dict) -> None:
    opset = r.opset.get("ai.onnx", 22)
    names = {"bilinear": "linear", "bicubic": "cubic", "nearest": "nearest"} if opset < 20 \
        else {"linear": "linear", "cubic": "cubic", "nearest": "nearest"}
    mode = text_attr(r, attrs, "mode", "bilinear" if opset < 20 else "linear", tuple(names))
    padding = text_attr(r, attrs, "padding_mode", "zeros", ("zeros", "border", "reflection"))
    r.emit("GridSample", [node.input[0], node.input[1]], [node.output[0]], name,
           {"mode": names[mode], "padding_mode": padding,
            "align_corners": str(int(attrs.get("align_corners", 0)))})


@translates("RoiAlign")
def _roi_align(r, node, name: str, attrs: dict) -> None:
    opset = r.opset.get("ai.onnx", 22)
    ctm = text_attr(r, attrs, "coordinate_transformation_mode",
                    "half_pixel" if opset >= 16 else "output_half_pixel",
                    ("half_pixel", "output_half_pixel"))
    r.emit("RoiAlign", list(node.input[:3]), [node.output[0]], name,
           {"mode": text_attr(r, attrs, "mode", "avg", ("avg", "max")),
            "output_height": str(int(attrs.get("output_height", 1))),
            "output_width": str(int(attrs.get("output_width", 1))),
            "sampling_ratio": str(int(attrs.get("sampling_ratio", 0))),
            "spatial_scale": float_text(attrs.get("spatial_scale", 1.0)),
            "half_pixel": str(int(ctm == "half_pixel"))})


# A kernel could write the selected indices to a buffer of the largest size with a count, but
# that is not the op's output: ONNX gives a [num_selected, 3] tensor, and plans are compiled for
# shapes known before a run, so no exact result can be given here. Left untranslated (a user's
# own NonMaxSuppression layer still binds to it), with the reason in the refusal.
not_translated("NonMaxSuppression",
               "the number of boxes it selects, its output's first dim, depends on the values of "
               "the boxes and scores, and the network is compiled for shapes known before it "
               "runs; end the network before NonMaxSuppression (output the boxes and scores) "
               "and select the boxes after it, on the host")


@translates("AffineGrid")
def _affine_grid(r, node, name: str, attrs: dict) -> None:
    size = _value_input(r, node, 1, "size")
    r.emit("AffineGrid", [node.input[0], size], [node.output[0]], name,
           {"align_corners": str(int(attrs.get("align_corners", 0)))})


@translates("Col2Im")
def _col2im(r, node, name: str, attrs: dict) -> None:
    image, block = _value_input(r, node, 1, "image_shape"), _value_input(r, node, 2, "block_shape")
    r.emit("Col2Im", [node.input[0], image, block], [node.output[0]], name,
           {k: ints_text(attrs[k]) for k in ("dilations", "pads", "strides") if k in attrs})


@translates("CenterCropPad")
def _center_crop_pad(r, node, name: str, attrs: dict) -> None:
    shape = _value_input(r, node, 1, "shape")
    r.emit("CenterCropPad", [node.input[0], shape], [node.output[0]], name,
           {"axes": ints_text(attrs["axes"])} if "axes" in attrs else {})
