"""Binary elementwise ops on data with numpy broadcasting whose result is not arithmetic:
comparisons (Equal, NotEqual, Less, LessEqual, Greater, GreaterEqual: a boolean, held as u8),
logic on booleans (LogicalAnd, LogicalOr, LogicalXor), and the bitwise ops on integers
(BitwiseAnd, BitwiseOr, BitwiseXor, BitwiseLeftShift, BitwiseRightShift), OpenVINO opset
semantics.

All run on ops/tensor's binary_map.cl (binary_map_launch): the element types come from the
dtype table's OpenCL C types, so every type the runtime holds is taken, with no list here.
"""
from __future__ import annotations

from typing import Sequence

from ...dtypes import BOOL_HELD_AS, is_float
from ...errors import BindingError
from ...jit.launch import DEFAULT_CONTEXT, KernelLaunch
from ...jit.tensor import TensorDesc
from .._program import binary_map_launch, float_compute, items_per_work_item
from ..base import register_op
from ..tensor.eltwise import BinaryEltwise


class _TypedBinary(BinaryEltwise):
    """A BinaryEltwise whose inputs share one element type and whose `op` (C text in `a` and
    `b`) is computed in that type (half in float); `result` is the output's element type (None:
    the inputs'); `integers_only` refuses floating-point inputs."""
    op = ""
    result: str | None = None
    integers_only = False

    def infer_shapes(self, attrs, inputs: Sequence[TensorDesc], consts):
        [(shape, _)] = super().infer_shapes(attrs, inputs, consts)
        a, b = inputs[0].dtype, inputs[1].dtype
        if a != b:
            raise BindingError(f"{self.type}: the inputs have element types {a} and {b}; "
                               f"they must be the same")
        if self.integers_only and is_float(a):
            raise BindingError(f"{self.type}: input of type {a} is not supported; expected an "
                               f"integer or boolean tensor")
        return [(shape, self.result or a)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT) -> list[KernelLaunch]:
        load, _ = float_compute(inputs[0].dtype)
        _, store = float_compute(outputs[0].dtype)
        return [binary_map_launch(self.type.lower(), inputs[0], inputs[1], outputs[0], self.op,
                                  load_a=load, load_b=load, store=store,
                                  per_item=items_per_work_item(ctx))]


def _register(type_name: str, op: str, result: str | None = None,
              integers_only: bool = False) -> type[_TypedBinary]:
    cls = type(type_name, (_TypedBinary,), {"type": type_name, "op": op, "result": result,
                                            "integers_only": integers_only,
                                            "__module__": __name__})
    return register_op(cls)


# comparisons: a NaN compares unequal to everything, itself included (C's and IEEE's rule)
Equal = _register("Equal", "a == b", BOOL_HELD_AS)
NotEqual = _register("NotEqual", "a != b", BOOL_HELD_AS)
Less = _register("Less", "a < b", BOOL_HELD_AS)
LessEqual = _register("LessEqual", "a <= b", BOOL_HELD_AS)
Greater = _register("Greater", "a > b", BOOL_HELD_AS)
GreaterEqual = _register("GreaterEqual", "a >= b", BOOL_HELD_AS)

# logic: any nonzero value is true (booleans are held as u8 0 or 1)
LogicalAnd = _register("LogicalAnd", "(a != 0) && (b != 0)", BOOL_HELD_AS)
LogicalOr = _register("LogicalOr", "(a != 0) || (b != 0)", BOOL_HELD_AS)
LogicalXor = _register("LogicalXor", "(a != 0) != (b != 0)", BOOL_HELD_AS)

# bitwise, in the inputs' type (C promotes a narrow type to int; the store truncates it back)
BitwiseAnd = _register("BitwiseAnd", "a & b", integers_only=True)
BitwiseOr = _register("BitwiseOr", "a | b", integers_only=True)
BitwiseXor = _register("BitwiseXor", "a ^ b", integers_only=True)
# a shift by the type's width or more (or a negative one) gives 0, as numpy's does, where C
# leaves it undefined and OpenCL takes the amount modulo the width; a right shift of a negative
# value is arithmetic
_IN_RANGE = "(b >= 0 && (ulong)b < 8 * sizeof(OUT_TYPE))"
BitwiseLeftShift = _register("BitwiseLeftShift", f"{_IN_RANGE} ? (OUT_TYPE)(a << b) : 0",
                             integers_only=True)
BitwiseRightShift = _register("BitwiseRightShift",
                              f"{_IN_RANGE} ? (OUT_TYPE)(a >> b) : (a < 0 ? -1 : 0)",
                              integers_only=True)
