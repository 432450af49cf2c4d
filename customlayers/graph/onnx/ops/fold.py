"""ONNX -> IR translations of the ops that run here only as shape arithmetic: comparisons,
logic, Where, Size, CastLike (which also runs on data, as a Convert). Each is folded at load when its inputs are constants, else
kept as a fold-only node for the shape-folding pass (deferred.py); one reading a value computed
at run time by a layer (a mask, indices from data) is refused, naming the node and the input.
"""
from __future__ import annotations

import numpy as np

from .... import dtypes
from ..deferred import fold_or_defer, is_known, is_pending
from ..translate import dtype_of, translates

# ONNX ops translated here, evaluated by graph/fold_eval.py
# (Range: index.py, which runs it on data when its operands are graph inputs)
SHAPE_ONLY = ("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or",
              "Xor", "Where")


@translates(*SHAPE_ONLY)
def _shape_only(r, node, name: str, attrs: dict) -> None:
    fold_or_defer(r, node.op_type, list(node.input), list(node.output), name)


@translates("Size")
def _size(r, node, name: str, attrs: dict) -> None:
    shape = r.known_shape(node.input[0])
    if shape is not None and None not in shape and not is_pending(r, node.input[0]):
        r.consts[node.output[0]] = np.array(int(np.prod(shape, dtype=np.int64)), np.int64)
        return
    fold_or_defer(r, "Size", [node.input[0]], [node.output[0]], name)


@translates("CastLike")
def _cast_like(r, node, name: str, attrs: dict) -> None:
    """Input 1 gives only its element type, known at load whatever computes it."""
    target = dtype_of(r, node.input[1])
    if not target:
        r.refuse(f"the element type of '{node.input[1]}' (input 1) is unknown")
    if is_known(r, node.input[0]):
        fold_or_defer(r, "CastLike", [node.input[0]], [node.output[0]], name,
                      {"to": dtypes.numpy_of(target).name, "boolean": 0})
        return
    # on data: a Convert to the target's type (bool is held as u8, and a u8 target converts
    # as u8: CastLike to a bool tensor of values other than 0/1 is ONNX's own corner)
    r.emit("Convert", [node.input[0]], [node.output[0]], name,
           {"destination_type": dtypes.BY_NAME[target].ir_element_type or target})
