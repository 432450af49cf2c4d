"""ONNX -> IR op translations for the ONNX reader (graph/onnx_reader.py).

Each translation is f(reader, node, name, attrs): it reads the ONNX node (attrs decoded by
onnx.helper) and emits IR nodes through reader.emit / reader.const, so the IR ops and attribute
text the built-in ops read come out (ints "1, 1", floats as the shortest float32 text).
Constant inputs are folded where the IR wants a different layout (grouped weights, biases
reshaped to 1,C,1,1, BatchNorm turned into one scale and one shift).
"""
from __future__ import annotations

import numpy as np

AUTO_PAD = {"NOTSET": "explicit", "": "explicit", "SAME_UPPER": "same_upper",
            "SAME_LOWER": "same_lower", "VALID": "valid"}
TRANSLATIONS: dict = {}     # ONNX op_type -> translation


def ints_text(values) -> str:
    return ", ".join(str(int(v)) for v in values)


def float_text(value) -> str:
    """Shortest text that reads back as the same float32 (3e-08, not 2.9999999e-08)."""
    return str(np.float32(value))


def _translates(*op_types):
    def register(fn):
        for op in op_types:
            TRANSLATIONS[op] = fn
        return fn
    return register


def _spatial(attrs: dict, key: str, rank: int, default: int) -> list[int]:
    return list(attrs.get(key) or [default] * rank)


def _reshaped(r, value: str, shape: list[int], name: str) -> str:
    """`value` viewed with `shape`: folded when constant, else a Reshape node."""
    folded = r.folded(value)
    if folded is not None:
        return r.const(name, folded.reshape(shape))
    r.emit("Reshape", [value, r.const(f"{name}/shape", np.array(shape, np.int64))], [name], name,
           attrs={"special_zero": "false"}, shapes=[tuple(shape)])
    return name


