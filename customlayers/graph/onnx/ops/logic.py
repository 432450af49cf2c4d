"""ONNX -> IR translations of the elementwise ops on data that are not arithmetic: comparisons,
logic (And, Or, Xor, Not), Where, IsNaN/IsInf, the bitwise ops and BitShift, and the math
functions the IR names as ONNX does (Acos ... Tan, Round, Celu, ThresholdedRelu, Swish).

Comparisons, logic and Where are also shape arithmetic (a mask of a Shape, a Where choosing a
dim): when every input is a constant or a value the shape-folding pass computes, they are folded
or deferred as before (deferred.fold_or_defer); when an input is data (a graph input, a layer's
output) they become the IR op on tensors. A boolean result is held as u8.
"""
from __future__ import annotations

import numpy as np

from .... import dtypes
from ..deferred import fold_or_defer, is_known
from ..translate import dtype_of, float_text, legacy_broadcast, translates

# ONNX op -> the IR op on data; the ones in FOLDABLE are also shape arithmetic (fold_eval.py)
BINARY = {"Equal": "Equal", "Less": "Less", "Greater": "Greater", "LessOrEqual": "LessEqual",
          "GreaterOrEqual": "GreaterEqual", "And": "LogicalAnd", "Or": "LogicalOr",
          "Xor": "LogicalXor", "BitwiseAnd": "BitwiseAnd", "BitwiseOr": "BitwiseOr",
          "BitwiseXor": "BitwiseXor"}
UNARY = {"Not": "LogicalNot", "IsNaN": "IsNaN", "BitwiseNot": "BitwiseNot", "Acos": "Acos",
         "Acosh": "Acosh", "Asin": "Asin", "Asinh": "Asinh", "Atan": "Atan", "Atanh": "Atanh",
         "Cosh": "Cosh", "Sinh": "Sinh", "Tan": "Tan"}
BOOLEAN_RESULT = ("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or",
                  "Xor", "Not", "IsNaN", "IsInf")
FOLDABLE = ("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or",
            "Xor", "Where")


def _folded(r, node, name: str) -> bool:
    """Fold or defer the node (True) when it is shape arithmetic: every input a constant or a
    value the shape-folding pass computes."""
    if node.op_type not in FOLDABLE or not all(is_known(r, i) for i in node.input if i):
        return False
    fold_or_defer(r, node.op_type, list(node.input), list(node.output), name)
    return True


def _typed(r, out: str, dtype: str) -> None:
    """Declare `out`'s element type where the model does not (emit would take input 0's)."""
    shape, declared = r.info.get(out, (None, ""))
    if not declared:
        r.info[out] = (shape, dtype)


def _emit(r, node, name: str, ir_type: str, inputs: list, attrs: dict | None = None) -> None:
    if node.op_type in BOOLEAN_RESULT:
        _typed(r, node.output[0], dtypes.BOOL_HELD_AS)
    r.emit(ir_type, inputs, [node.output[0]], name, attrs)


def _binary(ir_type: str):
    def translate(r, node, name: str, attrs: dict) -> None:
        if _folded(r, node, name):
            return
        a, b = node.input[0], node.input[1]
        if attrs.get("broadcast"):                   # opset < 7
            b = legacy_broadcast(r, a, b, attrs.get("axis"), name)
        _emit(r, node, name, ir_type, [a, b], {"auto_broadcast": "numpy"})
    translate.__name__ = f"_binary_{ir_type}"
    return translate


def _unary(ir_type: str):
    def translate(r, node, name: str, attrs: dict) -> None:
        if not _folded(r, node, name):
            _emit(r, node, name, ir_type, [node.input[0]])
    translate.__name__ = f"_unary_{ir_type}"
    return translate


for _onnx, _ir in BINARY.items():
    translates(_onnx)(_binary(_ir))
for _onnx, _ir in UNARY.items():
    translates(_onnx)(_unary(_ir))


@translates("Where")
def _where(r, node, name: str, attrs: dict) -> None:
    if _folded(r, node, name):
        return
    _typed(r, node.output[0], dtype_of(r, node.input[1]))
    r.emit("Select", list(node.input), [node.output[0]], name, {"auto_broadcast": "numpy"})


@translates("IsInf")
def _is_inf(r, node, name: str, attrs: dict) -> None:
    flags = {k: "true" if int(attrs.get(k, 1)) else "false"
             for k in ("detect_negative", "detect_positive")}
    _emit(r, node, name, "IsInf", [node.input[0]], flags)


@translates("BitShift")
def _bit_shift(r, node, name: str, attrs: dict) -> None:
    direction = attrs["direction"]
    direction = direction.decode() if isinstance(direction, bytes) else str(direction)
    ir_type = {"LEFT": "BitwiseLeftShift", "RIGHT": "BitwiseRightShift"}.get(direction)
    if ir_type is None:
        r.refuse(f"attribute direction='{direction[:40]}' is not LEFT or RIGHT")
    _emit(r, node, name, ir_type, [node.input[0], node.input[1]], {"auto_broadcast": "numpy"})


@translates("Round")
def _round(r, node, name: str, attrs: dict) -> None:
    _emit(r, node, name, "Round", [node.input[0]], {"mode": "half_to_even"})


@translates("Celu", "ThresholdedRelu")
def _alpha_activation(r, node, name: str, attrs: dict) -> None:
    default = 1.0
    _emit(r, node, name, node.op_type, [node.input[0]],
          {"alpha": float_text(attrs.get("alpha", default))})


@translates("Swish")
def _swish(r, node, name: str, attrs: dict) -> None:
    """x * sigmoid(alpha * x): the IR's Swish with alpha as its beta input, in x's type."""
    dtype = dtype_of(r, node.input[0]) or "f32"
    np_type = dtypes.numpy_of(dtype) if dtypes.is_float(dtype) else np.float32
    beta = r.const(f"{name}/beta", np.array(attrs.get("alpha", 1.0), np_type))
    _emit(r, node, name, "Swish", [node.input[0], beta])
