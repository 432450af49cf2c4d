"""Shape arithmetic evaluated on the host: the ONNX ops a model computes its shapes with
(Shape -> Gather -> Unsqueeze -> Concat -> Reshape, Range, Where, ...), in numpy with ONNX's
semantics (integer Div truncates, Mod's sign per fmod, Slice clamps, negative axes count from
the end).

The ONNX reader folds such a node at load when its inputs are constants; when they depend on a
shape known only for a request's input shapes, it keeps the node as a FOLD_TYPE node (the ONNX
op in attrs["op"], its attributes as text) and the shape-folding pass (passes/shape_folding.py)
evaluates it per set of input shapes. Both call `evaluate`. Errors are ValueError with what is
wrong; the callers name the node.

Booleans are held as u8 here, as everywhere (dtypes.py): comparisons answer u8, and the
logical ops read any non-zero as true.
"""
from __future__ import annotations

import math

import numpy as np

from .fold_index import INDEX_OPS
from .fold_signal import SIGNAL_OPS
from .limits import MAX_DIM, element_count

# the IR type of a node kept for the shape-folding pass; attrs["op"] is its ONNX op
FOLD_TYPE = "FoldOnly"
# a folded value is held in memory while compiling: a shape, a mask, never a tensor this large
MAX_FOLDED_ELEMENTS = 1 << 24

# ops whose input 0 is read for its shape only (its value may be computed at run time)
SHAPE_READERS = ("Shape", "Size")


def shape_text(dims) -> str:
    """Dims as attribute text: ints, symbol names, '?' for an unknown dim."""
    return ",".join("?" if d is None else str(d) for d in dims)


def parse_dims(text: str) -> list:
    """shape_text back: ints stay ints, symbol names strings, '?' None."""
    if not text:
        return []
    out: list = []
    for part in text.split(","):
        out.append(None if part == "?" else int(part) if part.lstrip("-").isdigit() else part)
    return out


def evaluate(op: str, attrs: dict, inputs: list, shape=None) -> list[np.ndarray]:
    """The outputs of ONNX op `op` on numpy `inputs` (None for an absent optional input);
    `shape` is input 0's concrete shape for the SHAPE_READERS. ValueError when an input does
    not fit the op."""
    fn = _OPS.get(op)
    if fn is None:
        raise ValueError(f"{op} is not shape arithmetic the pass evaluates")
    out = fn(attrs, inputs, shape)
    results = [np.asarray(v) for v in (out if isinstance(out, list) else [out])]
    for v in results:
        if v.size > MAX_FOLDED_ELEMENTS:
            raise ValueError(f"the result has {v.size} elements; a folded value holds at most "
                             f"{MAX_FOLDED_ELEMENTS}")
        if v.dtype == np.bool_:
            raise AssertionError("booleans are held as u8")   # every op below converts
    return results


def _int(attrs: dict, key: str, default: int | None = None) -> int | None:
    text = attrs.get(key)
    return default if text in (None, "") else int(text)


def _axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def _ints(value, what: str) -> list[int]:
    value = np.asarray(value)
    if value.dtype.kind not in "iub":
        raise ValueError(f"the {what} must be integers, found {value.dtype}")
    return [int(v) for v in value.reshape(-1)]


def _u8(value) -> np.ndarray:
    return np.asarray(value).astype(np.uint8)


def _bool(value) -> np.ndarray:
    return np.asarray(value).astype(np.bool_)


# -- shapes ----------------------------------------------------------------------------------
def _shape(attrs, inputs, shape):
    start, end = _int(attrs, "start", 0), _int(attrs, "end")
    return np.array(tuple(shape)[start:end], np.int64)   # Python's slice clamps as ONNX does


def _size(attrs, inputs, shape):
    return np.array(element_count(shape), np.int64)


def _constant_of_shape(attrs, inputs, shape):
    dims = _ints(inputs[0], "shape")
    if any(not 0 <= d <= MAX_DIM for d in dims):
        raise ValueError(f"shape {dims} is negative or too large to fold")
    _check_size(dims)
    fill = np.asarray(inputs[1]) if len(inputs) > 1 and inputs[1] is not None \
        else np.zeros((1,), np.float32)
    if fill.size != 1:
        raise ValueError(f"the fill value must hold one element, found {fill.size}")
    return np.full(dims, fill.reshape(-1)[0], dtype=fill.dtype)


