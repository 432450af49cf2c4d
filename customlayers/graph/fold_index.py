"""The index ops as shape arithmetic (fold_eval.py's evaluators, for the ONNX reader and the
shape-folding pass): GatherElements, GatherND, ScatterElements/Scatter and ScatterND on known
values, in numpy with ONNX's semantics. An exporter computes shapes with them (a BERT's
attention-mask shape is a ScatterND of a Shape); on data they are layers (ops/index/).

An index out of range is a ValueError here (the callers name the node): the values are known,
so a model that would read outside them is wrong, not data-dependent."""
from __future__ import annotations

import numpy as np

# ONNX reduction -> numpy ufunc applied in place in index order (duplicates accumulate)
_REDUCE = {"none": None, "add": np.add, "mul": np.multiply, "max": np.maximum,
           "min": np.minimum}


def _indices(value, dims, what: str) -> np.ndarray:
    """Integer indices with the negative ones wrapped; ValueError past `dims` (broadcast)."""
    idx = np.asarray(value)
    if idx.dtype.kind not in "iu":
        raise ValueError(f"the {what} must be integers, found {idx.dtype}")
    idx = idx.astype(np.int64)
    dims = np.asarray(dims, np.int64)
    wrapped = np.where(idx < 0, idx + dims, idx)
    if np.any(wrapped < 0) or np.any(wrapped >= dims):
        raise ValueError(f"the {what} {idx.reshape(-1).tolist()[:8]} are out of range")
    return wrapped


def _axis(attrs, rank: int) -> int:
    axis = int(attrs.get("axis", 0))
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} is out of range for rank {rank}")
    return axis % rank


def _gather_elements(attrs, inputs, shape):
    data, idx = np.asarray(inputs[0]), np.asarray(inputs[1])
    axis = _axis(attrs, data.ndim)
    return np.take_along_axis(data, _indices(idx, data.shape[axis], "indices"), axis=axis)


def _gather_nd(attrs, inputs, shape):
    data, idx = np.asarray(inputs[0]), np.asarray(inputs[1])
    b = int(attrs.get("batch_dims", 0))
    m = idx.shape[-1]
    idx = _indices(idx, data.shape[b:b + m], "indices")
    batch = int(np.prod(data.shape[:b], dtype=np.int64))
    flat_data = data.reshape((batch,) + data.shape[b:])
    flat_idx = idx.reshape(batch, -1, m)
    out = np.stack([d[tuple(i.T)] for d, i in zip(flat_data, flat_idx)])
    return out.reshape(idx.shape[:-1] + data.shape[b + m:])


def _scatter_elements(attrs, inputs, shape):
    data, upd = np.array(inputs[0]), np.asarray(inputs[2])
    axis = _axis(attrs, data.ndim)
    idx = _indices(inputs[1], data.shape[axis], "indices")
    fn = _REDUCE[attrs.get("reduction", "none")]
    for pos in np.ndindex(*idx.shape):
        at = list(pos)
        at[axis] = idx[pos]
        at = tuple(at)
        data[at] = upd[pos] if fn is None else fn(data[at], upd[pos])
    return data


def _scatter_nd(attrs, inputs, shape):
    data, upd = np.array(inputs[0]), np.asarray(inputs[2])
    m = np.asarray(inputs[1]).shape[-1]
    idx = _indices(inputs[1], data.shape[:m], "indices")
    fn = _REDUCE[attrs.get("reduction", "none")]
    for pos in np.ndindex(*idx.shape[:-1]):
        at = tuple(idx[pos])
        data[at] = upd[pos] if fn is None else fn(data[at], upd[pos])
    return data


INDEX_OPS = {"GatherElements": _gather_elements, "GatherND": _gather_nd,
             "ScatterElements": _scatter_elements, "Scatter": _scatter_elements,
             "ScatterND": _scatter_nd}
