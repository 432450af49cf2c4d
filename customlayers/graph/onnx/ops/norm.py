"""ONNX's normalizations: over trailing axes (the transformers' LayerNormalization, opset 17, and
RMSNormalization, opset 23), over groups of channels (GroupNormalization, opset 18 and 21) and
over given axes (MeanVarianceNormalization), decomposed into IR reductions and elementwise
layers: the same arithmetic as ONNX's own function bodies, in float32, with the optional Mean
and InvStdDev outputs of LayerNormalization produced where the model asks for them; and
LpNormalization, one built-in op (ops/reduce/norm.py); and the losses NegativeLogLikelihoodLoss
and SoftmaxCrossEntropyLoss (opset 12/13/22), each one built-in op (ops/reduce/loss.py) of the
same name, the optional log_prob output the op's second, computed only when the model names it."""
from __future__ import annotations

import numpy as np

from .... import dtypes
from ..translate import (axis_in, dtype_of, float_text, keep_axes, optional_input, rank_of,
                         reshaped, text_attr, translates)

_NUMPY = {"auto_broadcast": "numpy"}


def _trailing_axes(r, node, name: str, attrs: dict, op: str):
    """(x, its shape, the axes from `axis` to the last, their constant, the kept shape)."""
    x = node.input[0]
    shape = r.shape_of(x)
    rank = rank_of(r, x, op)
    axes = list(range(axis_in(r, int(attrs.get("axis", -1)), rank), rank))
    return x, shape, r.const(f"{name}/axes", np.array(axes, np.int64)), keep_axes(shape, axes)


def _scale_and_bias(r, node, name: str, normalized: str, shape, out: str) -> None:
    """normalized * Scale (+ B, where given) into `out`."""
    bias = node.input[2] if len(node.input) > 2 and node.input[2] else None
    scaled = out if bias is None else f"{name}/scaled"
    r.emit("Multiply", [normalized, node.input[1]], [scaled], scaled, _NUMPY, shapes=[shape])
    if bias is not None:
        r.emit("Add", [scaled, bias], [out], name, _NUMPY)


def _divided_by_root_mean(r, name: str, numerator: str, square: str, axes: str, kept, shape,
                          epsilon: float) -> tuple[str, str]:
    """numerator / sqrt(mean(square over axes) + epsilon): (the quotient, the root)."""
    eps = r.const(f"{name}/eps", np.float32(epsilon))
    mean = f"{name}/mean_square"
    r.emit("ReduceMean", [square, axes], [mean], mean, {"keep_dims": "true"}, shapes=[kept])
    mean_eps = f"{name}/mean_eps"
    r.emit("Add", [mean, eps], [mean_eps], mean_eps, _NUMPY, shapes=[kept])
    root = f"{name}/root"
    r.emit("Sqrt", [mean_eps], [root], root, shapes=[kept])
    quotient = f"{name}/normalized"
    r.emit("Divide", [numerator, root], [quotient], quotient, _NUMPY, shapes=[shape])
    return quotient, root


def _one_op_takes(r, node, attrs: dict) -> bool:
    """Whether the built-in LayerNorm (one kernel) computes this node: float32 input whose
    normalized axes are known (the ones before may be open: a batch, a sequence length), scale
    and bias that hold exactly the normalized axes' values (ONNX also lets them broadcast:
    those keep the decomposition)."""
    x = node.input[0]
    shape = r.shape_of(x)
    if not shape or dtype_of(r, x) != "f32":
        return False
    axis = int(attrs.get("axis", -1)) % len(shape)
    if any(d is None for d in shape[axis:]):
        return False
    size = int(np.prod(shape[axis:], dtype=np.int64))
    for k in (1, 2):
        if len(node.input) > k and node.input[k]:
            s = r.shape_of(node.input[k])
            if s is None or dtype_of(r, node.input[k]) != "f32" or \
                    int(np.prod(s, dtype=np.int64)) != size or \
                    tuple(d for d in s if d != 1) != tuple(d for d in shape[axis:] if d != 1):
                return False
    return True