@_translates("Conv")
def _conv(r, node, name: str, attrs: dict) -> None:
    x, w = node.input[0], node.input[1]
    wshape = r.shape_of(w)
    if len(wshape) < 3 or any(d is None for d in wshape):
        r.refuse(f"the weights '{w}' need a known shape, found {list(wshape)}")
    k = len(wshape) - 2
    pads = _spatial(attrs, "pads", 2 * k, 0)
    auto_pad = attrs.get("auto_pad", b"NOTSET").decode()
    ir = {"strides": ints_text(_spatial(attrs, "strides", k, 1)),
          "dilations": ints_text(_spatial(attrs, "dilations", k, 1)),
          "pads_begin": ints_text(pads[:k]), "pads_end": ints_text(pads[k:]),
          "auto_pad": AUTO_PAD.get(auto_pad, "explicit")}
    group = int(attrs.get("group", 1))
    has_bias = len(node.input) > 2 and node.input[2]
    out = f"{node.output[0]}/conv" if has_bias else node.output[0]
    out_shape = [r.shape_of(node.output[0])] if has_bias else None
    if group == 1:
        r.emit("Convolution", [x, w], [out], name if not has_bias else out, ir, shapes=out_shape)
    else:
        grouped = [group, wshape[0] // group] + list(wshape[1:])
        wg = _reshaped(r, w, grouped, f"{name}/grouped_weights")
        r.emit("GroupConvolution", [x, wg], [out], name if not has_bias else out, ir,
               shapes=out_shape)
    if has_bias:
        rank = len(r.shape_of(out)) or k + 2
        bias = _reshaped(r, node.input[2], [1, wshape[0]] + [1] * (rank - 2), f"{name}/bias")
        r.emit("Add", [out, bias], [node.output[0]], name, {"auto_broadcast": "numpy"})


def _pool_attrs(r, attrs: dict) -> dict[str, str]:
    kernel = list(attrs.get("kernel_shape") or [])
    if not kernel:
        r.refuse("kernel_shape is required")
    k = len(kernel)
    pads = _spatial(attrs, "pads", 2 * k, 0)
    return {"strides": ints_text(_spatial(attrs, "strides", k, 1)),
            "pads_begin": ints_text(pads[:k]), "pads_end": ints_text(pads[k:]), "kernel": ints_text(kernel),
            "rounding_type": "ceil" if attrs.get("ceil_mode", 0) else "floor",
            "auto_pad": AUTO_PAD.get(attrs.get("auto_pad", b"NOTSET").decode(), "explicit")}


@_translates("MaxPool")
def _max_pool(r, node, name: str, attrs: dict) -> None:
    if len(node.output) > 1 and node.output[1] and r.uses.get(node.output[1]):
        r.refuse("the Indices output of MaxPool is not supported")
    ir = _pool_attrs(r, attrs)
    dilations = list(attrs.get("dilations") or [])
    version = "opset1"
    if any(d != 1 for d in dilations):
        ir["dilations"], version = ints_text(dilations), "opset8"
    r.emit("MaxPool", [node.input[0]], [node.output[0]], name, ir, version=version)


@_translates("AveragePool")
def _avg_pool(r, node, name: str, attrs: dict) -> None:
    ir = _pool_attrs(r, attrs)
    # ONNX counts padding only when asked; the IR says the opposite way round
    ir["exclude-pad"] = "false" if attrs.get("count_include_pad", 0) else "true"
    r.emit("AvgPool", [node.input[0]], [node.output[0]], name, ir)


@_translates("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(r, node, name: str, attrs: dict) -> None:
    rank = len(r.shape_of(node.input[0]))
    if rank < 3:
        r.refuse(f"the input needs a known rank of 3 or more, found shape "
                 f"{list(r.shape_of(node.input[0]))}")
    axes = r.const(f"{name}/axes", np.arange(2, rank, dtype=np.int64))
    ir_type = "ReduceMean" if node.op_type == "GlobalAveragePool" else "ReduceMax"
    r.emit(ir_type, [node.input[0], axes], [node.output[0]], name, {"keep_dims": "true"})


@_translates("Gemm")
def _gemm(r, node, name: str, attrs: dict) -> None:
    """Y = alpha * A' B' + beta * C."""
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    a, b = node.input[0], node.input[1]
    c = node.input[2] if len(node.input) > 2 and node.input[2] else None
    ta, tb = bool(attrs.get("transA", 0)), bool(attrs.get("transB", 0))
    out = node.output[0]
    sa, sb = r.shape_of(a), r.shape_of(b)
    mm_shape = ((sa[1] if ta else sa[0]) if len(sa) == 2 else None,
                (sb[0] if tb else sb[1]) if len(sb) == 2 else None)
    steps = (["scale"] if alpha != 1.0 else []) + (["bias"] if c else [])
    current = out if not steps else f"{name}/matmul"
    r.emit("MatMul", [a, b], [current], name if not steps else current,
           {"transpose_a": "true" if ta else "false", "transpose_b": "true" if tb else "false"},
           shapes=None if not steps else [mm_shape])
    if alpha != 1.0:
        nxt = out if steps[-1] == "scale" else f"{name}/alpha"
        r.emit("Multiply", [current, r.const(f"{name}/alpha_value", np.float32(alpha))], [nxt],
               name if nxt == out else nxt, {"auto_broadcast": "numpy"},
               shapes=None if nxt == out else [mm_shape])
        current = nxt
    if c:
        if beta != 1.0:
            folded = r.folded(c)
            if folded is not None:
                c = r.const(f"{name}/beta_c", (folded * beta).astype(folded.dtype))
            else:
                r.emit("Multiply", [c, r.const(f"{name}/beta_value", np.float32(beta))],
                       [f"{name}/beta_c"], f"{name}/beta_c", {"auto_broadcast": "numpy"},
                       shapes=[r.shape_of(c)])
                c = f"{name}/beta_c"
        r.emit("Add", [current, c], [out], name, {"auto_broadcast": "numpy"})


@_translates("MatMul")
def _matmul(r, node, name: str, attrs: dict) -> None:
    r.emit("MatMul", [node.input[0], node.input[1]], [node.output[0]], name,
           {"transpose_a": "false", "transpose_b": "false"})


@_translates("BatchNormalization")
def _batch_norm(r, node, name: str, attrs: dict) -> None:
    """Inference form, folded: y = x * a + b, a = scale / sqrt(var + eps), b = B - mean * a."""
    if any(o and r.uses.get(o) for o in node.output[1:]):
        r.refuse("training-mode outputs (running mean/var) are not supported")
    params = [r.folded(v) for v in node.input[1:5]]
    if any(p is None for p in params):
        r.refuse("scale, B, mean and var must be constants (initializers) to be folded")
    scale, bias, mean, var = (p.astype(np.float64) for p in params)
    eps = float(attrs.get("epsilon", 1e-5))
    a = scale / np.sqrt(var + eps)
    b = bias - mean * a
    rank = len(r.shape_of(node.input[0])) or 4
    shape = [1, a.size] + [1] * (rank - 2)
    mul = f"{name}/scaled"
    r.emit("Multiply", [node.input[0], r.const(f"{name}/scale", a.astype(np.float32).reshape(
        shape))], [mul], mul, {"auto_broadcast": "numpy"}, shapes=[r.shape_of(node.output[0])])
    r.emit("Add", [mul, r.const(f"{name}/shift", b.astype(np.float32).reshape(shape))],
           [node.output[0]], name, {"auto_broadcast": "numpy"})


@_translates("LRN")
def _lrn(r, node, name: str, attrs: dict) -> None:
    # ONNX: x / (bias + alpha / size * sum(x^2))^beta. The IR's LRN divides alpha by
    # size ** len(axes); with axes = [1] that is the same formula, so alpha is kept as written
    # (OpenVINO's own ONNX importer does the same).
    if "size" not in attrs:
        r.refuse("attribute 'size' is required")
    axes = r.const(f"{name}/axes", np.array([1], np.int64))
    r.emit("LRN", [node.input[0], axes], [node.output[0]], name, {
        "alpha": float_text(attrs.get("alpha", 1e-4)), "beta": float_text(attrs.get("beta", 0.75)),
        "bias": float_text(attrs.get("bias", 1.0)), "size": str(int(attrs["size"]))})


@_translates("Softmax")
def _softmax(r, node, name: str, attrs: dict) -> None:
    shape = r.shape_of(node.input[0])
    rank = len(shape)
    opset = r.opset.get("ai.onnx", 13)
    axis = int(attrs.get("axis", 1 if opset < 13 else -1))
    if rank:
        axis %= rank
    elif axis < 0:
        r.refuse("a negative axis needs the input's rank, which shape inference did not give")
    if opset >= 13 or axis == rank - 1:
        r.emit("SoftMax", [node.input[0]], [node.output[0]], name, {"axis": str(axis)})
        return
    # opset < 13: softmax over the input flattened to 2-D at `axis`, then the shape restored
    if any(d is None for d in shape):
        r.refuse(f"opset-{opset} Softmax flattens at axis {axis}; that needs a static input "
                 f"shape, found {list(shape)}")
    flat = [int(np.prod(shape[:axis], dtype=np.int64)), int(np.prod(shape[axis:], dtype=np.int64))]
    flat_in = _reshaped(r, node.input[0], flat, f"{name}/flat")
    r.emit("SoftMax", [flat_in], [f"{name}/flat_softmax"], f"{name}/flat_softmax",
           {"axis": "1"}, shapes=[tuple(flat)])
    r.emit("Reshape", [f"{name}/flat_softmax", r.const(f"{name}/shape", np.array(shape, np.int64))],
           [node.output[0]], name, {"special_zero": "false"})


@_translates("Concat")
def _concat(r, node, name: str, attrs: dict) -> None:
    axis = int(attrs.get("axis", 1))
    rank = len(r.shape_of(node.input[0]))
    if axis < 0 and rank:
        axis += rank
    r.emit("Concat", list(node.input), [node.output[0]], name, {"axis": str(axis)})


@_translates("Reshape")
def _reshape(r, node, name: str, attrs: dict) -> None:
    inputs = list(node.input)
    if len(inputs) == 1:                       # opset < 5: the shape is an attribute
        inputs.append(r.const(f"{name}/shape", np.array(attrs.get("shape", []), np.int64)))
    special_zero = "false" if attrs.get("allowzero", 0) else "true"
    r.emit("Reshape", inputs[:2], [node.output[0]], name, {"special_zero": special_zero})


@_translates("Flatten")
def _flatten(r, node, name: str, attrs: dict) -> None:
    shape = r.shape_of(node.input[0])
    axis = int(attrs.get("axis", 1))
    if axis < 0:
        axis += len(shape)
    if shape and all(d is not None for d in shape):
        target = [int(np.prod(shape[:axis], dtype=np.int64)),
                  int(np.prod(shape[axis:], dtype=np.int64))]
        special_zero = "false"
    elif axis == 1:
        target, special_zero = [0, -1], "true"  # keep dim 0 as it comes, fold the rest
    else:
        r.refuse(f"Flatten at axis {axis} needs a static input shape, found {list(shape)}")
    r.emit("Reshape", [node.input[0], r.const(f"{name}/shape", np.array(target, np.int64))],
           [node.output[0]], name, {"special_zero": special_zero})


@_translates("Transpose")
def _transpose(r, node, name: str, attrs: dict) -> None:
    perm = attrs.get("perm")
    if perm is None:
        rank = len(r.shape_of(node.input[0]))
        if not rank:
            r.refuse("Transpose without 'perm' needs the input's rank")
        perm = list(reversed(range(rank)))
    order = r.const(f"{name}/order", np.array(perm, np.int64))
    r.emit("Transpose", [node.input[0], order], [node.output[0]], name)


@_translates("Unsqueeze", "Squeeze")
def _squeeze(r, node, name: str, attrs: dict) -> None:
    inputs = [i for i in node.input if i]
    if len(inputs) == 1 and "axes" in attrs:   # opset < 13: axes is an attribute
        inputs.append(r.const(f"{name}/axes", np.array(attrs["axes"], np.int64)))
    r.emit(node.op_type, inputs, [node.output[0]], name)


@_translates("Dropout", "Identity")
def _identity(r, node, name: str, attrs: dict) -> None:
    if len(node.output) > 1 and node.output[1] and r.uses.get(node.output[1]):
        r.refuse("the mask output of Dropout is not supported (inference has no mask)")
    r.alias[node.output[0]] = r.alias.get(node.input[0], node.input[0])


@_translates("Constant")
def _constant(r, node, name: str, attrs: dict) -> None:
    if "value" in attrs:
        r.consts[node.output[0]] = r.tensor(attrs["value"], f"the value of {r.where}")
        return
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32),
                       ("value_int", np.int64), ("value_ints", np.int64)):
        if key in attrs:
            r.consts[node.output[0]] = np.array(attrs[key], dtype)
            return
    r.refuse(f"a Constant needs one of value, valuefloat_text(s), value_int(s); found "
             f"{', '.join(attrs) or 'none'}")


