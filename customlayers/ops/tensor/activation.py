"""Activations and other one-input elementwise functions (OpenVINO opset semantics).

Each op is a C expression in `x`, baked into unary_map.cl as FN(x): one program per op (and
attribute values), one work-item per element, no index arithmetic. Half tensors compute in
float. Ops that make sense on integers (ReLU, Abs, Clamp, ...) give an integer expression too;
the others refuse integer tensors at binding. PRelu and Swish-with-beta take a second tensor
and run on binary_map.cl instead.
"""
from __future__ import annotations

import math
import re
from typing import Any, Mapping, Sequence

import numpy as np

from ...dtypes import is_float, numpy_of
from ...errors import BindingError
from ...jit.tensor import TensorDesc
from ...jit.launch import DEFAULT_CONTEXT, KernelLaunch
from .._program import (items_per_work_item, LinearView,
                       binary_map_launch, c_float, float_compute,
                       shape_of, unary_map_launch)
from ..base import Attr, Op, register_op

SOFTPLUS = "(x > 20.0f ? x : log1p(exp(x)))"  # above 20, log(1 + e^x) == x in float


class Activation(Op):
    """`float_fn` (C text in float `x`; may use {attr} fields); `int_fn` for integer tensors,
    None when the function is defined for floating point only."""
    input_count = (1, 1)
    reads_half = True        # map kernels: half read and written as float (_half_io.py)
    float_fn = ""
    int_fn: str | None = None

    def fn_text(self, attrs: Mapping[str, Any], dtype: str) -> str:
        if is_float(dtype):
            return self.float_fn
        if self.int_fn is None:
            raise BindingError(f"{self.type}: input of type {dtype} is not supported; expected "
                               f"a floating-point tensor (f32, f16)")
        return self.int_fn

    def infer_shapes(self, attrs, inputs: Sequence[TensorDesc], consts):
        self.fn_text(attrs, inputs[0].dtype)  # refuse unsupported types at binding
        return [(shape_of(inputs[0]), inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT) -> list[KernelLaunch]:
        load, store = float_compute(inputs[0].dtype)
        return [unary_map_launch(self.type.lower(), inputs[0], outputs[0],
                                 fn=self.fn_text(attrs, inputs[0].dtype), load=load, store=store,
                                 per_item=items_per_work_item(ctx))]


def register_activation(type_name: str, float_fn: str,
                        int_fn: str | None = None) -> type[Activation]:
    """Define and register the Activation `type_name` computing `float_fn` (C text in `x`), and
    `int_fn` on integer tensors (None: floating point only). Returns the class."""
    cls = type(type_name, (Activation,), {"type": type_name, "float_fn": float_fn,
                                          "int_fn": int_fn, "__module__": __name__})
    return register_op(cls)


# name, float expression, integer expression (None: floating point only)
ReLU = register_activation("ReLU", "(x < 0.0f ? 0.0f : x)",  # keeps NaN
                           "(x < 0 ? (OUT_TYPE)0 : x)")
Sigmoid = register_activation("Sigmoid", "1.0f / (1.0f + exp(-x))")
Tanh = register_activation("Tanh", "tanh(x)")
Exp = register_activation("Exp", "exp(x)")
Log = register_activation("Log", "log(x)")
Sqrt = register_activation("Sqrt", "sqrt(x)")
Abs = register_activation("Abs", "fabs(x)", "abs(x)")
Negative = register_activation("Negative", "-x", "-x")
# erf_rational: float erf in unary_map.cl (in double: erf)
Erf = register_activation("Erf", "erf_rational(x)")
Sin = register_activation("Sin", "sin(x)")
Cos = register_activation("Cos", "cos(x)")
Floor = register_activation("Floor", "floor(x)", "x")
Ceiling = register_activation("Ceiling", "ceil(x)", "x")
SoftPlus = register_activation("SoftPlus", SOFTPLUS)
Mish = register_activation("Mish", f"x * tanh({SOFTPLUS})")
HSwish = register_activation("HSwish", "x * fmin(fmax(x + 3.0f, 0.0f), 6.0f) / 6.0f")
HSigmoid = register_activation("HSigmoid",      # a NaN kept (fmax(NaN, 0) is 0)
                               "(isnan(x) ? x : fmin(fmax(x + 3.0f, 0.0f), 6.0f) / 6.0f)")


@register_op
class Clamp(Activation):
    """min(max(x, min), max), NaN kept (as OpenVINO's and ONNX Runtime's std::min/max do).
    Integer tensors clamp to ceil(min)..floor(max), as OpenVINO does, each bound first brought
    into the element type's range: a bound beyond it (ONNX's missing bound, the float
    +-3.4e38 of an IR) clamps nothing, where a C cast of it would wrap to any value. A bound
    written as an integer is kept exact (int64 bounds past 2**53)."""
    type = "Clamp"
    attributes = (Attr("min", "float", required=True), Attr("max", "float", required=True))

    def parse_attributes(self, raw, layer):
        attrs = super().parse_attributes(raw, layer)
        for key in ("min", "max"):
            if math.isnan(attrs[key]):
                raise BindingError(f"layer '{layer}' (Clamp): {key}={raw[key]} is not a number")
            exact = _integer_text(raw[key])
            if exact is not None:
                attrs[key] = exact
        if attrs["min"] > attrs["max"]:
            raise BindingError(f"layer '{layer}' (Clamp): min={float(attrs['min'])} is above "
                               f"max={float(attrs['max'])}")
        return attrs

    def fn_text(self, attrs, dtype):
        lo, hi = attrs["min"], attrs["max"]
        if is_float(dtype):
            return f"(x < {c_float(lo)} ? {c_float(lo)} : (x > {c_float(hi)} ? {c_float(hi)} : x))"
        info = np.iinfo(numpy_of(dtype))     # the type's range, for bounds cast into it
        low, high = int(info.min), int(info.max)
        lo_i = low if math.isinf(lo) else min(max(math.ceil(lo), low), high)
        hi_i = high if math.isinf(hi) else min(max(math.floor(hi), low), high)
        return f"min(max(x, {_c_int(lo_i, dtype)}), {_c_int(hi_i, dtype)})"


def _integer_text(text: str | None) -> int | None:
    """The exact integer an attribute's text writes ("-9223372036854775808"), else None."""
    t = (text or "").strip()
    return int(t) if re.fullmatch(r"[+-]?[0-9]+", t) else None


def _c_int(value: int, dtype: str) -> str:
    """An integer of `dtype`'s range as an OpenCL C constant of that type (the most negative
    long has no literal: it is written as a difference)."""
    if dtype == "i64" and value == -2 ** 63:
        return "(OUT_TYPE)(-9223372036854775807L - 1)"
    return f"(OUT_TYPE)({value}{'L' if dtype == 'i64' else ''})"


@register_op
class Elu(Activation):
    type = "Elu"
    attributes = (Attr("alpha", "float", required=True),)

    def fn_text(self, attrs, dtype):
        super().fn_text(attrs, dtype)
        return f"(x > 0.0f ? x : {c_float(attrs['alpha'])} * expm1(x))"


@register_op
class Gelu(Activation):
    type = "Gelu"
    attributes = (Attr("approximation_mode", "str", "erf"),)
    MODES = {
        "erf": "0.5f * x * (1.0f + erf_rational(x * M_SQRT1_2_F))",
        "tanh": "0.5f * x * (1.0f + tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)))",
    }

    def parse_attributes(self, raw, layer):
        attrs = super().parse_attributes(raw, layer)
        mode = attrs["approximation_mode"].lower()
        if mode not in self.MODES:
            raise BindingError(f"layer '{layer}' (Gelu): approximation_mode='{mode}' is not one "
                               f"of {', '.join(self.MODES)}")
        attrs["approximation_mode"] = mode
        return attrs

    def fn_text(self, attrs, dtype):
        super().fn_text(attrs, dtype)
        return self.MODES[attrs.get("approximation_mode", "erf")]


@register_op
class Swish(Activation):
    """x * sigmoid(beta * x); beta is the optional scalar input 1 (default 1), read from its
    buffer so that it need not be a constant."""
    input_count = (1, 2)
    type = "Swish"
    float_fn = "x / (1.0f + exp(-x))"

    def infer_shapes(self, attrs, inputs, consts):
        if len(inputs) > 1 and inputs[1].count != 1:
            raise BindingError(f"Swish: beta must be a scalar, found shape "
                               f"{list(inputs[1].shape)}")
        return super().infer_shapes(attrs, inputs, consts)

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        if len(inputs) == 1:
            return super().launches(attrs, inputs, outputs, consts)
        load, store = float_compute(outputs[0].dtype)
        beta = LinearView((), (), 0).broadcast_to(shape_of(outputs[0]))
        return [binary_map_launch("swish", inputs[0], inputs[1], outputs[0],
                                  "a / (1.0f + exp(-b * a))", b_view=beta,
                                  load_a=load, load_b=load, store=store,
                                  per_item=items_per_work_item(ctx))]


@register_op
class PRelu(Activation):
    """x < 0 ? slope * x : x. A 1-D slope whose size is the channel count (dim 1) applies per
    channel; any other slope broadcasts to the data with numpy rules."""
    input_count = (2, 2)
    type = "PRelu"
    float_fn = int_fn = "x"  # not used: PRelu always runs binary_map

    def slope_view(self, data: tuple, slope: tuple) -> LinearView:
        if len(slope) == 1 and len(data) >= 2 and slope[0] == data[1]:
            per_channel = (1, slope[0]) + (1,) * (len(data) - 2)
            return LinearView.dense(per_channel).broadcast_to(data)
        if len(slope) > len(data) or any(s not in (1, d) for s, d in
                                         zip(reversed(slope), reversed(data))):
            raise BindingError(f"PRelu: slope of shape {list(slope)} fits neither the channels "
                               f"nor (numpy broadcasting) the data of shape {list(data)}")
        return LinearView.dense(slope).broadcast_to(data)

    def infer_shapes(self, attrs, inputs, consts):
        if len(inputs) != 2:
            raise BindingError(f"PRelu: expected 2 inputs (data, slope), found {len(inputs)}")
        self.slope_view(shape_of(inputs[0]), shape_of(inputs[1]))
        return super().infer_shapes(attrs, inputs, consts)

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        load, store = float_compute(outputs[0].dtype)
        view = self.slope_view(shape_of(inputs[0]), shape_of(inputs[1]))
        return [binary_map_launch("prelu", inputs[0], inputs[1], outputs[0],
                                  "a < 0 ? a * b : a", b_view=view,
                                  load_a=load, load_b=load, store=store,
                                  per_item=items_per_work_item(ctx))]
