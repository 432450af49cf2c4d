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