@_translates("ConstantOfShape")
def _constant_of_shape(r, node, name: str, attrs: dict) -> None:
    shape = r.folded(node.input[0])
    if shape is None:
        r.refuse("only a constant shape is supported (the result is folded into a Const)")
    fill = r.tensor(attrs["value"], "the fill value") if "value" in attrs else np.float32(0)
    r.consts[node.output[0]] = np.full(tuple(int(d) for d in shape), np.asarray(fill).ravel()[0]
                                       if np.ndim(fill) else fill, dtype=np.asarray(fill).dtype)


@_translates("Clip")
def _clip(r, node, name: str, attrs: dict) -> None:
    lo, hi = attrs.get("min", -np.inf), attrs.get("max", np.inf)
    for k, slot in ((1, "min"), (2, "max")):   # opset 11+: bounds are inputs
        if len(node.input) > k and node.input[k]:
            value = r.folded(node.input[k])
            if value is None:
                r.refuse(f"the '{slot}' input must be a constant")
            lo, hi = (float(value), hi) if slot == "min" else (lo, float(value))
    r.emit("Clamp", [node.input[0]], [node.output[0]], name,
           {"min": float_text(max(lo, -3.4e38)), "max": float_text(min(hi, 3.4e38))})


@_translates("LeakyRelu")
def _leaky_relu(r, node, name: str, attrs: dict) -> None:
    slope = r.const(f"{name}/slope", np.array([attrs.get("alpha", 0.01)], np.float32))
    r.emit("PRelu", [node.input[0], slope], [node.output[0]], name)


