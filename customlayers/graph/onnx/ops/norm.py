"""ONNX's normalizations over trailing axes (the transformers' LayerNormalization, opset 17, and
RMSNormalization, opset 23), decomposed into IR reductions and elementwise layers: the same
arithmetic as ONNX's own function bodies, in float32, with the optional Mean and InvStdDev
outputs of LayerNormalization produced where the model asks for them."""
from __future__ import annotations

import numpy as np

from ..translate import axis_in, keep_axes, rank_of, translates

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


@translates("LayerNormalization")
def _layer_norm(r, node, name: str, attrs: dict) -> None:
    """(x - mean) / sqrt(var + epsilon) * Scale + B over the axes from `axis` on."""
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
