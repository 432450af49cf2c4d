"""The constants a causal-stream conversion (causal_stream.py) reads: a layer computed from
constants only, evaluated on the host, and a constant operand turned into the one number or
the per-channel vector a frame op takes.

A torch export of weight norm writes each convolution's weights as constant arithmetic
(w = g * v / ||v||: ReduceL2, Div, Mul of initializers); the ONNX reader keeps those layers
(their weights are larger than what it folds at load), and a step needs the weights
themselves. Evaluated in the constants' own float type, as a runtime computing them would.
"""
from __future__ import annotations

import numpy as np

from ...graph.graph import Node

_BINARY = {"Add": np.add, "Subtract": np.subtract, "Multiply": np.multiply,
           "Divide": np.divide, "Maximum": np.maximum, "Minimum": np.minimum,
           "Power": np.power}
_UNARY = {"Sqrt": np.sqrt, "Exp": np.exp, "Log": np.log, "Abs": np.abs,
          "Negative": np.negative}
_REDUCE = {"ReduceSum": np.sum, "ReduceMean": np.mean, "ReduceMax": np.max,
           "ReduceMin": np.min, "ReduceProd": np.prod}
EVALUATED = tuple(_BINARY) + tuple(_UNARY) + tuple(_REDUCE) + (
    "Reshape", "Squeeze", "Unsqueeze", "Transpose")


def evaluate(node: Node, values: list) -> np.ndarray | None:
    """Output 0 of `node` (an IR layer of EVALUATED) on the constant inputs `values`, or None
    when the node is not one this evaluates or its operands do not fit it."""
    kind = node.type
    try:
        with np.errstate(all="ignore"):      # an inf or NaN is the value the layer gives
            if kind in _BINARY and len(values) == 2:
                a, b = values
                dtype = np.result_type(a, b)
                if dtype.kind != "f" and kind in ("Divide", "Power"):
                    return None          # integer rounding rules of their own: not weights
                return np.asarray(_BINARY[kind](a, b)).astype(dtype, copy=False)
            if kind in _UNARY and len(values) == 1:
                return np.asarray(_UNARY[kind](values[0])).astype(values[0].dtype, copy=False)
            if kind in _REDUCE and len(values) == 2:
                x, axes = values
                keep = str(node.attrs.get("keep_dims", "false")).lower() == "true"
                axes = tuple(int(a) % max(x.ndim, 1) for a in np.reshape(axes, -1))
                out = _REDUCE[kind](x, axis=axes, keepdims=keep)
                return np.asarray(out).astype(x.dtype, copy=False)
            return _layout(node, values)
    except (ValueError, TypeError, IndexError):
        return None


def _layout(node: Node, values: list) -> np.ndarray | None:
    kind, x = node.type, values[0]
    if kind == "Reshape" and len(values) == 2:
        target = [int(v) for v in np.reshape(values[1], -1)]
        if str(node.attrs.get("special_zero", "false")).lower() == "true":
            target = [x.shape[i] if v == 0 and i < x.ndim else v for i, v in enumerate(target)]
        return x.reshape(target)
    if kind == "Squeeze":
        if len(values) == 1:
            return np.squeeze(x)
        return np.squeeze(x, axis=tuple(int(a) % x.ndim for a in np.reshape(values[1], -1)))
    if kind == "Unsqueeze" and len(values) == 2:
        axes = [int(a) for a in np.reshape(values[1], -1)]
        rank = x.ndim + len(axes)
        return np.expand_dims(x, tuple(sorted(a % rank for a in axes)))
    if kind == "Transpose" and len(values) == 2:
        return np.transpose(x, [int(a) for a in np.reshape(values[1], -1)])
    return None


def channel_vector(value: np.ndarray, rank: int, channels: int, time_axis: bool):
    """A constant operand of a sequence [N, C, T] (time_axis) as a frame op takes it: the one
    number (shape [1]) or the vector of `channels` values that numpy's broadcasting of
    `value` against the tensor gives each step. A string saying why not otherwise (it has
    values along the batch or the time axis, or more axes than the tensor)."""
    v = np.asarray(value)
    if v.ndim > rank:
        return f"a constant of shape {list(v.shape)} has more axes than the tensor"
    shape = (1,) * (rank - v.ndim) + v.shape
    if shape[0] != 1:
        return f"a constant of shape {list(v.shape)} has values along the batch axis"
    if time_axis and shape[2] != 1:
        return (f"a constant of shape {list(v.shape)} changes along the time axis (a step's "
                f"value would depend on its place in the window)")
    if shape[1] not in (1, channels):
        return f"a constant of shape {list(v.shape)} does not fit {channels} channels"
    return _vector(v.reshape(-1) if v.size == 1 or shape[1] == 1 else v.reshape(channels))


def head_vector(value: np.ndarray, shape: tuple):
    """A constant operand of a head tensor [N] + shape as a frame op takes it: one number or
    one value per element of the frame (the constant broadcast to `shape`). A string saying
    why not otherwise."""
    v = np.asarray(value)
    rank = len(shape) + 1
    if v.ndim > rank:
        return f"a constant of shape {list(v.shape)} has more axes than the tensor"
    full = (1,) * (rank - v.ndim) + v.shape
    if full[0] != 1:
        return f"a constant of shape {list(v.shape)} has values along the batch axis"
    if v.size == 1:
        return _vector(v.reshape(-1))
    try:
        if np.broadcast_shapes(full[1:], tuple(shape)) != tuple(shape):
            raise ValueError
    except ValueError:
        return f"a constant of shape {list(v.shape)} does not fit the tensor's {list(shape)}"
    return _vector(np.broadcast_to(v.reshape(full[1:]), shape).reshape(-1))


def _vector(v: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(v, dtype=np.float32)