@_translates("Elu")
def _elu(r, node, name: str, attrs: dict) -> None:
    r.emit("Elu", [node.input[0]], [node.output[0]], name,
           {"alpha": float_text(attrs.get("alpha", 1.0))})


# -- helpers for the translations below ------------------------------------------------------
def _input(node, k: int) -> str | None:
    """Input k of the node, or None when absent (past the end or an empty name)."""
    return node.input[k] if len(node.input) > k and node.input[k] else None


def _const_input(r, node, k: int, what: str) -> np.ndarray:
    value = r.folded(node.input[k])
    if value is None:
        r.refuse(f"the {what} (input {k}) must be a constant (an initializer or folded "
                 f"Constant), as the built-in op bakes it into its program")
    return value


def _rank(r, value: str, why: str) -> int:
    shape = r.shape_of(value)
    if not shape:
        r.refuse(f"{why} needs the rank of '{value}', which shape inference did not give")
    return len(shape)


def _tmp(r, op_type: str, inputs: list[str], name: str, shape, attrs=None) -> str:
    """An intermediate IR node with one output named `name`, of `shape` (None = unknown)."""
    r.emit(op_type, inputs, [name], name, attrs=attrs, shapes=[shape])
    return name


def _keep_axes(shape, axes) -> tuple | None:
    """`shape` reduced over `axes` with the reduced dims kept as 1."""
    if shape is None or not shape:
        return None
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


def _renamed(ir_type: str):
    def translate(r, node, name: str, attrs: dict) -> None:
        r.emit(ir_type, [node.input[0]], [node.output[0]], name)
    return translate


for _onnx, _ir in (("Softplus", "SoftPlus"), ("Softsign", "SoftSign"), ("Sign", "Sign"),
                   ("HardSwish", "HSwish"), ("Mish", "Mish")):
    TRANSLATIONS[_onnx] = _renamed(_ir)


# -- activations with parameters -------------------------------------------------------------
@_translates("Selu")
def _selu(r, node, name: str, attrs: dict) -> None:
    alpha = r.const(f"{name}/alpha", np.float32(attrs.get("alpha", 1.67326319217681884765625)))
    lam = r.const(f"{name}/lambda", np.float32(attrs.get("gamma", 1.05070102214813232421875)))
    r.emit("Selu", [node.input[0], alpha, lam], [node.output[0]], name)


