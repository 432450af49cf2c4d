"""ONNX -> IR translations of the elementwise maths: plain renames (Relu, Add, ...),
activations with parameters, Mean, and the Reduce* family (Mean/Sum/Max/Min/Prod built in, the
others
composed from them and elementwise ops).
"""
from __future__ import annotations

import numpy as np

from .... import dtypes
from ..deferred import (fold_or_defer, need_compile_time, try_fold_float_constants,
                        try_shape_arithmetic)
from ..translate import axis_in, const_input, dtype_of, float_text, intermediate, keep_axes, \
    legacy_broadcast, optional_input, translates

# ONNX ops whose IR counterpart has the same inputs and no attributes: registered below as
# renames (Div is not among them: its own translation below keeps C's integer division)
UNARY = {"Relu": "ReLU", "Sigmoid": "Sigmoid", "Tanh": "Tanh", "Exp": "Exp", "Log": "Log",
         "Sqrt": "Sqrt", "Abs": "Abs", "Floor": "Floor", "Ceil": "Ceiling", "Erf": "Erf",
         "Neg": "Negative", "Sin": "Sin", "Cos": "Cos", "Softplus": "SoftPlus",
         "Softsign": "SoftSign", "Sign": "Sign", "HardSwish": "HSwish", "Mish": "Mish"}
BINARY = {"Add": "Add", "Mul": "Multiply", "Sub": "Subtract", "Pow": "Power",
          "Max": "Maximum", "Min": "Minimum", "Sum": "Add"}


@translates("Clip")
def _clip(r, node, name: str, attrs: dict) -> None:
    """A missing bound is the element type's own lowest or highest value (as ONNX Runtime has
    it: an infinity becomes the largest finite float), never a float constant cast into an
    integer type; integer bounds are written exactly (an int64 past 2**53). Bounds that are
    not constants (graph inputs, computed tensors) clip on data: Minimum(Maximum(x, min), max)."""
    dtype = dtype_of(r, node.input[0])
    bounds = {"min": attrs.get("min"), "max": attrs.get("max")}   # before opset 11
    tensors = {}                                # slot -> a bound that is not a constant
    for k, slot in ((1, "min"), (2, "max")):   # opset 11+: bounds are inputs
        if len(node.input) > k and node.input[k]:
            value = r.folded(node.input[k])
            if value is None:
                tensors[slot] = node.input[k]
                continue
            if value.size != 1:
                r.refuse(f"the '{slot}' input must be a scalar, found shape {list(value.shape)}")
            bounds[slot] = value.reshape(-1)[0].item()
    if not tensors:
        text = {slot: _bound_text(v, dtype, slot) for slot, v in bounds.items()}
        r.emit("Clamp", [node.input[0]], [node.output[0]], name, text)
        return
    x = node.input[0]
    for slot, ir_type in (("min", "Maximum"), ("max", "Minimum")):
        bound = tensors.get(slot)
        if bound is None and bounds[slot] is not None:
            bound = r.const(f"{name}/{slot}", np.asarray(bounds[slot]).astype(
                dtypes.numpy_of(dtype) if dtype in dtypes.BY_NAME else np.float32))
        if bound is None:
            continue
        last = slot == "max" or "max" not in tensors and bounds["max"] is None
        if last:
            r.emit(ir_type, [x, bound], [node.output[0]], name, {"auto_broadcast": "numpy"})
            return
        x = intermediate(r, ir_type, [x, bound], f"{name}/{slot}", None,
                         {"auto_broadcast": "numpy"})


def _bound_text(value, dtype: str, slot: str) -> str:
    """A Clip bound as Clamp's attribute text: exact for integers, every digit for floats; a
    missing one the type's own limit (an infinity when the type is unknown: no clamp)."""
    np_type = dtypes.numpy_of(dtype) if dtype in dtypes.BY_NAME else None
    if value is None:
        if np_type is None:
            return "-inf" if slot == "min" else "inf"
        info = np.iinfo(np_type) if dtype[0] in "iu" else np.finfo(np_type)
        value = info.min if slot == "min" else info.max
    if dtype[:1] in ("i", "u"):
        return str(int(value))
    return repr(float(value))