def _range(attrs, inputs, shape):
    start, limit, delta = (np.asarray(v).reshape(-1) for v in inputs[:3])
    if not start.size == limit.size == delta.size == 1:
        raise ValueError("start, limit and delta must be scalars")
    s, lim, d = start[0], limit[0], delta[0]
    if d == 0:
        raise ValueError("delta is 0")
    count = max(int(math.ceil((float(lim) - float(s)) / float(d))), 0)
    if count > MAX_FOLDED_ELEMENTS:
        raise ValueError(f"the range has {count} elements, too many to fold")
    return (s + np.arange(count, dtype=start.dtype) * d).astype(start.dtype)


# -- shape vectors ---------------------------------------------------------------------------
def _gather(attrs, inputs, shape):
    data, idx = np.asarray(inputs[0]), np.asarray(inputs[1])
    axis = _axis(_int(attrs, "axis", 0), data.ndim)
    n = data.shape[axis]
    idx_list = _ints(idx, "indices")
    if any(not -n <= i < n for i in idx_list):
        raise ValueError(f"the indices must be from {-n} to {n - 1}, found {idx_list}")
    return np.take(data, np.where(idx < 0, idx + n, idx), axis=axis)


def _slice(attrs, inputs, shape):
    data = np.asarray(inputs[0])
    starts, ends, axes, steps = _slice_args(data.ndim, inputs[1:])
    items = [slice(None)] * data.ndim
    for b, e, a, s in zip(starts, ends, axes, steps):
        items[a] = slice(b, e, s)         # Python's slice clamps as ONNX's Slice does
    return data[tuple(items)]