@_translates("HardSigmoid")
def _hard_sigmoid(r, node, name: str, attrs: dict) -> None:
    alpha = r.const(f"{name}/alpha", np.float32(attrs.get("alpha", 0.2)))
    beta = r.const(f"{name}/beta", np.float32(attrs.get("beta", 0.5)))
    r.emit("HardSigmoid", [node.input[0], alpha, beta], [node.output[0]], name)


@_translates("Shrink")
def _shrink(r, node, name: str, attrs: dict) -> None:
    r.emit("Shrink", [node.input[0]], [node.output[0]], name,
           {"lambd": float_text(attrs.get("lambd", 0.5)), "bias": float_text(attrs.get("bias", 0.0))})


@_translates("PRelu")
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


@_translates("Reciprocal")
def _reciprocal(r, node, name: str, attrs: dict) -> None:
    r.emit("Divide", [r.const(f"{name}/one", np.float32(1)), node.input[0]], [node.output[0]],
           name, {"auto_broadcast": "numpy"})


# -- reductions and softmax relatives --------------------------------------------------------
def _reduce_axes(r, node, attrs: dict, rank: int | None) -> list[int] | None:
    """The axes of an ONNX Reduce* (attribute before opset 13/18, input 1 after), normalized;
    None = no reduction (noop_with_empty_axes)."""
    if "axes" in attrs:
        axes = list(attrs["axes"])
    elif _input(node, 1):
        axes = [int(a) for a in _const_input(r, node, 1, "axes").reshape(-1)]
    else:
        axes = []
    if not axes:
        if attrs.get("noop_with_empty_axes", 0):
            return None
        if rank is None:
            r.refuse("reducing over all axes needs the input's rank")
        return list(range(rank))
    if any(a < 0 for a in axes):
        if rank is None:
            r.refuse("negative axes need the input's rank")
        axes = [a % rank for a in axes]
    return sorted(set(axes))


def _reduce_shape(shape, axes, keep: bool):
    if not shape:
        return None
    return tuple(1 if i in axes else d for i, d in enumerate(shape) if keep or i not in axes)


@_translates("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceL1", "ReduceL2",
             "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")
def _reduce(r, node, name: str, attrs: dict) -> None:
    """Mean/Sum/Max are built-ins; the others are built from them and elementwise ops."""
    x, out, op = node.input[0], node.output[0], node.op_type
    shape = r.shape_of(x)
    axes = _reduce_axes(r, node, attrs, len(shape) if shape else None)
    if axes is None:
        r.alias[out] = r.alias.get(x, x)
        return
    keep = bool(attrs.get("keepdims", 1))
    keep_text = "true" if keep else "false"
    ax = r.const(f"{name}/axes", np.array(axes, np.int64))

    def reduce(kind: str, src: str, dst: str, keep_dims: str = keep_text) -> str:
        shp = _reduce_shape(shape, axes, keep_dims == "true")
        return _tmp(r, kind, [src, ax], dst, shp, {"keep_dims": keep_dims}) if dst != out else \
            r.emit(kind, [src, ax], [out], name, {"keep_dims": keep_dims}).name

    def unary(kind: str, src: str, dst: str, shp) -> str:
        if dst == out:
            r.emit(kind, [src], [out], name)
            return out
        return _tmp(r, kind, [src], dst, shp)

    if op in ("ReduceMean", "ReduceSum", "ReduceMax"):
        reduce(op, x, out)
    elif op == "ReduceMin":                      # min(x) = -max(-x)
        neg = unary("Negative", x, f"{name}/neg", shape)
        unary("Negative", reduce("ReduceMax", neg, f"{name}/max"), out, None)
    elif op == "ReduceL1":
        reduce("ReduceSum", unary("Abs", x, f"{name}/abs", shape), out)
    elif op in ("ReduceL2", "ReduceSumSquare"):
        sq = _tmp(r, "Multiply", [x, x], f"{name}/square", shape, {"auto_broadcast": "numpy"})
        if op == "ReduceSumSquare":
            reduce("ReduceSum", sq, out)
        else:
            unary("Sqrt", reduce("ReduceSum", sq, f"{name}/sum"), out, None)
    elif op == "ReduceLogSum":
        unary("Log", reduce("ReduceSum", x, f"{name}/sum"), out, None)
    else:                                        # LogSumExp, shifted by the max for range
        m = reduce("ReduceMax", x, f"{name}/max", "true")
        d = _tmp(r, "Subtract", [x, m], f"{name}/shifted", shape, {"auto_broadcast": "numpy"})
        e = unary("Exp", d, f"{name}/exp", shape)
        s = reduce("ReduceSum", e, f"{name}/sum", "true")
        lg = unary("Log", s, f"{name}/log", _keep_axes(shape, axes))
        if keep:
            r.emit("Add", [lg, m], [out], name, {"auto_broadcast": "numpy"})
        else:
            summed = _tmp(r, "Add", [lg, m], f"{name}/lse", _keep_axes(shape, axes),
                          {"auto_broadcast": "numpy"})
            r.emit("Squeeze", [summed, ax], [out], name)