@translates("Div")
def _div(r, node, name: str, attrs: dict) -> None:
    """ONNX's integer division truncates toward zero, as C does (-3 / 2 = -1); the IR's Divide
    floors unless told python_division=false (OpenVINO's default)."""
    a, b = node.input[0], node.input[1]
    if not attrs.get("broadcast") and (try_shape_arithmetic(r, node, name) or
                                       try_fold_float_constants(r, node)):
        return
    if attrs.get("broadcast"):                   # opset < 7
        b = legacy_broadcast(r, a, b, attrs.get("axis"), name)
    r.emit("Divide", [a, b], [node.output[0]], name,
           {"auto_broadcast": "numpy", "python_division": "false"})


@translates("Mod")
def _mod(r, node, name: str, attrs: dict) -> None:
    """fmod=0: the remainder takes the divisor's sign (Python's %, the IR's FloorMod); fmod=1:
    the dividend's (C's fmod and %, the IR's Mod)."""
    fmod = int(attrs.get("fmod", 0))
    if fmod not in (0, 1):
        r.refuse(f"attribute fmod={fmod} is not 0 or 1")
    if try_shape_arithmetic(r, node, name, {"fmod": fmod}):
        return
    r.emit("Mod" if fmod else "FloorMod", [node.input[0], node.input[1]], [node.output[0]],
           name, {"auto_broadcast": "numpy"})


@translates("LeakyRelu")
def _leaky_relu(r, node, name: str, attrs: dict) -> None:
    slope = r.const(f"{name}/slope", np.array([attrs.get("alpha", 0.01)], np.float32))
    r.emit("PRelu", [node.input[0], slope], [node.output[0]], name)


@translates("Gelu")
def _gelu(r, node, name: str, attrs: dict) -> None:
    """opset 20: approximate 'none' (the erf form) or 'tanh'."""
    approximate = attrs.get("approximate", b"none")
    approximate = approximate.decode() if isinstance(approximate, bytes) else str(approximate)
    modes = {"none": "erf", "tanh": "tanh"}
    if approximate not in modes:
        r.refuse(f"approximate='{approximate}' is not one of none, tanh")
    r.emit("Gelu", [node.input[0]], [node.output[0]], name,
           {"approximation_mode": modes[approximate]})


@translates("Elu")
def _elu(r, node, name: str, attrs: dict) -> None:
    r.emit("Elu", [node.input[0]], [node.output[0]], name,
           {"alpha": float_text(attrs.get("alpha", 1.0))})


def _renamed(ir_type: str):
    def translate(r, node, name: str, attrs: dict) -> None:
        if node.op_type in ("Neg", "Abs") and try_shape_arithmetic(r, node, name) or \
                try_fold_float_constants(r, node):
            return
        r.emit(ir_type, [node.input[0]], [node.output[0]], name)
    translate.__name__ = f"_renamed_{ir_type}"
    return translate


def _binary(ir_type: str):
    """Numpy-broadcasting elementwise op; variadic ones (Sum, Max, Min) as a chain of pairs,
    one input as the input itself; opset < 7 `broadcast=1` lines B up first."""
    def translate(r, node, name: str, attrs: dict) -> None:
        inputs = list(node.input)
        if not attrs.get("broadcast") and node.op_type != "Pow" and \
                (try_shape_arithmetic(r, node, name) or try_fold_float_constants(r, node)):
            return
        if attrs.get("broadcast") and len(inputs) == 2:
            inputs[1] = legacy_broadcast(r, inputs[0], inputs[1], attrs.get("axis"), name)
        if len(inputs) == 1:
            r.alias[node.output[0]] = inputs[0]
            return
        acc = inputs[0]
        for k, other in enumerate(inputs[1:], 1):
            out = node.output[0] if k == len(inputs) - 1 else f"{name}/{ir_type.lower()}{k}"
            r.emit(ir_type, [acc, other], [out], name if out == node.output[0] else out,
                   attrs={"auto_broadcast": "numpy"},
                   shapes=None if out == node.output[0] else [_broadcast(
                       r.known_shape(acc), r.known_shape(other))])
            acc = out
    translate.__name__ = f"_binary_{ir_type}"
    return translate


def _broadcast(a: tuple | None, b: tuple | None) -> tuple | None:
    """numpy broadcasting of two shapes (None where a dim or the whole shape is unknown)."""
    if a is None or b is None:
        return None
    rank = max(len(a), len(b))
    a, b = (1,) * (rank - len(a)) + tuple(a), (1,) * (rank - len(b)) + tuple(b)
    return tuple(y if x == 1 else x if y == 1 else (x if x == y else None) for x, y in zip(a, b))


for _onnx, _ir in UNARY.items():
    translates(_onnx)(_renamed(_ir))
for _onnx, _ir in BINARY.items():
    translates(_onnx)(_binary(_ir))