def _slice_args(rank: int, args: list) -> tuple[list, list, list, list]:
    starts, ends = _ints(args[0], "starts"), _ints(args[1], "ends")
    axes = _ints(args[2], "axes") if len(args) > 2 and args[2] is not None \
        else list(range(len(starts)))
    steps = _ints(args[3], "steps") if len(args) > 3 and args[3] is not None \
        else [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ValueError(f"starts, ends, axes and steps have {len(starts)}, {len(ends)}, "
                         f"{len(axes)} and {len(steps)} values")
    if 0 in steps:
        raise ValueError("a step of 0 is not a slice")
    return starts, ends, [_axis(a, rank) for a in axes], steps


def _slice_bounds(attrs, inputs, shape):
    """Slice's computed operands as the IR Slice takes them: start, stop, step, axes (the axes
    and steps filled in where the node leaves them out)."""
    starts, ends, axes, steps = _slice_args(_int(attrs, "rank"), inputs)
    return [np.array(v, np.int64) for v in (starts, ends, steps, axes)]


def _split_sizes(attrs, inputs, length: int) -> list[int]:
    count = _int(attrs, "outputs")
    if len(inputs) > 1 and inputs[1] is not None:
        sizes = _ints(inputs[1], "split sizes")
    else:
        chunk = -(-length // count)
        sizes = [max(min(chunk, length - k * chunk), 0) for k in range(count)]
    if len(sizes) != count or any(s < 0 for s in sizes) or sum(sizes) != length:
        raise ValueError(f"split sizes {sizes} do not cut a length of {length} into {count}")
    return sizes


def _split(attrs, inputs, shape):
    data = np.asarray(inputs[0])
    axis = _axis(_int(attrs, "axis", 0), data.ndim)
    sizes = _split_sizes(attrs, inputs, data.shape[axis])
    return np.split(data, np.cumsum(sizes)[:-1], axis=axis)


def _split_bounds(attrs, inputs, shape):
    """A Split of a tensor computed at run time with computed sizes: each part's start and
    stop along the axis (2 outputs per part), for the IR Slices it is made of."""
    sizes = _split_sizes(attrs, [None] + list(inputs), _int(attrs, "length"))
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    return [np.array([int(bounds[k + j])], np.int64)
            for k in range(len(sizes)) for j in (0, 1)]


def _reduce_axes(attrs, inputs, shape):
    """A Reduce*'s axes input as the IR reductions take them: normalized and sorted; empty
    means every axis, or none with noop_with_empty_axes."""
    rank = _int(attrs, "rank")
    axes = sorted({_axis(a, rank) for a in _ints(inputs[0], "axes")})
    if not axes and not _int(attrs, "noop", 0):
        axes = list(range(rank))
    return np.array(axes, np.int64)


def _pad_bounds(attrs, inputs, shape):
    """A Pad's pads (and axes, opset 18) as the IR Pad takes them: pads_begin and pads_end,
    one per axis of the input."""
    rank = _int(attrs, "rank")
    pads = _ints(inputs[0], "pads")
    axes = [_axis(a, rank) for a in _ints(inputs[1], "axes")] \
        if len(inputs) > 1 and inputs[1] is not None else list(range(rank))
    if len(pads) != 2 * len(axes):
        raise ValueError(f"pads has {len(pads)} values; {len(axes)} axes need {2 * len(axes)}")
    begin, end = [0] * rank, [0] * rank
    for k, a in enumerate(axes):
        begin[a], end[a] = pads[k], pads[len(axes) + k]
    return [np.array(begin, np.int64), np.array(end, np.int64)]


def _dropout_check(attrs, inputs, shape):
    """A Dropout's fed ratio and training_mode: it runs as the identity unless training with a
    ratio that drops something, a random mask refused here."""
    ratio, mode = (np.asarray(v).reshape(-1) for v in inputs[:2])
    if mode.size != 1 or ratio.size != 1:
        raise ValueError("ratio and training_mode must be scalars")
    if bool(mode[0]) and float(ratio[0]) != 0:
        raise ValueError(f"training_mode is true with ratio {float(ratio[0])}: training-mode "
                         f"Dropout (a random mask) is a training op, not supported; give "
                         f"training_mode false, or ratio 0")
    return np.zeros((), np.uint8)


def _concat(attrs, inputs, shape):
    parts = [np.asarray(v) for v in inputs]
    axis = _axis(_int(attrs, "axis", 0), parts[0].ndim)
    return np.concatenate(parts, axis=axis)


def _unsqueeze(attrs, inputs, shape):
    data = np.asarray(inputs[0])
    axes = _ints(inputs[1], "axes")
    rank = data.ndim + len(axes)
    axes = sorted(_axis(a, rank) for a in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"axes {axes} repeat an axis")
    out = list(data.shape)
    for a in axes:
        out.insert(a, 1)
    return data.reshape(out)


def _transpose(attrs, inputs, shape):
    """attrs["perm"]: the axes as text "1, 0" ('' : reversed)."""
    data = np.asarray(inputs[0])
    text = attrs.get("perm", "")
    perm = [int(v) for v in text.split(",")] if text else list(reversed(range(data.ndim)))
    if sorted(perm) != list(range(data.ndim)):
        raise ValueError(f"perm {perm} is not a permutation of {data.ndim} axes")
    return np.ascontiguousarray(np.transpose(data, perm))


def _squeeze(attrs, inputs, shape):
    data = np.asarray(inputs[0])
    if len(inputs) < 2 or inputs[1] is None:
        return data.reshape([d for d in data.shape if d != 1])
    axes = {_axis(a, data.ndim) for a in _ints(inputs[1], "axes")}
    if any(data.shape[a] != 1 for a in axes):
        raise ValueError(f"cannot squeeze axes {sorted(axes)} of shape {list(data.shape)}")
    return data.reshape([d for i, d in enumerate(data.shape) if i not in axes])


def _reshape(attrs, inputs, shape):
    data = np.asarray(inputs[0])
    target = _ints(inputs[1], "shape")
    if not _int(attrs, "allowzero", 0):
        target = [data.shape[i] if d == 0 else d for i, d in enumerate(target)]
    return data.reshape(target)


def _expand(attrs, inputs, shape):
    data = np.asarray(inputs[0])
    out = np.broadcast_shapes(data.shape, tuple(_ints(inputs[1], "shape")))
    _check_size(out)
    return np.broadcast_to(data, out).copy()


def _tile(attrs, inputs, shape):
    data, repeats = np.asarray(inputs[0]), _ints(inputs[1], "repeats")
    if len(repeats) != data.ndim or any(r < 0 for r in repeats):
        raise ValueError(f"repeats {repeats} do not fit a tensor of rank {data.ndim}")
    _check_size([d * r for d, r in zip(data.shape, repeats)])
    return np.tile(data, repeats)


def _check_size(dims) -> None:
    """Before a result is made: one too large to fold is refused, never allocated."""
    if element_count(dims) > MAX_FOLDED_ELEMENTS:
        raise ValueError(f"the result of shape {list(dims)} holds at most "
                         f"{MAX_FOLDED_ELEMENTS} elements when folded")


def _cast(attrs, inputs, shape):
    """attrs["to"]: a numpy dtype name; attrs["boolean"]: the ONNX type is bool (a
    comparison with 0, held as u8)."""
    value = np.asarray(inputs[0])
    if _int(attrs, "boolean", 0):
        return _u8(value != 0)
    return value.astype(np.dtype(attrs["to"]))


# -- elementwise -----------------------------------------------------------------------------
def _div(attrs, inputs, shape):
    a, b = np.asarray(inputs[0]), np.asarray(inputs[1])
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
        if np.any(b == 0):
            raise ValueError("integer division by zero")
        q = np.abs(a) // np.abs(b)                      # truncated toward zero, as C does
        return np.where((a < 0) != (b < 0), -q, q).astype(np.result_type(a, b))
    return a / b


def _mod(attrs, inputs, shape):
    a, b = np.asarray(inputs[0]), np.asarray(inputs[1])
    if a.dtype.kind in "iu" and np.any(b == 0):
        raise ValueError("integer modulo by zero")
    # fmod=1: the dividend's sign (C's fmod); fmod=0: the divisor's (Python's %)
    return np.fmod(a, b) if _int(attrs, "fmod", 0) else np.mod(a, b)


def _elementwise(fn):
    def run(attrs, inputs, shape):
        return fn(*(np.asarray(v) for v in inputs))
    return run


def _variadic(fn):
    def run(attrs, inputs, shape):
        acc = np.asarray(inputs[0])
        for v in inputs[1:]:
            acc = fn(acc, np.asarray(v))
        return acc
    return run


def _compare(fn):
    def run(attrs, inputs, shape):
        return _u8(fn(np.asarray(inputs[0]), np.asarray(inputs[1])))
    return run


def _logical(fn):
    def run(attrs, inputs, shape):
        return _u8(fn(*(_bool(v) for v in inputs)))
    return run


def _where(attrs, inputs, shape):
    x, y = np.asarray(inputs[1]), np.asarray(inputs[2])
    return np.where(_bool(inputs[0]), x, y).astype(np.result_type(x, y))


_OPS = {
    "Shape": _shape, "Size": _size, "ConstantOfShape": _constant_of_shape, "Range": _range,
    "Gather": _gather, "Slice": _slice, "SliceBounds": _slice_bounds, "Split": _split,
    "SplitBounds": _split_bounds, "ReduceAxes": _reduce_axes,
    "DropoutCheck": _dropout_check, "PadBounds": _pad_bounds, "Concat": _concat, "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze, "Transpose": _transpose, "Reshape": _reshape, "Expand": _expand, "Tile": _tile,
    "Cast": _cast, "CastLike": _cast, "Identity": lambda a, i, s: np.asarray(i[0]),
    "Add": _variadic(np.add), "Sub": _elementwise(np.subtract), "Mul": _variadic(np.multiply),
    "Div": _div, "Mod": _mod, "Neg": _elementwise(np.negative), "Abs": _elementwise(np.abs),
    "Max": _variadic(np.maximum), "Min": _variadic(np.minimum), "Sum": _variadic(np.add),
    "Equal": _compare(np.equal), "Less": _compare(np.less), "Greater": _compare(np.greater),
    "LessOrEqual": _compare(np.less_equal), "GreaterOrEqual": _compare(np.greater_equal),
    "Not": _logical(np.logical_not), "And": _logical(np.logical_and),
    "Or": _logical(np.logical_or), "Xor": _logical(np.logical_xor), "Where": _where,
    **INDEX_OPS,            # GatherElements/ND, ScatterElements/ND on shapes (fold_index.py)
    **SIGNAL_OPS,           # windows and mel matrices of known sizes (fold_signal.py)
}
EVALUATED_OPS = frozenset(_OPS)
