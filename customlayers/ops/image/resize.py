"""Resize: ONNX Resize (opset 10 to 19) and Upsample (7, 9), every mode, on one kernel.

The IR op takes the ONNX attributes as they are, and after the data the inputs that
`operands` names ("roi", "scales", "sizes", in that order; the ONNX translation drops the
absent ones). They are compile-time values (a constant, or a graph input compiled in per
value): the output shape depends on them. The host works out, per axis, the taps of each
output coordinate (_resize_tables.py); the kernel, resample.cl, one program per element type,
gets the tables and dims as arguments and sums the taps. Integer data (image bytes, masks,
indices) takes mode nearest, a copy in its own type.
"""
from __future__ import annotations

import numpy as np

from ...dtypes import is_float
from ...errors import BindingError
from ...jit.launch import Arg, DEFAULT_CONTEXT, KernelLaunch
from ...jit.tensor import TensorDesc
from .._program import global_1d, dense_strides, numel, program_text, shape_of
from ..base import Attr, Op, register_op
from ._resize_tables import (COORDINATE_MODES, MODES, NEAREST_MODES, POLICIES, AxisTable,
                             ResizeForm, axis_table, output_plan)

OPERANDS = ("roi", "scales", "sizes")
MAX_RANK = 8           # resample.cl's MAX_RANK
# taps of all axes together, per output element: the antialiased downsampling by 1/64 of a
# 2-D image in cubic mode needs 256 x 256; past this the op is not a resize any more
MAX_TAPS = 1 << 16


