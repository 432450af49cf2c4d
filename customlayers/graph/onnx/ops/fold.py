"""ONNX -> IR translations of Size (shape arithmetic only) and CastLike (shape arithmetic or a
Convert). Each is folded at load when its inputs are constants, else kept as a fold-only node
for the shape-folding pass (deferred.py). (Comparisons, logic and Where are shape arithmetic
too, and ops on data otherwise: logic.py; Range likewise: index.py.)

Also the signal ops (here because graph/onnx/ops/ holds its dozen modules): HannWindow,
HammingWindow, BlackmanWindow and MelWeightMatrix, whose inputs are sizes, folded like shape
arithmetic (graph/fold_signal.py; a size the caller feeds is compiled in per value), and DFT
and STFT on data (ops/signal/, their lengths and axis read when the plan is compiled).
"""
from __future__ import annotations

import numpy as np

from .... import dtypes
from ..deferred import fold_or_defer, is_known, is_pending
from ..deferred import need_compile_time
from ..translate import dtype_of, optional_input, translates

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


# -- the signal ops --------------------------------------------------------------------------
def _output_dtype(r, attrs: dict) -> str:
    """The numpy name of output_datatype (ONNX code; default FLOAT): f32 or f64 here."""
    code = int(attrs.get("output_datatype", 1))
    name = dtypes.ONNX_TYPES.get(code)
    if name not in ("f32", "f64"):
        r.refuse(f"output_datatype {code} ({name or 'unknown'}): only FLOAT and DOUBLE are "
                 f"supported")
    return dtypes.numpy_of(name).name


@translates("HannWindow", "HammingWindow", "BlackmanWindow")
def _window(r, node, name: str, attrs: dict) -> None:
    """A constant of the plan: folded now when the size is known, else per size given."""
    fold_or_defer(r, node.op_type, [node.input[0]], [node.output[0]], name,
                  {"periodic": int(attrs.get("periodic", 1)), "dtype": _output_dtype(r, attrs)},
                  fed=True)


@translates("MelWeightMatrix")
def _mel_weight_matrix(r, node, name: str, attrs: dict) -> None:
    fold_or_defer(r, "MelWeightMatrix", list(node.input[:5]), [node.output[0]], name,
                  {"dtype": _output_dtype(r, attrs)}, fed=True)


def _int_operand(r, node, k: int, what: str, default: int, name: str) -> str:
    """Input k (a length, an axis, a step), known when the plan is compiled, or `default`."""
    if optional_input(node, k) is None:
        return r.const(f"{name}/{what}", np.array(default, np.int64))
    value = need_compile_time(r, node, k, what)
    if dtype_of(r, value)[:1] not in ("i", "u", ""):
        r.refuse(f"the {what} (input {k}) must be an integer, found {dtype_of(r, value)}")
    return value


def _float_signal(r, node) -> tuple | None:
    """The signal's shape where known, checked at load: f32 or f64, the last dim 1 (real) or
    2 (complex: re, im)."""
    if dtype_of(r, node.input[0]) not in ("f32", "f64", ""):
        r.refuse(f"the input is {dtype_of(r, node.input[0])}; {node.op_type} runs on f32 and "
                 f"f64 here")
    shape = r.known_shape(node.input[0])
    if shape and (len(shape) < 2 or shape[-1] not in (1, 2, None)):
        r.refuse(f"the input's last dim must be 1 (real) or 2 (complex: re, im); found shape "
                 f"{list(shape)}")
    return shape


@translates("DFT")
def _dft(r, node, name: str, attrs: dict) -> None:
    """The axis is an attribute (opset 17/19, default 1) or input 2 (opset 20, default -2)."""
    shape = _float_signal(r, node)
    if r.opset.get("ai.onnx", 20) >= 20:
        axis = _int_operand(r, node, 2, "axis", -2, name)
    else:
        axis = r.const(f"{name}/axis", np.array(int(attrs.get("axis", 1)), np.int64))
    if shape and shape[-1] == 2 and int(attrs.get("onesided", 0)) and \
            not int(attrs.get("inverse", 0)):
        r.refuse("onesided=1 on a complex input (last dim 2): ONNX defines a one-sided "
                 "forward DFT of a real input only")
    known = r.folded(axis)
    if shape and known is not None and not -len(shape) <= int(known) < len(shape) - 1:
        r.refuse(f"axis {int(known)} is out of range for an input of shape {list(shape)} "
                 f"(the last dim holds re, im)")
    length = _int_operand(r, node, 1, "dft_length", 0, name)
    r.emit("SignalDFT", [node.input[0], length, axis], [node.output[0]], name,
           {"inverse": str(int(attrs.get("inverse", 0))),
            "onesided": str(int(attrs.get("onesided", 0)))})


@translates("STFT")
def _stft(r, node, name: str, attrs: dict) -> None:
    shape = _float_signal(r, node)
    if shape and len(shape) != 3:
        r.refuse(f"the signal must be [batch, length, 1 or 2]; found shape {list(shape)}")
    step = _int_operand(r, node, 1, "frame_step", 0, name)
    frame = _int_operand(r, node, 3, "frame_length", 0, name)
    window = optional_input(node, 2)
    r.emit("SignalSTFT", [node.input[0], step, frame] + ([window] if window else []),
           [node.output[0]], name, {"onesided": str(int(attrs.get("onesided", 1)))})