def _softmax_axes(r, node, attrs: dict) -> tuple[list[int], tuple]:
    """Softmax-family axes: opset < 13 flattens to 2-D at `axis` (= all axes from it on)."""
    shape = r.shape_of(node.input[0])
    rank = _rank(r, node.input[0], node.op_type)
    opset = r.opset.get("ai.onnx", 13)
    axis = int(attrs.get("axis", 1 if opset < 13 else -1)) % rank
    return (list(range(axis, rank)) if opset < 13 else [axis]), shape


@_translates("LogSoftmax")
def _log_softmax(r, node, name: str, attrs: dict) -> None:
    """x - max - log(sum(exp(x - max))): exact where log(softmax) would underflow to -inf."""
    axes, shape = _softmax_axes(r, node, attrs)
    ax = r.const(f"{name}/axes", np.array(axes, np.int64))
    kept = _keep_axes(shape, axes)
    m = _tmp(r, "ReduceMax", [node.input[0], ax], f"{name}/max", kept, {"keep_dims": "true"})
    d = _tmp(r, "Subtract", [node.input[0], m], f"{name}/shifted", shape,
             {"auto_broadcast": "numpy"})
    e = _tmp(r, "Exp", [d], f"{name}/exp", shape)
    s = _tmp(r, "ReduceSum", [e, ax], f"{name}/sum", kept, {"keep_dims": "true"})
    lg = _tmp(r, "Log", [s], f"{name}/log", kept)
    r.emit("Subtract", [d, lg], [node.output[0]], name, {"auto_broadcast": "numpy"})


@_translates("InstanceNormalization")
def _instance_norm(r, node, name: str, attrs: dict) -> None:
    """(x - mean) / sqrt(var + eps) * scale + B over the spatial axes of each (n, c)."""
    x = node.input[0]
    shape = r.shape_of(x)
    rank = _rank(r, x, "InstanceNormalization")
    ax = r.const(f"{name}/axes", np.arange(2, rank, dtype=np.int64))
    kept = _keep_axes(shape, range(2, rank))
    per_channel = [-1] + [1] * (rank - 2)
    scale = _reshaped(r, node.input[1], per_channel, f"{name}/scale")
    bias = _reshaped(r, node.input[2], per_channel, f"{name}/bias")
    eps = r.const(f"{name}/eps", np.float32(attrs.get("epsilon", 1e-5)))
    nb = {"auto_broadcast": "numpy"}
    mean = _tmp(r, "ReduceMean", [x, ax], f"{name}/mean", kept, {"keep_dims": "true"})
    d = _tmp(r, "Subtract", [x, mean], f"{name}/centered", shape, nb)
    sq = _tmp(r, "Multiply", [d, d], f"{name}/square", shape, nb)
    var = _tmp(r, "ReduceMean", [sq, ax], f"{name}/var", kept, {"keep_dims": "true"})
    std = _tmp(r, "Sqrt", [_tmp(r, "Add", [var, eps], f"{name}/var_eps", kept, nb)],
               f"{name}/std", kept)
    n = _tmp(r, "Divide", [d, std], f"{name}/normalized", shape, nb)
    scaled = _tmp(r, "Multiply", [n, scale], f"{name}/scaled", shape, nb)
    r.emit("Add", [scaled, bias], [node.output[0]], name, nb)


@_translates("Mean")
def _mean(r, node, name: str, attrs: dict) -> None:
    inputs = [i for i in node.input if i]
    if len(inputs) == 1:
        r.alias[node.output[0]] = r.alias.get(inputs[0], inputs[0])
        return
    acc = inputs[0]
    for k, other in enumerate(inputs[1:], 1):
        shape = _broadcast_shapes(r.shape_of(acc), r.shape_of(other))
        acc = _tmp(r, "Add", [acc, other], f"{name}/sum{k}", shape, {"auto_broadcast": "numpy"})
    r.emit("Multiply", [acc, r.const(f"{name}/inv_n", np.float32(1.0 / len(inputs)))],
           [node.output[0]], name, {"auto_broadcast": "numpy"})


