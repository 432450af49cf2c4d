"""ONNX -> IR translations of the quantization ops: QuantizeLinear and DequantizeLinear (opsets
10-23; per-tensor, per-axis and blocked scales; the built-ins of ops/quant/linear.py),
DynamicQuantizeLinear (decomposed as ONNX defines it: min/max over the tensor, the scale, then
two QuantizeLinear), MatMulInteger and ConvInteger (ops/quant/integer.py; absent zero points
are given as a constant 0), and QLinearMatMul and QLinearConv as those exact int32 sums then
Requantize. The types ONNX allows that are not held here (float8, int4, uint4,
int2, float4, bfloat16 and half scales) are refused, naming the node and the type."""
from __future__ import annotations

import numpy as np

from .... import dtypes
from ..translate import (axis_in, dtype_of, optional_input, rank_of, reshaped, text_attr,
                         translates)

_QUANT = ("i8", "u8", "i16", "u16")
_DEQUANT = _QUANT + ("i32",)
_AUTO_PAD = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")


def _onnx_type(r, code: int, what: str) -> str:
    name = next((t.name for t in dtypes.TYPES if t.onnx == int(code)), None)
    if name is None:
        r.refuse(f"{what} is ONNX type {int(code)}, which is not held here (float8, int4, "
                 f"uint4, int2, float4 and bfloat16 are not supported)")
    return name


def _typed(r, value: str, allowed: tuple, what: str) -> str:
    """The element type of `value`, refused unless one of `allowed` (or unknown here)."""
    dtype = dtype_of(r, value)
    if dtype and dtype not in allowed:
        note = "float16 and bfloat16 are not supported here" if allowed == ("f32",) else \
            "float8, int4, uint4, int2 and float4 are not"
        r.refuse(f"{what} is {dtype}; supported: {', '.join(allowed)} ({note})")
    return dtype


def _linear_attrs(r, node, attrs: dict, x: str) -> dict:
    """axis (normalized where the rank is known) and block_size, checked against the scale."""
    block = int(attrs.get("block_size", 0))
    if block < 0:
        r.refuse(f"block_size {block} is negative")
    axis = int(attrs.get("axis", 1))
    scale_shape = r.known_shape(node.input[1])
    per_tensor = scale_shape is not None and len(scale_shape) <= 1 and \
        int(np.prod(scale_shape or (1,))) == 1 and block == 0
    if not per_tensor:
        axis = axis_in(r, axis, rank_of(r, x, node.op_type))
        _check_scale(r, r.known_shape(x), scale_shape, axis, block)
    zp = optional_input(node, 2)
    zp_shape = r.known_shape(zp) if zp else None
    if scale_shape is not None and zp_shape is not None and tuple(zp_shape) != tuple(scale_shape) \
            and not int(np.prod(zp_shape)) == int(np.prod(scale_shape)) == 1:
        r.refuse(f"the zero point's shape {list(zp_shape)} differs from the scale's "
                 f"{list(scale_shape)}")
    if int(attrs.get("precision", 0)) not in (0, 1):
        r.refuse(f"precision {attrs['precision']} is not supported (only float32)")
    return {"axis": str(axis), "block_size": str(block)}


