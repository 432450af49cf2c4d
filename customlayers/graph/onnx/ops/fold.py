"""ONNX -> IR translations of Size (shape arithmetic only) and CastLike (shape arithmetic or a
Convert). Each is folded at load when its inputs are constants, else kept as a fold-only node
for the shape-folding pass (deferred.py). (Comparisons, logic and Where are shape arithmetic
too, and ops on data otherwise: logic.py; Range likewise: index.py.)
"""
from __future__ import annotations

import numpy as np

from .... import dtypes
from ..deferred import fold_or_defer, is_known, is_pending
from ..translate import dtype_of, translates

@translates("Size")
def _size(r, node, name: str, attrs: dict) -> None:
    shape = r.known_shape(node.input[0])
    if shape is not None and None not in shape and not is_pending(r, node.input[0]):
        r.consts[node.output[0]] = np.array(int(np.prod(shape, dtype=np.int64)), np.int64)
        return
    fold_or_defer(r, "Size", [node.input[0]], [node.output[0]], name)


@translates("CastLike")
def _cast_like(r, node, name: str, attrs: dict) -> None:
    """Input 1 gives only its element type, known at load whatever computes it. Shape
    arithmetic is folded or deferred; a value computed at run time is an IR Convert."""
    like = node.input[1]
    target = dtype_of(r, like)
    if not target:
        r.refuse(f"the element type of '{like}' (input 1) is unknown")
    declared = _declared_type(r, like)
    boolean = declared == dtypes.BOOL_ONNX
    if is_known(r, node.input[0]):
        fold_or_defer(r, "CastLike", [node.input[0]], [node.output[0]], name,
                      {"to": dtypes.numpy_of(target).name, "boolean": int(boolean)})
        return
    if target == dtypes.BOOL_HELD_AS and declared not in (dtypes.BOOL_ONNX,
                                                          dtypes.BY_NAME["u8"].onnx):
        r.refuse(f"the element type of '{like}' (input 1) is held as u8 and the model does "
                 f"not say whether it is BOOL or UINT8")
    r.emit("Convert", [node.input[0]], [node.output[0]], name,
           {"destination_type": dtypes.BOOL_IR_ELEMENT_TYPE if boolean else target})


def _declared_type(r, value: str) -> int | None:
    """The ONNX element type the model declares for `value` (an input, a value_info, an
    output or an initializer), None where it declares none: bool and uint8 are both held as
    u8, and a cast to them differs (x != 0, or a truncation)."""
    g = r.model.graph
    names = {value, r.alias.get(value, value)}
    for vi in (*g.input, *g.value_info, *g.output):
        if vi.name in names and vi.type.tensor_type.elem_type:
            return vi.type.tensor_type.elem_type
    return next((t.data_type for t in r.initializers if t.name in names), None)
