"""One-input elementwise ops on data that ops/tensor's activations lack: the predicates IsNaN
and IsInf (a boolean result, held as u8), LogicalNot, BitwiseNot, and the math functions ONNX
models use (inverse trigonometric and hyperbolic functions, Tan, Round, Celu, ThresholdedRelu),
OpenVINO opset semantics where OpenVINO has the op.

All run on the shared unary_map.cl: the math functions are activations (register_activation:
half computes in float, integer tensors refused unless an integer form is given); the
predicates store a 0/1 of the input's element type into u8.
"""
from __future__ import annotations

from typing import Sequence

from ...dtypes import BOOL_HELD_AS, is_float
from ...errors import BindingError
from ...jit.launch import DEFAULT_CONTEXT, KernelLaunch
from ...jit.tensor import TensorDesc
from .._program import c_float, float_compute, items_per_work_item, shape_of, unary_map_launch
from ..base import Attr, Op, register_op
from ..tensor.activation import Activation, register_activation

# the math functions of OpenCL C, on float, double and (computed in float) half
Acos = register_activation("Acos", "acos(x)")
Acosh = register_activation("Acosh", "acosh(x)")
Asin = register_activation("Asin", "asin(x)")
Asinh = register_activation("Asinh", "asinh(x)")
Atan = register_activation("Atan", "atan(x)")
Atanh = register_activation("Atanh", "atanh(x)")
Cosh = register_activation("Cosh", "cosh(x)")
Sinh = register_activation("Sinh", "sinh(x)")
Tan = register_activation("Tan", "tan(x)")


@register_op
class Round(Activation):
    """Round-5: half_to_even (rint, in the default rounding mode; ONNX's Round) or
    half_away_from_zero (C's round). Integers are already whole."""
    type = "Round"
    attributes = (Attr("mode", "str", "half_to_even"),)
    MODES = {"half_to_even": "rint(x)", "half_away_from_zero": "round(x)"}
    int_fn = "x"

    def parse_attributes(self, raw, layer):
        attrs = super().parse_attributes(raw, layer)
        if attrs["mode"] not in self.MODES:
            raise BindingError(f"layer '{layer}' (Round): mode='{attrs['mode']}' is not one of "
                               f"{', '.join(self.MODES)}")
        return attrs

    def fn_text(self, attrs, dtype):
        return self.MODES[attrs["mode"]] if is_float(dtype) else self.int_fn


class _AlphaActivation(Activation):
    """An activation with one float attribute `alpha`, written {alpha} in `float_fn`."""
    attributes = (Attr("alpha", "float", 1.0),)

    def fn_text(self, attrs, dtype):
        super().fn_text(attrs, dtype)                 # refuses integer tensors
        return self.float_fn.format(alpha=f"({c_float(attrs['alpha'])})")


@register_op
class Celu(_AlphaActivation):
    """ONNX Celu: max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    type = "Celu"
    float_fn = "(x > 0.0f ? x : {alpha} * expm1(x / {alpha}))"

    def parse_attributes(self, raw, layer):
        attrs = super().parse_attributes(raw, layer)
        if attrs["alpha"] == 0:
            raise BindingError(f"layer '{layer}' (Celu): alpha=0 divides by zero")
        return attrs


@register_op
class ThresholdedRelu(_AlphaActivation):
    """ONNX ThresholdedRelu: x where x > alpha, else 0."""
    type = "ThresholdedRelu"
    float_fn = "(x > {alpha} ? x : 0.0f)"


class _Predicate(Op):
    """out = fn(x) as u8 (0 or 1); `fn` is C text in `x` (the input's type, half in float);
    `floats_only` refuses integer inputs."""
    input_count = (1, 1)
    fn = ""
    floats_only = True
    result = BOOL_HELD_AS

    def fn_text(self, attrs, dtype: str) -> str:
        return self.fn

    def infer_shapes(self, attrs, inputs: Sequence[TensorDesc], consts):
        dtype = inputs[0].dtype
        if self.floats_only and not is_float(dtype):
            raise BindingError(f"{self.type}: input of type {dtype} is not supported; expected "
                               f"a floating-point tensor")
        return [(shape_of(inputs[0]), self.result or dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT) -> list[KernelLaunch]:
        load, _ = float_compute(inputs[0].dtype)
        return [unary_map_launch(self.type.lower(), inputs[0], outputs[0],
                                 fn=self.fn_text(attrs, inputs[0].dtype), load=load,
                                 per_item=items_per_work_item(ctx))]


@register_op
class IsNaN(_Predicate):
    type = "IsNaN"
    fn = "isnan(x)"


@register_op
class IsInf(_Predicate):
    """IsInf-10: detect_negative / detect_positive choose which infinities count."""
    type = "IsInf"
    attributes = (Attr("detect_negative", "bool", True), Attr("detect_positive", "bool", True))

    def fn_text(self, attrs, dtype):
        neg, pos = attrs["detect_negative"], attrs["detect_positive"]
        if neg and pos:
            return "isinf(x)"
        if not (neg or pos):
            return "0"
        return f"(isinf(x) && x {'<' if neg else '>'} 0)"


@register_op
class LogicalNot(_Predicate):
    """Any nonzero value is true (booleans are held as u8 0 or 1)."""
    type = "LogicalNot"
    fn = "(x == 0)"
    floats_only = False


@register_op
class BitwiseNot(_Predicate):
    """~x in the input's integer type (on u8 the bitwise complement: a boolean, held as u8,
    cannot be told from a u8 here, so its logical not is LogicalNot's)."""
    type = "BitwiseNot"
    fn = "~x"
    floats_only = False
    result = None

    def infer_shapes(self, attrs, inputs, consts):
        if is_float(inputs[0].dtype):
            raise BindingError(f"BitwiseNot: input of type {inputs[0].dtype} is not supported; "
                               f"expected an integer tensor")
        return super().infer_shapes(attrs, inputs, consts)