# -- activations with parameters -------------------------------------------------------------
@translates("Selu")
def _selu(r, node, name: str, attrs: dict) -> None:
    alpha = r.const(f"{name}/alpha", np.float32(attrs.get("alpha", 1.67326319217681884765625)))
    lam = r.const(f"{name}/lambda", np.float32(attrs.get("gamma", 1.05070102214813232421875)))
    r.emit("Selu", [node.input[0], alpha, lam], [node.output[0]], name)


@translates("HardSigmoid")
def _hard_sigmoid(r, node, name: str, attrs: dict) -> None:
    alpha = r.const(f"{name}/alpha", np.float32(attrs.get("alpha", 0.2)))
    beta = r.const(f"{name}/beta", np.float32(attrs.get("beta", 0.5)))
    r.emit("HardSigmoid", [node.input[0], alpha, beta], [node.output[0]], name)


@translates("Shrink")
def _shrink(r, node, name: str, attrs: dict) -> None:
    r.emit("Shrink", [node.input[0]], [node.output[0]], name,
           {"lambd": float_text(attrs.get("lambd", 0.5)),
            "bias": float_text(attrs.get("bias", 0.0))})


@translates("PRelu")
def _prelu(r, node, name: str, attrs: dict) -> None:
    # From opset 7 ONNX broadcasts the slope numpy-style (a 1-D slope meets the LAST axis);
    # before, a 1-D slope was per channel, as the IR reads it. So a constant 1-D slope of an
    # opset-7+ model is given its full rank, unless only the per-channel reading fits (old
    # exporters kept writing per-channel slopes).
    x, slope = node.input[0], node.input[1]
    folded, shape = r.folded(slope), r.shape_of(x)
    rank = len(shape)
    if folded is not None and folded.ndim == 1 and folded.size > 1 and rank > 1 and \
            r.opset.get("ai.onnx", 13) >= 7 and shape[-1] in (folded.size, None):
        slope = r.const(f"{name}/slope", folded.reshape([1] * (rank - 1) + [folded.size]))
    r.emit("PRelu", [x, slope], [node.output[0]], name)


@translates("Reciprocal")
def _reciprocal(r, node, name: str, attrs: dict) -> None:
    r.emit("Divide", [r.const(f"{name}/one", np.float32(1)), node.input[0]], [node.output[0]],
           name, {"auto_broadcast": "numpy"})


# -- reductions and means -------------------------------------------------------------------
def _reduce_axes(r, node, attrs: dict, rank: int | None) -> list[int] | None:
    """The axes of an ONNX Reduce* (attribute before opset 13/18, input 1 after), normalized;
    None = no reduction at all (noop_with_empty_axes with ReduceSum/Mean/Max/Min: the input
    itself); [] = over no axis, which still applies a ReduceL1's abs or a ReduceLogSum's log,
    as ONNX's reference does."""
    noop = bool(attrs.get("noop_with_empty_axes", 0))
    if "axes" in attrs:
        axes = list(attrs["axes"])
    elif optional_input(node, 1):
        axes = [int(a) for a in const_input(r, node, 1, "axes").reshape(-1)]
    else:
        axes = []
    if not axes:
        if noop:
            return None if node.op_type in _PLAIN_REDUCE else []
        if rank is None:
            r.refuse("reducing over all axes needs the input's rank")
        return list(range(rank))
    if rank is None:
        if any(a < 0 for a in axes):
            r.refuse("negative axes need the input's rank")
        return sorted(set(axes))
    return sorted({axis_in(r, a, rank, "axes entry") for a in axes})


# the reductions whose reduction over no axis is the input itself
_PLAIN_REDUCE = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin")


def _late_axes(r, node, attrs: dict, rank: int | None, name: str) -> str:
    """Axes fed as a graph input (or computed from shapes): normalized by a fold-only node
    once the plan's value is known; returns the value name of the axes the IR ops read."""
    axes = need_compile_time(r, node, 1, "axes")
    if rank is None:
        r.refuse(f"axes given as an input ('{axes}') need the rank of '{node.input[0]}', which "
                 f"shape inference did not give")
    out = f"{name}/axes"
    fold_or_defer(r, "ReduceAxes", [axes], [out], f"{name}/axes_of",
                  {"rank": rank, "noop": int(attrs.get("noop_with_empty_axes", 0))}, fed=True)
    return out


def _reduce_shape(shape, axes, keep: bool):
    if not shape:
        return None
    return tuple(1 if i in axes else d for i, d in enumerate(shape) if keep or i not in axes)