def _check_scale(r, x_shape, scale_shape, axis: int, block: int) -> None:
    """Where both shapes are known at load: a per-axis scale is [D], a blocked one x's shape
    with the axis dim ceil(D / block_size)."""
    if x_shape is None or scale_shape is None or None in x_shape or None in scale_shape:
        return
    d = x_shape[axis]
    want = (d,) if block == 0 else \
        tuple(x_shape[:axis]) + (-(-d // block),) + tuple(x_shape[axis + 1:])
    if tuple(scale_shape) != want:
        form = "per-axis" if block == 0 else f"blocked (block_size {block})"
        r.refuse(f"a {form} scale along axis {axis} of x {list(x_shape)} must have shape "
                 f"{list(want)}, found {list(scale_shape)}")


@translates("QuantizeLinear")
def _quantize(r, node, name: str, attrs: dict) -> None:
    x, scale = node.input[0], node.input[1]
    _typed(r, x, ("f32",), "input 0 (x)")
    _typed(r, scale, ("f32",), "input 1 (y_scale)")
    zp = optional_input(node, 2)
    out = _typed(r, zp, _QUANT, "input 2 (y_zero_point)") if zp else ""
    if "output_dtype" in attrs and int(attrs["output_dtype"]) != 0:
        wanted = _onnx_type(r, attrs["output_dtype"], "output_dtype")
        if out and wanted != out:
            r.refuse(f"output_dtype {wanted} differs from the zero point's type {out}")
        out = wanted
    out = out or "u8"
    if out not in _QUANT:
        r.refuse(f"quantizing to {out} is not supported (supported: {', '.join(_QUANT)})")
    ir = _linear_attrs(r, node, attrs, x)
    ir["output_type"] = out
    r.emit("QuantizeLinear", [x, scale] + ([zp] if zp else []), [node.output[0]], name, ir)


@translates("DequantizeLinear")
def _dequantize(r, node, name: str, attrs: dict) -> None:
    x, scale = node.input[0], node.input[1]
    _typed(r, x, _DEQUANT, "input 0 (x)")
    _typed(r, scale, ("f32",), "input 1 (x_scale)")
    zp = optional_input(node, 2)
    if zp:
        _typed(r, zp, _DEQUANT, "input 2 (x_zero_point)")
    if "output_dtype" in attrs and int(attrs["output_dtype"]) not in (0, 1):
        r.refuse(f"output_dtype {_onnx_type(r, attrs['output_dtype'], 'output_dtype')} is not "
                 f"supported (only float32)")
    r.emit("DequantizeLinear", [x, scale] + ([zp] if zp else []), [node.output[0]], name,
           _linear_attrs(r, node, attrs, x))


@translates("DynamicQuantizeLinear")
def _dynamic_quantize(r, node, name: str, attrs: dict) -> None:
    """ONNX's definition: scale = (max(0, max x) - min(0, min x)) / 255, zero point =
    saturate(rint(-min / scale)), y = QuantizeLinear(x, scale, zp). Where max and min are
    equal (x all zeros) the scale is 1, as ONNX Runtime gives it (ONNX's reference says 1/255;
    y and the zero point are 0 either way)."""
    x = node.input[0]
    _typed(r, x, ("f32",), "input 0 (x)")
    rank = rank_of(r, x, "DynamicQuantizeLinear")
    axes = r.const(f"{name}/axes", np.arange(rank, dtype=np.int64))
    zero = r.const(f"{name}/zero", np.array(0, np.float32))
    numpy = {"auto_broadcast": "numpy"}
    ends = {}
    for reduce, clamp in (("ReduceMin", "Minimum"), ("ReduceMax", "Maximum")):
        raw, end = f"{name}/{reduce}", f"{name}/{clamp}"
        r.emit(reduce, [x, axes], [raw], raw, {"keep_dims": "false"}, shapes=[()])
        r.emit(clamp, [raw, zero], [end], end, numpy, shapes=[()])
        ends[clamp] = end
    span, same, step = f"{name}/span", f"{name}/same", f"{name}/step"
    r.emit("Subtract", [ends["Maximum"], ends["Minimum"]], [span], span, numpy, shapes=[()])
    r.emit("Divide", [span, r.const(f"{name}/levels", np.array(255, np.float32))], [step],
           step, numpy, shapes=[()])
    r.emit("Equal", [span, zero], [same], same, numpy, shapes=[()])
    scale, zp, low = node.output[1], node.output[2], f"{name}/negated_min"
    r.emit("Select", [same, r.const(f"{name}/one", np.array(1, np.float32)), step], [scale],
           f"{name}/scale", numpy, shapes=[()])
    r.emit("Subtract", [zero, ends["Minimum"]], [low], low, numpy, shapes=[()])
    per_tensor = {"axis": "0", "block_size": "0", "output_type": "u8"}
    r.emit("QuantizeLinear", [low, scale], [zp], f"{name}/zero_point", per_tensor, shapes=[()])
    r.emit("QuantizeLinear", [x, scale, zp], [node.output[0]], name, per_tensor)


def _zero_point(r, node, k: int, operand: int, name: str) -> str:
    """Input k (a zero point) of the operand's type, or a constant 0 of that type."""
    value = optional_input(node, k)
    dtype = _typed(r, node.input[operand], ("i8", "u8"), f"input {operand}")
    if value:
        _typed(r, value, ("i8", "u8"), f"input {k} (its zero point)")
        return value
    if not dtype:
        r.refuse(f"the type of input {operand} is unknown here, and its zero point is absent")
    return r.const(f"{name}/zero_point{k}", np.zeros((), dtypes.BY_NAME[dtype].np_dtype))


@translates("MatMulInteger")
def _matmul_integer(r, node, name: str, attrs: dict) -> None:
    inputs = [node.input[0], node.input[1], _zero_point(r, node, 2, 0, name),
              _zero_point(r, node, 3, 1, name)]
    r.emit("MatMulInteger", inputs, [node.output[0]], name, {})


def _conv_attrs(r, node, attrs: dict) -> dict:
    """The IR attributes of ConvInteger (QLinearConv's too): explicit pads, from auto_pad
    where the model asks (SAME_*: worked out from the known spatial dims, as ONNX's)."""
    x, w = node.input[0], node.input[1] if node.op_type == "ConvInteger" else node.input[3]
    k = rank_of(r, x, node.op_type) - 2
    if k not in (1, 2):
        r.refuse(f"a {k}-D {node.op_type} is not supported (1-D and 2-D are)")
    strides = list(attrs.get("strides") or [1] * k)
    dilations = list(attrs.get("dilations") or [1] * k)
    pads = list(attrs.get("pads") or [0] * (2 * k))
    auto_pad = text_attr(r, attrs, "auto_pad", "NOTSET", _AUTO_PAD)
    if len(strides) != k or len(dilations) != k or len(pads) != 2 * k:
        r.refuse(f"strides, dilations need {k} values and pads {2 * k}")
    begin, end = pads[:k], pads[k:]
    if auto_pad == "VALID":
        begin, end = [0] * k, [0] * k
    elif auto_pad != "NOTSET":
        xs, ws = r.known_shape(x), r.known_shape(w)
        if xs is None or ws is None or None in xs[2:] or None in ws[2:]:
            r.refuse(f"auto_pad={auto_pad} needs the spatial dims of x and w")
        total = [max((-(-i // s) - 1) * s + (kk - 1) * d + 1 - i, 0)
                 for i, kk, s, d in zip(xs[2:], ws[2:], strides, dilations)]
        begin = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in total]
        end = [t - b for t, b in zip(total, begin)]
    return {"strides": ", ".join(map(str, strides)), "dilations": ", ".join(map(str, dilations)),
            "pads_begin": ", ".join(map(str, begin)), "pads_end": ", ".join(map(str, end)),
            "group": str(int(attrs.get("group", 1)))}


@translates("ConvInteger")
def _conv_integer(r, node, name: str, attrs: dict) -> None:
    inputs = [node.input[0], node.input[1], _zero_point(r, node, 2, 0, name),
              _zero_point(r, node, 3, 1, name)]
    r.emit("ConvInteger", inputs, [node.output[0]], name, _conv_attrs(r, node, attrs))


def _multiplier(r, node, name: str, scales: tuple[int, int, int],
                per: int | None) -> tuple[str, bool]:
    """scale_a * scale_b / scale_y (f32, in that order, as ONNX Runtime): one value, or one
    per output channel/column where the second scale has `per` values (then 1-D); and whether
    it is per channel."""
    sa, sb, sy = (node.input[k] for k in scales)
    per_channel = False
    for k, value in zip(scales, (sa, sb, sy)):
        _typed(r, value, ("f32",), f"input {k} (a scale)")
        shape = r.known_shape(value)
        count = None if shape is None or None in shape else int(np.prod(shape, dtype=np.int64))
        if value != sb and count != 1:
            r.refuse(f"input {k} (a scale) must be one value known at load, found shape "
                     f"{None if shape is None else list(shape)}")
        if value == sb and count not in (1, per):
            r.refuse(f"input {k} (a scale) must be one value or {per}, found shape "
                     f"{None if shape is None else list(shape)}")
        if value == sb and count == per and per != 1:
            per_channel = True
            if len(shape) != 1:
                sb = reshaped(r, sb, [per], f"{name}/scale{k}")
    both, mult = f"{name}/scale_product", f"{name}/multiplier"
    r.emit("Multiply", [sa, sb], [both], both, {"auto_broadcast": "numpy"})
    r.emit("Divide", [both, sy], [mult], mult, {"auto_broadcast": "numpy"})
    return mult, per_channel


def _requantize(r, node, name: str, acc: str, multiplier: tuple[str, bool], zy_k: int,
                operand: int) -> None:
    zy = _zero_point(r, node, zy_k, operand, name)
    out = dtype_of(r, zy) or dtype_of(r, node.input[operand])
    mult, per_channel = multiplier
    axis = ("1" if node.op_type == "QLinearConv" else "-1") if per_channel else "0"
    r.emit("Requantize", [acc, mult, zy], [node.output[0]], name,
           {"axis": axis, "block_size": "0", "output_type": out})


@translates("QLinearMatMul")
def _qlinear_matmul(r, node, name: str, attrs: dict) -> None:
    """MatMulInteger (exact int32 sums), then rint(sum * scale_a * scale_b / scale_y) + zp_y,
    saturated (Requantize)."""
    a, b = node.input[0], node.input[3]
    bshape = r.known_shape(b)
    n = bshape[-1] if bshape else None
    acc = f"{name}/sums"
    r.emit("MatMulInteger", [a, b, _zero_point(r, node, 2, 0, name),
                             _zero_point(r, node, 5, 3, name)], [acc], acc, {})
    _requantize(r, node, name, acc, _multiplier(r, node, name, (1, 4, 6), n), 7, 0)


@translates("QLinearConv")
def _qlinear_conv(r, node, name: str, attrs: dict) -> None:
    """ConvInteger (exact int32 sums), plus the int32 bias B, then Requantize with one
    multiplier or one per output channel."""
    x, w = node.input[0], node.input[3]
    wshape = r.known_shape(w)
    oc = wshape[0] if wshape else None
    zx, zw = _zero_point(r, node, 2, 0, name), _zero_point(r, node, 5, 3, name)
    if r.known_shape(zx) not in (None, (), (1,)):
        r.refuse("x_zero_point (input 2) must be one value")
    acc = f"{name}/sums"
    r.emit("ConvInteger", [x, w, zx, zw], [acc], acc, _conv_attrs(r, node, attrs))
    bias = optional_input(node, 8)
    if bias:
        _typed(r, bias, ("i32",), "input 8 (B)")
        rank = rank_of(r, x, "QLinearConv")
        shaped = reshaped(r, bias, [1, -1] + [1] * (rank - 2), f"{name}/bias")
        biased = f"{name}/biased"
        r.emit("Add", [acc, shaped], [biased], biased, {"auto_broadcast": "numpy"})
        acc = biased
    _requantize(r, node, name, acc, _multiplier(r, node, name, (1, 4, 6), oc), 7, 0)
