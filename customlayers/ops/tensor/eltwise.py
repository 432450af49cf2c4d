"""Binary elementwise arithmetic with numpy broadcasting: Add, Subtract, Multiply, Divide,
Maximum, Minimum, Power, SquaredDifference, Mod, FloorMod (OpenVINO opset1 semantics).

All share binary_map.cl: one work-item per output element, each input read through an index
map with the output's dims and the input's strides baked in (stride 0 on broadcast axes), so an
input of the output's shape is read at `i` with no index arithmetic at all.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from ...dtypes import is_float
from ...errors import BindingError
from ...jit.tensor import TensorDesc
from ...jit.launch import DEFAULT_CONTEXT, KernelLaunch
from .._program import (binary_map_launch, broadcast_shapes, float_compute,
                       items_per_work_item, shape_of)
from ..base import Attr, Op, register_op

BROADCAST_MODES = ("numpy", "none")


class BinaryEltwise(Op):
    """Base of the binary ops. `float_op`/`int_op` are C expressions in `a` and `b`."""
    input_count = (2, 2)
    reads_half = True        # map kernels: half read and written as float (_half_io.py)
    attributes = (Attr("auto_broadcast", "str", "numpy"),)
    float_op = ""
    int_op = ""

    def parse_attributes(self, raw: Mapping[str, str], layer: str) -> dict[str, Any]:
        attrs = super().parse_attributes(raw, layer)
        mode = attrs["auto_broadcast"].lower()
        if mode not in BROADCAST_MODES:
            raise BindingError(f"layer '{layer}' ({self.type}): auto_broadcast='{mode}' is not "
                               f"supported; expected one of {', '.join(BROADCAST_MODES)}")
        attrs["auto_broadcast"] = mode
        return attrs

    def infer_shapes(self, attrs, inputs: Sequence[TensorDesc], consts):
        if len(inputs) != 2:
            raise BindingError(f"{self.type}: expected 2 inputs, found {len(inputs)}")
        a, b = shape_of(inputs[0]), shape_of(inputs[1])
        if attrs.get("auto_broadcast", "numpy") == "none" and a != b:
            raise BindingError(f"{self.type}: auto_broadcast='none' needs equal shapes, found "
                               f"{list(a)} and {list(b)}")
        return [(broadcast_shapes(self.type, a, b), inputs[0].dtype)]

    def op_text(self, attrs, dtype: str, b_dtype: str) -> str:
        """The C expression for an output of `dtype` from a second input of `b_dtype`."""
        return self.float_op if is_float(dtype) else self.int_op

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT) -> list[KernelLaunch]:
        out = outputs[0]
        load, store = float_compute(out.dtype)
        return [binary_map_launch(self.type.lower(), inputs[0], inputs[1], out,
                                  self.op_text(attrs, out.dtype, inputs[1].dtype),
                                  load_a=load, load_b=load,
                                  store=store, per_item=items_per_work_item(ctx))]


@register_op
class Add(BinaryEltwise):
    type = "Add"
    float_op = int_op = "a + b"


@register_op
class Subtract(BinaryEltwise):
    type = "Subtract"
    float_op = int_op = "a - b"


@register_op
class Multiply(BinaryEltwise):
    type = "Multiply"
    float_op = int_op = "a * b"


@register_op
class Divide(BinaryEltwise):
    """Integer division floors (python_division=true, the default) or truncates (ONNX's Div);
    a zero divisor gives 0 rather than a device trap (binary_map.cl)."""
    type = "Divide"
    attributes = BinaryEltwise.attributes + (Attr("python_division", "bool", True),)
    float_op = "a / b"

    def op_text(self, attrs, dtype, b_dtype):
        if is_float(dtype):
            return self.float_op
        kind = "FLOOR_DIV" if attrs.get("python_division", True) else "TRUNC_DIV"
        return f"{kind}(OUT_TYPE, a, b)"


@register_op
class Maximum(BinaryEltwise):
    type = "Maximum"
    float_op, int_op = "fmax(a, b)", "max(a, b)"


@register_op
class Minimum(BinaryEltwise):
    type = "Minimum"
    float_op, int_op = "fmin(a, b)", "min(a, b)"


@register_op
class Power(BinaryEltwise):
    """An integer base with an integer exponent is raised exactly (int_pow in binary_map.cl);
    with a float exponent, the float power truncated toward zero as ONNX Runtime's cast does,
    except that a whole exponent still goes through int_pow (float's pow is not exact)."""
    type = "Power"
    float_op = "pow(a, b)"

    def op_text(self, attrs, dtype, b_dtype):
        if is_float(dtype):
            return self.float_op
        if not is_float(b_dtype):
            return "int_pow(a, b)"
        return ("(b == trunc(b) && fabs(b) < 0x1p62f ? int_pow(a, (long)b) : "
                "(long)trunc(pow((float)a, (float)b)))")


@register_op
class Mod(BinaryEltwise):
    """The remainder with the dividend's sign (C's % and fmod, ONNX's Mod with fmod=1); a zero
    divisor gives 0 for integers."""
    type = "Mod"
    float_op, int_op = "fmod(a, b)", "TRUNC_MOD(OUT_TYPE, a, b)"


@register_op
class FloorMod(BinaryEltwise):
    """The remainder with the divisor's sign (Python's %, ONNX's Mod with fmod=0)."""
    type = "FloorMod"
    float_op, int_op = "FLOAT_FLOOR_MOD(a, b)", "FLOOR_MOD(OUT_TYPE, a, b)"


@register_op
class SquaredDifference(BinaryEltwise):
    type = "SquaredDifference"
    float_op = int_op = "(a - b) * (a - b)"