def _broadcast_shapes(a: tuple, b: tuple):
    if not a or not b:
        return None
    rank = max(len(a), len(b))
    a, b = (1,) * (rank - len(a)) + tuple(a), (1,) * (rank - len(b)) + tuple(b)
    return tuple(y if x == 1 else x if y == 1 else (x if x == y else None) for x, y in zip(a, b))


# -- tensor plumbing -------------------------------------------------------------------------
@_translates("Pad")
def _pad(r, node, name: str, attrs: dict) -> None:
    mode = attrs.get("mode", b"constant").decode()
    if mode not in ("constant", "reflect", "edge"):
        r.refuse(f"Pad mode '{mode}' is not supported; supported: constant, reflect, edge")
    x = node.input[0]
    if "pads" in attrs:                           # opset < 11
        pads, value = list(attrs["pads"]), np.float32(attrs.get("value", 0.0))
    else:
        pads = [int(p) for p in _const_input(r, node, 1, "pads").reshape(-1)]
        value = _const_input(r, node, 2, "constant_value").reshape(-1)[0] if _input(node, 2) \
            else None
    rank = _rank(r, x, "Pad")
    if _input(node, 3):                           # opset 18: pads only for some axes
        axes = [int(a) % rank for a in _const_input(r, node, 3, "axes").reshape(-1)]
        full = [0] * (2 * rank)
        for k, a in enumerate(axes):
            full[a], full[rank + a] = pads[k], pads[len(axes) + k]
        pads = full
    if len(pads) != 2 * rank:
        r.refuse(f"pads has {len(pads)} values; the input of rank {rank} needs {2 * rank}")
    inputs = [x, r.const(f"{name}/pads_begin", np.array(pads[:rank], np.int64)),
              r.const(f"{name}/pads_end", np.array(pads[rank:], np.int64))]
    if mode == "constant" and value is not None:
        inputs.append(r.const(f"{name}/pad_value", np.asarray(value)))
    r.emit("Pad", inputs, [node.output[0]], name, {"pad_mode": mode}, version="opset12")


@_translates("Gather")
def _gather(r, node, name: str, attrs: dict) -> None:
    axis = r.const(f"{name}/axis", np.array(int(attrs.get("axis", 0)), np.int64))
    data, idx = r.folded(node.input[0]), r.folded(node.input[1])
    if data is not None and idx is not None:      # shape arithmetic: fold
        r.consts[node.output[0]] = np.take(data, idx, axis=int(attrs.get("axis", 0)))
        return
    r.emit("Gather", [node.input[0], node.input[1], axis], [node.output[0]], name,
           {"batch_dims": "0"}, version="opset8")