@register_op
class Resize(Op):
    type = "Resize"
    input_count = (2, 4)
    const_inputs = (1, 2, 3)
    attributes = (Attr("mode", "str", "nearest"),
                  Attr("coordinate_transformation_mode", "str", "half_pixel"),
                  Attr("nearest_mode", "str", "round_prefer_floor"),
                  Attr("cubic_coeff_a", "float", -0.75), Attr("exclude_outside", "int", 0),
                  Attr("extrapolation_value", "float", 0.0), Attr("antialias", "int", 0),
                  Attr("keep_aspect_ratio_policy", "str", "stretch"),
                  Attr("axes", "ints", None), Attr("operands", "str", "scales"))

    def parse_attributes(self, raw, layer):
        attrs = super().parse_attributes(raw, layer)
        for key, allowed in (("mode", MODES), ("coordinate_transformation_mode",
                                                COORDINATE_MODES),
                             ("nearest_mode", NEAREST_MODES),
                             ("keep_aspect_ratio_policy", POLICIES)):
            if attrs[key] not in allowed:
                raise BindingError(f"layer '{layer}' (Resize): {key}='{attrs[key]}' is not one "
                                   f"of {', '.join(allowed)}")
        names = [n.strip() for n in attrs["operands"].split(",") if n.strip()]
        if any(n not in OPERANDS for n in names) or sorted(names, key=OPERANDS.index) != names \
                or len(set(names)) != len(names):
            raise BindingError(f"layer '{layer}' (Resize): operands='{attrs['operands']}' must "
                               f"name some of {', '.join(OPERANDS)}, in that order")
        attrs["operand_names"] = tuple(names)
        attrs["form"] = ResizeForm(attrs["mode"], attrs["coordinate_transformation_mode"],
                                   attrs["nearest_mode"], attrs["cubic_coeff_a"],
                                   bool(attrs["exclude_outside"]), bool(attrs["antialias"]),
                                   attrs["keep_aspect_ratio_policy"])
        return attrs

    def _plan(self, attrs, inputs, consts):
        x = inputs[0]
        if not is_float(x.dtype) and attrs["mode"] != "nearest":
            raise BindingError(f"Resize: mode {attrs['mode']} on element type {x.dtype} is not "
                               f"supported (integer data: mode nearest; linear and cubic: f32, "
                               f"f16, f64)")
        names = attrs["operand_names"]
        if len(inputs) != 1 + len(names):
            raise BindingError(f"Resize: expected {1 + len(names)} inputs (data, "
                               f"{', '.join(names)}), found {len(inputs)}")
        values = {}
        for k, n in enumerate(names, 1):
            if k not in consts:
                raise BindingError(f"Resize: the {n} (input {k}) must be a constant or a graph "
                                   f"input given per run")
            values[n] = np.asarray(consts[k])
        shape = shape_of(x)
        if not 1 <= len(shape) <= MAX_RANK:
            raise BindingError(f"Resize: the data has rank {len(shape)}; 1 to {MAX_RANK} "
                               f"are supported")
        axes = attrs["axes"]
        if axes is not None:
            axes = [a + len(shape) if a < 0 else a for a in axes]
            if any(not 0 <= a < len(shape) for a in axes) or len(set(axes)) != len(axes):
                raise BindingError(f"Resize: axes {list(attrs['axes'])} are not distinct axes "
                                   f"of the rank-{len(shape)} data")
        sizes = values.get("sizes")
        scales = values.get("scales")
        if sizes is not None and sizes.size == 0:
            sizes = None
        if scales is not None and scales.size == 0:
            scales = None
        if (sizes is None) == (scales is None):
            raise BindingError("Resize: exactly one of scales and sizes must be given (and not "
                               "empty)")
        return output_plan("Resize", shape, attrs["form"], scales, sizes, axes,
                           values.get("roi"))

    def infer_shapes(self, attrs, inputs, consts):
        out, _, _ = self._plan(attrs, inputs, consts)
        return [(out, inputs[0].dtype)]

    def tables(self, attrs, inputs, consts) -> list[AxisTable]:
        out, factors, roi = self._plan(attrs, inputs, consts)
        shape = shape_of(inputs[0])
        tables = [axis_table(attrs["form"], shape[a], out[a], factors[a],
                             None if roi is None else roi[a]) for a in range(len(shape))]
        if int(np.prod([t.index.shape[1] for t in tables])) > MAX_TAPS:
            raise BindingError(f"Resize: from {list(shape)} to {list(out)} in mode "
                               f"{attrs['mode']} needs more than {MAX_TAPS} taps per output "
                               f"element")
        return tables

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        """resample.cl, one work item per output row, over the tables of the axes (the
        neighbours that are copied whole merged into one)."""
        x, y = inputs[0], outputs[0]
        tables = self.tables(attrs, inputs, consts)
        # integers (mode nearest: one tap of weight 1) are copied in their own type, exactly
        acc = {"f64": "double", "f32": "float", "f16": "float"}.get(x.dtype, x.cl_type)
        meta, index, weight, offset = [], [], [], 0
        for t, stride in merge_identity_axes(tables, dense_strides(shape_of(x))):
            taps = t.index.copy()
            taps[t.outside, 0] = -1           # resample.cl: this coordinate extrapolates
            meta += [taps.shape[0], stride, taps.shape[1], offset]
            index.append(taps.reshape(-1))
            weight.append(t.weight.reshape(-1))
            offset += taps.size
        rows = numel(y.shape) // meta[-4]
        source = program_text(f"resize_{x.dtype}", {"T": x.cl_type, "ACC": acc}, "resample.cl")
        args = (Arg.input(0), Arg.output(0), Arg.const(np.array(meta, np.int32)),
                Arg.const(np.concatenate(index).astype(np.int32)),
                Arg.const(np.concatenate(weight).astype(
                    np.float32 if acc == "float" else TensorDesc((), x.dtype).np_dtype)),
                Arg.scalar(np.int32(len(meta) // 4)), Arg.scalar(np.uint32(rows)),
                Arg.scalar(np.float32(attrs["extrapolation_value"])))
        return [KernelLaunch(source, "resample", args, global_1d(rows),
                             label=f"resize_{attrs['mode']}")]


def merge_identity_axes(tables, strides):
    """(table, input stride) per axis, with neighbouring axes that are copied whole (one tap,
    output coordinate = input coordinate) merged into one: a dense input walks them as one."""
    merged: list = []
    for t, stride in zip(tables, strides):
        if merged and _is_identity(t) and _is_identity(merged[-1][0]):
            n = merged[-1][0].index.shape[0] * t.index.shape[0]
            merged[-1] = (AxisTable.identity(n), stride)
        else:
            merged.append((t, stride))
    return merged


def _is_identity(t: AxisTable) -> bool:
    return t.index.shape[1] == 1 and not t.outside.any() and \
        np.array_equal(t.index[:, 0], np.arange(t.index.shape[0])) and (t.weight == 1).all()