@translates("LayerNormalization")
def _layer_norm(r, node, name: str, attrs: dict) -> None:
    """(x - mean) / sqrt(var + epsilon) * Scale + B over the axes from `axis` on: the one
    LayerNorm op where it takes the node (ops/reduce/layer_norm.py), else decomposed."""
    if _one_op_takes(r, node, attrs):
        x, shape = node.input[0], r.shape_of(node.input[0])
        axis = int(attrs.get("axis", -1)) % len(shape)
        stats = len(node.output) > 1 and any(node.output[1:])
        kept = tuple(shape[:axis]) + (1,) * (len(shape) - axis)
        outputs = [node.output[0]]
        if stats:
            outputs += [o or f"{name}/unused{k}" for k, o in
                        enumerate((list(node.output[1:]) + [""])[:2], 1)]
        inputs = [i for i in node.input[:3] if i]
        r.emit("LayerNorm", inputs, outputs, name,
               {"axis": str(axis), "epsilon": float_text(attrs.get("epsilon", 1e-5)),
                "stats": "true" if stats else "false"},
               shapes=[tuple(shape)] + [kept] * (len(outputs) - 1))
        return
    x, shape, axes, kept = _trailing_axes(r, node, name, attrs, "LayerNormalization")
    outputs = list(node.output) + ["", ""]
    mean = outputs[1] or f"{name}/mean"
    r.emit("ReduceMean", [x, axes], [mean], f"{name}/mean", {"keep_dims": "true"},
           shapes=[kept])
    centered = f"{name}/centered"
    r.emit("Subtract", [x, mean], [centered], centered, _NUMPY, shapes=[shape])
    square = f"{name}/square"
    r.emit("Multiply", [centered, centered], [square], square, _NUMPY, shapes=[shape])
    normalized, std = _divided_by_root_mean(r, name, centered, square, axes, kept, shape,
                                            attrs.get("epsilon", 1e-5))
    _scale_and_bias(r, node, name, normalized, shape, outputs[0])
    if outputs[2]:
        one = r.const(f"{name}/one", np.float32(1.0))
        r.emit("Divide", [one, std], [outputs[2]], f"{name}/inv_std_dev", _NUMPY)


@translates("RMSNormalization")
def _rms_norm(r, node, name: str, attrs: dict) -> None:
    """x / sqrt(mean(x * x) + epsilon) * scale over the axes from `axis` on."""
    x, shape, axes, kept = _trailing_axes(r, node, name, attrs, "RMSNormalization")
    square = f"{name}/square"
    r.emit("Multiply", [x, x], [square], square, _NUMPY, shapes=[shape])
    normalized, _ = _divided_by_root_mean(r, name, x, square, axes, kept, shape,
                                          attrs.get("epsilon", 1e-5))
    _scale_and_bias(r, node, name, normalized, shape, node.output[0])


@translates("LpNormalization")
def _lp_normalization(r, node, name: str, attrs: dict) -> None:
    """x / its L1 or L2 norm along `axis` (default -1): one built-in op."""
    p = int(attrs.get("p", 2))
    if p not in (1, 2):
        r.refuse(f"attribute p={p} is not 1 or 2 (the norms ONNX defines here)")
    r.emit("LpNormalization", [node.input[0]], [node.output[0]], name,
           {"axis": str(int(attrs.get("axis", -1))), "p": str(p)})


@translates("MeanVarianceNormalization")
def _mvn(r, node, name: str, attrs: dict) -> None:
    """(x - mean) / (sqrt(variance) + 1e-9) over `axes` (default 0, 2, 3), ONNX's function
    body with the variance taken as the mean square of the centered values (the same value,
    without the cancellation of E[x^2] - E[x]^2)."""
    x = node.input[0]
    shape = r.shape_of(x)
    rank = rank_of(r, x, "MeanVarianceNormalization")
    axes = sorted({axis_in(r, int(a), rank, "axes entry") for a in attrs.get("axes", [0, 2, 3])})
    kept = keep_axes(shape, axes)
    axes_const = r.const(f"{name}/axes", np.array(axes, np.int64))
    mean = f"{name}/mean"
    r.emit("ReduceMean", [x, axes_const], [mean], mean, {"keep_dims": "true"}, shapes=[kept])
    centered = f"{name}/centered"
    r.emit("Subtract", [x, mean], [centered], centered, _NUMPY, shapes=[shape])
    square = f"{name}/square"
    r.emit("Multiply", [centered, centered], [square], square, _NUMPY, shapes=[shape])
    var = f"{name}/variance"
    r.emit("ReduceMean", [square, axes_const], [var], var, {"keep_dims": "true"}, shapes=[kept])
    std = f"{name}/std"
    r.emit("Sqrt", [var], [std], std, shapes=[kept])
    std_eps = f"{name}/std_eps"
    r.emit("Add", [std, r.const(f"{name}/eps", np.float32(1e-9))], [std_eps], std_eps, _NUMPY,
           shapes=[kept])
    r.emit("Divide", [centered, std_eps], [node.output[0]], name, _NUMPY)