@translates("ReduceMean", "ReduceSum", "ReduceMax", "ReduceProd", "ReduceMin", "ReduceL1",
             "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")
def _reduce(r, node, name: str, attrs: dict) -> None:
    """Mean/Sum/Max/Min/Prod are built-ins; the others are built from them and elementwise
    ops."""
    x, out, op = node.input[0], node.output[0], node.op_type
    shape = r.known_shape(x)
    rank = len(shape) if shape is not None else None
    keep = bool(attrs.get("keepdims", 1))
    keep_text = "true" if keep else "false"
    if "axes" not in attrs and optional_input(node, 1) and r.folded(node.input[1]) is None:
        ax, axes = _late_axes(r, node, attrs, rank, name), None   # known per plan
    else:
        axes = _reduce_axes(r, node, attrs, rank)
        if axes is None:
            r.alias[out] = r.alias.get(x, x)
            return
        ax = r.const(f"{name}/axes", np.array(axes, np.int64))

    def reduce(kind: str, src: str, dst: str, keep_dims: str = keep_text) -> str:
        shp = None if axes is None else _reduce_shape(shape, axes, keep_dims == "true")
        if dst != out:
            return intermediate(r, kind, [src, ax], dst, shp, {"keep_dims": keep_dims})
        return r.emit(kind, [src, ax], [out], name, {"keep_dims": keep_dims}).name

    def unary(kind: str, src: str, dst: str, shp) -> str:
        if dst == out:
            r.emit(kind, [src], [out], name)
            return out
        return intermediate(r, kind, [src], dst, shp)

    if op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"):
        reduce(op, x, out)
    elif op == "ReduceL1":
        reduce("ReduceSum", unary("Abs", x, f"{name}/abs", shape), out)
    elif op in ("ReduceL2", "ReduceSumSquare"):
        sq = intermediate(r, "Multiply", [x, x], f"{name}/square", shape,
                          {"auto_broadcast": "numpy"})
        if op == "ReduceSumSquare":
            reduce("ReduceSum", sq, out)
        else:
            unary("Sqrt", reduce("ReduceSum", sq, f"{name}/sum"), out, None)
    elif op == "ReduceLogSum":
        unary("Log", reduce("ReduceSum", x, f"{name}/sum"), out, None)
    else:                                        # LogSumExp, shifted by the max for range
        m = reduce("ReduceMax", x, f"{name}/max", "true")
        d = intermediate(r, "Subtract", [x, m], f"{name}/shifted", shape,
                         {"auto_broadcast": "numpy"})
        e = unary("Exp", d, f"{name}/exp", shape)
        if keep:
            s = reduce("ReduceSum", e, f"{name}/sum", "true")
            lg = unary("Log", s, f"{name}/log", None if axes is None else keep_axes(shape, axes))
            r.emit("Add", [lg, m], [out], name, {"auto_broadcast": "numpy"})
        else:          # the sum and the max again without the reduced dims (no Squeeze: its
            # empty axes would remove every 1, where a reduction over no axis keeps them)
            s = reduce("ReduceSum", e, f"{name}/sum", "false")
            lg = unary("Log", s, f"{name}/log", None)
            m0 = reduce("ReduceMax", x, f"{name}/max0", "false")
            r.emit("Add", [lg, m0], [out], name, {"auto_broadcast": "numpy"})


@translates("Mean")
def _mean(r, node, name: str, attrs: dict) -> None:
    inputs = [i for i in node.input if i]
    if len(inputs) == 1:
        r.alias[node.output[0]] = r.alias.get(inputs[0], inputs[0])
        return
    acc = inputs[0]
    for k, other in enumerate(inputs[1:], 1):
        shape = _broadcast_shapes(r.shape_of(acc), r.shape_of(other))
        acc = intermediate(r, "Add", [acc, other], f"{name}/sum{k}", shape,
                           {"auto_broadcast": "numpy"})
    r.emit("Multiply", [acc, r.const(f"{name}/inv_n", np.float32(1.0 / len(inputs)))],
           [node.output[0]], name, {"auto_broadcast": "numpy"})


def _broadcast_shapes(a: tuple, b: tuple):
    if not a or not b:
        return None
    rank = max(len(a), len(b))
    a, b = (1,) * (rank - len(a)) + tuple(a), (1,) * (rank - len(b)) + tuple(b)
    return tuple(y if x == 1 else x if y == 1 else (x if x == y else None) for x, y in zip(a, b))
