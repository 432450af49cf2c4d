"""QuantizeLinear and DequantizeLinear (ONNX opsets 10-23) as built-in ops of the same names.

Inputs: x, scale (f32), and an optional zero point of the scale's shape (or one value). The scale is one value
(per-tensor), one per index of `axis` (per-axis), or, with `block_size` B > 0, x's shape with
the axis dim ceil(D / B) (blocked). QuantizeLinear's output type is the zero point's, else the
`output_type` attribute (the translation picks u8 where ONNX names none); DequantizeLinear's
is f32. Requantize (QLinearMatMul's and QLinearConv's last step): an i32 sum times a
multiplier (the scale input), rounded and saturated as QuantizeLinear. Kernel: quant_linear.cl,
the dims as kernel arguments.
"""
from __future__ import annotations

import numpy as np

from ... import dtypes
from ...errors import BindingError
from ...jit.launch import Arg, DEFAULT_CONTEXT, KernelLaunch
from .._program import global_1d, normalize_axis, numel, program_text, shape_of
from ..base import Attr, Op, register_op

# the integer types each op takes on its quantized side, with their ranges
QUANT_TYPES = ("i8", "u8", "i16", "u16")
DEQUANT_TYPES = QUANT_TYPES + ("i32",)
INT_MAX = 2**31 - 1


def _range(dtype: str) -> tuple[int, int]:
    info = np.iinfo(dtypes.BY_NAME[dtype].np_dtype)
    return int(info.min), int(info.max)


def _int(value: int, what: str) -> np.int32:
    if not 0 <= int(value) <= INT_MAX:
        raise BindingError(f"{what} {int(value)} is past what the kernel addresses (int32)")
    return np.int32(value)


class _Linear(Op):
    input_count = (2, 3)
    attributes = (Attr("axis", "int", 1), Attr("block_size", "int", 0),
                  Attr("output_type", "str", "u8"))
    entry = ""

    def where(self, attrs) -> str:
        return f"layer '{getattr(attrs, 'layer', '?')}' ({self.type})"

    def layout(self, attrs, inputs) -> tuple[int, ...]:
        """(axis_len, inner, block, s_outer, s_axis, s_inner) of the scale's form, checked."""
        x, s = shape_of(inputs[0]), shape_of(inputs[1])
        if inputs[1].dtype != "f32":
            raise BindingError(f"{self.where(attrs)}: the scale is {inputs[1].dtype}; only f32 "
                               f"scales are supported")
        if len(inputs) == 3 and shape_of(inputs[2]) != s and numel(shape_of(inputs[2])) != 1:
            raise BindingError(f"{self.where(attrs)}: the zero point's shape "
                               f"{list(shape_of(inputs[2]))} differs from the scale's {list(s)}")
        block = attrs["block_size"]
        if numel(s) == 1 and len(s) <= 1 and block == 0:
            return (1, 1, 1, 0, 0, 0)                             # per-tensor
        if not x:
            raise BindingError(f"{self.where(attrs)}: a scalar x takes a scalar scale, found "
                               f"shape {list(s)}")
        axis = normalize_axis(attrs["axis"], len(x), self.type)
        d, inner = x[axis], numel(x[axis + 1:])
        if block == 0:
            if tuple(s) != (d,):
                raise BindingError(f"{self.where(attrs)}: a per-axis scale along axis {axis} "
                                   f"must have shape [{d}], found {list(s)}")
            return (d, inner, 1, 0, 1, 0)
        if block < 0:
            raise BindingError(f"{self.where(attrs)}: block_size {block} is negative")
        want = tuple(x[:axis]) + (-(-d // block),) + tuple(x[axis + 1:])
        if tuple(s) != want:
            raise BindingError(f"{self.where(attrs)}: a blocked scale (block_size {block}, axis "
                               f"{axis}) must have shape {list(want)}, found {list(s)}")
        return (d, inner, block, want[axis] * inner, inner, 1)

    def out_type(self, attrs, inputs) -> str:
        raise NotImplementedError

    def check_types(self, attrs, inputs) -> None:
        raise NotImplementedError

    def infer_shapes(self, attrs, inputs, consts):
        self.check_types(attrs, inputs)
        self.layout(attrs, inputs)
        return [(shape_of(inputs[0]), self.out_type(attrs, inputs))]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        layout = self.layout(attrs, inputs)
        out = self.out_type(attrs, inputs)
        has_zp = len(inputs) == 3
        qmin, qmax = _range(out) if self.entry != "dequantize" else (0, 0)
        src = program_text(self.entry, {
            "X_TYPE": inputs[0].cl_type, "Y_TYPE": dtypes.BY_NAME[out].cl_type,
            "SCALE_TYPE": "float", "ZP_TYPE": inputs[2].cl_type if has_zp else "int",
            "HAS_ZP": int(has_zp), "QMIN": qmin, "QMAX": qmax}, "quant_linear.cl")
        count = numel(shape_of(inputs[0]))
        args = [Arg.input(0), Arg.input(1)] + ([Arg.input(2)] if has_zp else []) + [
            Arg.output(0), Arg.scalar(np.int64(count))] + [
            Arg.scalar(_int(v, "a dim or stride")) for v in layout] + [
            Arg.scalar(np.int32(0 if not has_zp or numel(shape_of(inputs[2])) == 1 else 1))]
        return [KernelLaunch(src, self.entry, tuple(args), global_1d(count),
                             label=f"{self.entry}_{inputs[0].dtype}_{out}")]


@register_op
class QuantizeLinear(_Linear):
    type = "QuantizeLinear"
    entry = "quantize"

    def out_type(self, attrs, inputs) -> str:
        return inputs[2].dtype if len(inputs) == 3 else attrs["output_type"]

    def check_types(self, attrs, inputs) -> None:
        if inputs[0].dtype != "f32":
            raise BindingError(f"{self.where(attrs)}: x is {inputs[0].dtype}; only f32 is "
                               f"quantized here")
        out = self.out_type(attrs, inputs)
        if out not in QUANT_TYPES:
            raise BindingError(f"{self.where(attrs)}: quantizing to {out} is not supported "
                               f"(supported: {', '.join(QUANT_TYPES)})")


@register_op
class DequantizeLinear(_Linear):
    type = "DequantizeLinear"
    entry = "dequantize"

    def out_type(self, attrs, inputs) -> str:
        return "f32"

    def check_types(self, attrs, inputs) -> None:
        x = inputs[0].dtype
        if x not in DEQUANT_TYPES:
            raise BindingError(f"{self.where(attrs)}: x is {x}; supported: "
                               f"{', '.join(DEQUANT_TYPES)}")
        if len(inputs) == 3 and inputs[2].dtype != x:
            raise BindingError(f"{self.where(attrs)}: the zero point is {inputs[2].dtype}, x "
                               f"is {x}; they must be the same type")


@register_op
class Requantize(QuantizeLinear):
    type = "Requantize"
    entry = "requantize"

    def check_types(self, attrs, inputs) -> None:
        if inputs[0].dtype != "i32":
            raise BindingError(f"{self.where(attrs)}: x is {inputs[0].dtype}; expected i32")
        out = self.out_type(attrs, inputs)
        if out not in QUANT_TYPES:
            raise BindingError(f"{self.where(attrs)}: requantizing to {out} is not supported "
                               f"(supported: {', '.join(QUANT_TYPES)})")