@translates("GroupNormalization")
def _group_norm(r, node, name: str, attrs: dict) -> None:
    """x (N, C, ...) viewed as (N, G, C/G * ...), normalized per group as LayerNormalization
    is, then scaled and shifted: per group before opset 21 (scale and bias of G values), per
    channel from opset 21 (C values). Needs the input's shape known at load."""
    x = node.input[0]
    shape = r.shape_of(x)
    if len(shape) < 3 or any(not isinstance(d, int) for d in shape):
        r.refuse(f"GroupNormalization needs an input (N, C, d1, ...) of known shape, found "
                 f"{r.describe_shape(x)}")
    groups = int(attrs["num_groups"])
    n, c = shape[0], shape[1]
    if groups < 1 or c % groups:
        r.refuse(f"num_groups={groups} does not divide the {c} channels")
    per_channel = r.opset.get("ai.onnx", 21) >= 21
    want = c if per_channel else groups
    for k, what in ((1, "scale"), (2, "bias")):
        given = r.known_shape(node.input[k])
        if given is not None and tuple(given) != (want,):
            r.refuse(f"input {k} ({what}) has shape {list(given)}; expected [{want}] (one per "
                     f"{'channel' if per_channel else 'group'} at this opset)")
    grouped_shape = (n, groups, int(np.prod(shape[1:], dtype=np.int64)) // groups)
    grouped = reshaped(r, x, list(grouped_shape), f"{name}/grouped")
    axes = r.const(f"{name}/axes", np.array([2], np.int64))
    kept = grouped_shape[:2] + (1,)
    mean = f"{name}/mean"
    r.emit("ReduceMean", [grouped, axes], [mean], mean, {"keep_dims": "true"}, shapes=[kept])
    centered = f"{name}/centered"
    r.emit("Subtract", [grouped, mean], [centered], centered, _NUMPY, shapes=[grouped_shape])
    square = f"{name}/square"
    r.emit("Multiply", [centered, centered], [square], square, _NUMPY, shapes=[grouped_shape])
    normalized, _ = _divided_by_root_mean(r, name, centered, square, axes, kept, grouped_shape,
                                          attrs.get("epsilon", 1e-5))
    # scale and bias broadcast against the grouped view (per group) or the input (per channel)
    view = [c] + [1] * (len(shape) - 2) if per_channel else [groups, 1]
    if per_channel:
        normalized = reshaped(r, normalized, list(shape), f"{name}/ungrouped")
    scale = reshaped(r, node.input[1], view, f"{name}/scale")
    bias = reshaped(r, node.input[2], view, f"{name}/bias")
    affine_shape = tuple(shape) if per_channel else grouped_shape
    scaled = f"{name}/scaled"
    r.emit("Multiply", [normalized, scale], [scaled], scaled, _NUMPY, shapes=[affine_shape])
    if per_channel:
        r.emit("Add", [scaled, bias], [node.output[0]], name, _NUMPY)
        return
    shifted = f"{name}/shifted"
    r.emit("Add", [scaled, bias], [shifted], shifted, _NUMPY, shapes=[grouped_shape])
    r.emit("Reshape", [shifted, r.const(f"{name}/shape", np.array(shape, np.int64))],
           [node.output[0]], name, {"special_zero": "false"})


# -- the losses -------------------------------------------------------------------------------

_REDUCTIONS = ("none", "sum", "mean")


@translates("NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss")
def _loss(r, node, name: str, attrs: dict) -> None:
    reduction = text_attr(r, attrs, "reduction", "mean", _REDUCTIONS)
    ir = {"reduction": reduction}
    if "ignore_index" in attrs:
        ir["ignore_index"] = str(int(attrs["ignore_index"]))
    for k, what, allowed in ((0, "scores", ("f32", "f64")), (1, "target", ("i32", "i64")),
                             (2, "weight", ("f32", "f64"))):
        value = optional_input(node, k)
        dtype = dtype_of(r, value) if value else ""
        if dtype and dtype not in allowed:
            r.refuse(f"input {k} ({what}) is {dtype}; {node.op_type} takes "
                     f"{' or '.join(allowed)} here")
    weight = optional_input(node, 2)
    _check_shapes(r, node.input[0], node.input[1], weight)
    inputs = list(node.input[:2]) + ([weight] if weight else [])
    outputs = [node.output[0]]
    if node.op_type == "SoftmaxCrossEntropyLoss" and len(node.output) > 1 and node.output[1]:
        ir["log_prob"] = "true"
        outputs.append(node.output[1])
    r.emit(node.op_type, inputs, outputs, name, ir)


def _check_shapes(r, scores: str, target: str, weight: str | None) -> None:
    """Where shapes are known at load: scores (N, C, d1..dk), target (N, d1..dk), weight (C)."""
    x, t = r.known_shape(scores), r.known_shape(target)
    if x is not None and len(x) < 2:
        r.refuse(f"input 0 (scores) has shape {list(x)}; expected (N, C) or (N, C, d1, ..., dk)")
    if x is None or None in x:
        return
    if t is not None and None not in t and tuple(t) != (x[0], *x[2:]):
        r.refuse(f"input 1 (target) has shape {list(t)}; the scores of shape {list(x)} need "
                 f"{[x[0], *x[2:]]}")
    w = r.known_shape(weight) if weight else None
    if w is not None and None not in w and tuple(w) != (x[1],):
        r.refuse(f"input 2 (weight) has shape {list(w)}; expected [{x[1]}] (one per class)")