@_translates("Slice")
def _slice(r, node, name: str, attrs: dict) -> None:
    if "starts" in attrs:                         # opset < 10
        starts, ends = list(attrs["starts"]), list(attrs["ends"])
        axes = list(attrs.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts = [int(v) for v in _const_input(r, node, 1, "starts").reshape(-1)]
        ends = [int(v) for v in _const_input(r, node, 2, "ends").reshape(-1)]
        axes = [int(v) for v in _const_input(r, node, 3, "axes").reshape(-1)] if _input(node, 3) \
            else list(range(len(starts)))
        steps = [int(v) for v in _const_input(r, node, 4, "steps").reshape(-1)] \
            if _input(node, 4) else [1] * len(starts)
    data = r.folded(node.input[0])
    if data is not None:                          # shape arithmetic: fold
        items = [slice(None)] * data.ndim
        for b, e, s, a in zip(starts, ends, steps, axes):
            items[a] = slice(b, e, s)
        r.consts[node.output[0]] = data[tuple(items)]
        return
    ints = lambda v, what: r.const(f"{name}/{what}", np.array(v, np.int64))  # noqa: E731
    r.emit("Slice", [node.input[0], ints(starts, "start"), ints(ends, "stop"),
                     ints(steps, "step"), ints(axes, "axes")], [node.output[0]], name,
           version="opset8")


@_translates("Split")
def _split(r, node, name: str, attrs: dict) -> None:
    """Split into Slice nodes, one per output."""
    x = node.input[0]
    shape = r.shape_of(x)
    rank = _rank(r, x, "Split")
    axis = int(attrs.get("axis", 0)) % rank
    if "split" in attrs:
        sizes = list(attrs["split"])
    elif _input(node, 1):
        sizes = [int(v) for v in _const_input(r, node, 1, "split").reshape(-1)]
    else:
        if shape[axis] is None:
            r.refuse(f"an even split needs the size of axis {axis}, found shape {list(shape)}")
        n = len(node.output)
        chunk = -(-shape[axis] // n)              # opset 18: the last part may be smaller
        sizes = [min(chunk, shape[axis] - k * chunk) for k in range(n)]
    if len(sizes) != len(node.output):
        r.refuse(f"split has {len(sizes)} sizes for {len(node.output)} outputs")
    start = 0
    for k, (size, out) in enumerate(zip(sizes, node.output)):
        ints = lambda v, what: r.const(f"{name}/{what}{k}", np.array(v, np.int64))  # noqa: E731
        if out:
            r.emit("Slice", [x, ints([start], "start"), ints([start + size], "stop"),
                             ints([1], "step"), ints([axis], "axes")], [out],
                   name if k == 0 else f"{name}/{k}", version="opset8")
        start += size


@_translates("Tile")
def _tile(r, node, name: str, attrs: dict) -> None:
    r.emit("Tile", [node.input[0], node.input[1]], [node.output[0]], name)


@_translates("Expand")
def _expand(r, node, name: str, attrs: dict) -> None:
    if r.folded(node.input[1]) is None:
        r.refuse(f"the shape (input 1, '{node.input[1]}') must be a constant: the network is "
                 f"compiled for static shapes, and this one is only known at run time")
    r.emit("Broadcast", [node.input[0], node.input[1]], [node.output[0]], name,
           {"mode": "bidirectional"}, version="opset3")


@_translates("Shape")
def _shape(r, node, name: str, attrs: dict) -> None:
    """Folded: the executor compiles for static shapes, so a known shape is a constant."""
    shape = r.shape_of(node.input[0])
    if not shape or any(d is None for d in shape):
        r.refuse(f"Shape of '{node.input[0]}' is folded into a constant, which needs a static "
                 f"shape; found {list(shape) if shape else 'none'}")
    start, end = int(attrs.get("start", 0)), attrs.get("end")
    r.consts[node.output[0]] = np.array(shape[start:None if end is None else int(end)], np.int64)


@_translates("Cast")
def _cast(r, node, name: str, attrs: dict) -> None:
    to = int(attrs["to"])
    targets = {1: ("f32", np.float32), 10: ("f16", np.float16), 7: ("i64", np.int64),
               6: ("i32", np.int32), 3: ("i8", np.int8), 2: ("u8", np.uint8),
               9: ("boolean", np.bool_)}
    if to not in targets:
        import onnx
        r.refuse(f"Cast to {onnx.TensorProto.DataType.Name(to)} is not supported; supported: "
                 f"FLOAT, FLOAT16, INT64, INT32, INT8, UINT8, BOOL")
    ir_type, np_type = targets[to]
    folded = r.folded(node.input[0])
    if folded is not None:
        r.consts[node.output[0]] = folded.astype(np_type).astype(
            np.uint8 if np_type is np.bool_ else np_type)
        return
    r.emit("Convert", [node.input[0]], [node.output[0]], name, {"destination_type": ir_type})


@_translates("DepthToSpace", "SpaceToDepth")
def _depth_space(r, node, name: str, attrs: dict) -> None:
    mode = attrs.get("mode", b"DCR").decode()
    r.emit(node.op_type, [node.input[0]], [node.output[0]], name,
           {"block_size": str(int(attrs["blocksize"])),
            "mode": "depth_first" if mode == "CRD" else "blocks_first"})


@_translates("ConvTranspose")
def _conv_transpose(r, node, name: str, attrs: dict) -> None:
    x, w = node.input[0], node.input[1]
    wshape = r.shape_of(w)
    if len(wshape) not in (3, 4) or int(attrs.get("group", 1)) != 1:
        r.refuse(f"only 1-D and 2-D ConvTranspose with group 1 is supported; weights "
                 f"{list(wshape)}, group {attrs.get('group', 1)}")
    if "output_shape" in attrs or attrs.get("auto_pad", b"NOTSET").decode() not in ("NOTSET", ""):
        r.refuse("output_shape and auto_pad are not supported; give pads (and output_padding)")
    k = len(wshape) - 2
    pads = _spatial(attrs, "pads", 2 * k, 0)
    ir = {"strides": ints_text(_spatial(attrs, "strides", k, 1)),
          "dilations": ints_text(_spatial(attrs, "dilations", k, 1)),
          "pads_begin": ints_text(pads[:k]), "pads_end": ints_text(pads[k:]),
          "output_padding": ints_text(_spatial(attrs, "output_padding", k, 0))}
    bias = _input(node, 2)
    out = f"{node.output[0]}/deconv" if bias else node.output[0]
    r.emit("ConvolutionBackpropData", [x, w], [out], out if bias else name, ir,
           shapes=[r.shape_of(node.output[0])] if bias else None)
    if bias:
        b = _reshaped(r, bias, [1, wshape[1]] + [1] * k, f"{name}/bias")
        r.emit("Add", [out, b], [node.output[0]], name, {"auto_broadcast": "numpy"})
