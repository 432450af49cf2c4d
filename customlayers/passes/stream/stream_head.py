"""The head of a streamed causal model (the handlers of stream_layers.py's kind for the layers
that read the last step and shape what comes of it): a Gather or Slice of the last step of a
sequence [N, C, T], a Slice of its channels (a Split of the channel axis comes as Slices), the
Reshape, Squeeze, Unsqueeze (Flatten) after it, and a softmax over a frame's channels (of a
sequence at every step, or of the head).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...errors import shape_text
from ...graph.graph import Node
from ...ops.stream.program import ChannelSlice, ChannelSoftmax
from .stream_layers import Head, Sequence, like


def _dims3(node: Node) -> tuple:
    """The declared dims of a sequence input [N, C, T] (None where unknown)."""
    shape = tuple(node.inputs[0].shape or ())
    return shape if len(shape) == 3 else (None,) * 3


def _last_step(walk, node: Node, index: int, length, what: str) -> None:
    """Refuses an index of the time axis that is not its last step."""
    if index == -1 or length is not None and index == length - 1:
        return
    walk.refuse(node, f"{what} step {index} of the time axis, not the last (-1"
                      f"{'' if length is None else f' or {length - 1}'}): a stream computes "
                      f"each step as the last of the window up to it")


def gather(walk, node: Node):
    x = walk.sequence(node, 0, "gathers from")
    idx, axis = walk.integers(node, 1, "its indices"), walk.integers(node, 2, "its axis")
    axis = int(axis.reshape(-1)[0]) % 3
    if str(node.attrs.get("batch_dims", "0")) != "0" or axis != 2:
        walk.refuse(node, f"gathers along axis {axis} of [N, C, T]; a stream reads the last "
                          f"step along the time axis (2) only")
    if idx.size != 1:
        walk.refuse(node, f"gathers {idx.size} steps of the time axis; a stream reads the last")
    _last_step(walk, node, int(idx.reshape(-1)[0]), _dims3(node)[2], "reads")
    return Head(x.frame, (x.channels,) + tuple(idx.shape))


def slice_(walk, node: Node):
    start, stop, step, axes = (walk.integers(node, i, what).reshape(-1)
                               for i, what in ((1, "start"), (2, "stop"), (3, "step"),
                                               (4, "axes")))
    x = walk.frame_input(node, 0)
    if isinstance(x, Head):
        return _head_slice(walk, node, x, start, stop, step, axes)
    shape = _dims3(node)
    time = False
    for b, e, s, a in zip(start.tolist(), stop.tolist(), step.tolist(), axes.tolist()):
        a %= 3
        length = shape[a]
        if a == 1:
            x = _channel_slice(walk, node, x, b, e, s)
            continue
        if a != 2:
            if b == 0 and s == 1 and (length is not None and e >= length or e >= 2 ** 31 - 1):
                continue
            walk.refuse(node, f"slices {b}:{e}:{s} of axis {a} of [N, C, T]; a stream keeps "
                              f"every stream (axis 0 whole)")
        if x.extra and b == 0 and s == 1 and (e == -x.extra or e == (length or 0) - x.extra):
            x = replace(x, extra=0, padded=None, padded_history=0)   # the chomp
            continue
        walk.settled(x)
        end_ok = e >= 2 ** 31 - 1 or length is not None and e >= length
        if s != 1 or not end_ok:
            walk.refuse(node, f"keeps steps {b}:{e}:{s} of the time axis; a stream reads the "
                              f"last step only (a Slice [-1:], or a chomp right after a causal "
                              f"convolution, folded into its padding)")
        _last_step(walk, node, b, length, "keeps from")
        time = True
    if not time:
        return x
    return Head(x.frame, (x.channels, 1))


def _head_slice(walk, node: Node, x: Head, start, stop, step, axes):
    """A Slice (or Split) of a head [N, C] (the last step's frame) along its channels: a
    ChannelSlice; along anything else refused, naming what it slices (it said the head was
    sliced "as if it had a time axis")."""
    rank = len(x.shape) + 1
    for b, e, s, a in zip(start.tolist(), stop.tolist(), step.tolist(), axes.tolist()):
        a %= rank
        dim = x.shape[a - 1] if a else None
        if b == 0 and s == 1 and (e >= 2 ** 31 - 1 or dim is not None and e >= dim):
            continue                    # keeps the whole axis
        if a == 0:
            walk.refuse(node, f"slices {b}:{e}:{s} of axis 0 (the batch) of the last step's "
                              f"{shape_text((None,) + x.shape)}; a stream keeps every stream")
        if a != 1 or any(d != 1 for d in x.shape[1:]):
            walk.refuse(node, f"slices {b}:{e}:{s} of axis {a} of the last step's "
                              f"{shape_text((None,) + x.shape)}; a stream slices a head along "
                              f"its channels (axis 1) where every axis after it is 1 ([N, C] or "
                              f"[N, C, 1]: Flatten or Squeeze it first)")
        rest = x.shape[1:]              # the 1s after the channels ([N, C, 1]: torch's [-1:])
        sliced = _channel_slice(walk, node, Head(x.frame, (x.size,)), b, e, s)
        x = Head(sliced.frame, sliced.shape + rest)
    return x


def _channel_slice(walk, node: Node, x, b: int, e: int, s: int):
    """Channels b:e:s of each step's frame (ONNX Slice's clamping, as Python's): a ChannelSlice
    op, or `x` itself where it keeps them all (a Split of the channel axis, a gated unit's
    halves, comes as such Slices)."""
    picked = range(x.size)[b:e:s] if s else range(0)
    if not picked:
        walk.refuse(node, f"slices {b}:{e}:{s} of the channel axis of {x.size}: no channel "
                          f"left")
    if picked == range(x.size):
        return x
    op = ChannelSlice(x.frame, "", picked.start, picked.step, node.name)
    return like(x, walk.emit(op, node, len(picked)), len(picked))


def reshape(walk, node: Node):
    """Reshape, Squeeze, Unsqueeze: a sequence keeps its [N, C, T]; a head any shape that keeps
    the batch first (the frame is the same numbers in the same order)."""
    x = walk.frame_input(node, 0)
    src, out = _dims3(node), tuple(node.outputs[0].shape or ())
    if isinstance(x, Sequence):
        if len(out) == 3 and out[1] == x.channels and out[2] == src[2]:
            return x
        walk.refuse(node, f"reshapes the sequence {list(src)} to {list(out)}: the time axis "
                          f"must stay the last axis of [N, C, T] (merging it or moving it "
                          f"mixes steps)")
    shape = _head_shape(walk, node, x)
    if isinstance(shape, str):
        walk.refuse(node, f"{shape}; a stream keeps the batch axis first")
    return Head(x.frame, shape)


def _head_shape(walk, node: Node, x: Head):
    """The shape (without the batch) a Reshape, Squeeze or Unsqueeze gives the head `x`, or
    a string saying why it moves the batch axis."""
    rank = len(x.shape) + 1
    axes = None
    if len(node.inputs) > 1:
        axes = [int(a) for a in walk.integers(node, 1, "its shape or axes").reshape(-1)]
    if axes is None and node.type != "Squeeze":
        return f"a {node.type} without its shape or axes input"
    if node.type == "Squeeze":
        axes = [a % rank for a in axes] if axes is not None else \
            [i + 1 for i, d in enumerate(x.shape) if d == 1]
        if 0 in axes or any(x.shape[a - 1] != 1 for a in axes):
            return f"squeezes axes {axes} of {[None, *x.shape]}"
        return tuple(d for i, d in enumerate(x.shape) if i + 1 not in axes)
    if node.type == "Unsqueeze":
        axes = sorted(a % (rank + len(axes)) for a in axes)
        if 0 in axes:
            return "puts an axis before the batch"
        dims = list(x.shape)
        for a in axes:
            dims.insert(a - 1, 1)
        return tuple(dims)
    target = list(axes)
    if str(node.attrs.get("special_zero", "false")).lower() == "true":
        full = ["N"] + list(x.shape)           # 0 copies the input's dim: the batch first
        target = [full[i] if v == 0 and i < len(full) else v for i, v in enumerate(target)]
    if target and (target[0] in ("N", -1) or target[0] == walk.batch):
        rest = target[1:]
        known = int(np.prod([v for v in rest if v != -1], dtype=np.int64))
        if target[0] != -1 and rest.count(-1) == 1 and known and x.size % known == 0:
            rest = [x.size // known if v == -1 else v for v in rest]
        if -1 not in rest and int(np.prod(rest, dtype=np.int64)) == x.size:
            return tuple(int(v) for v in rest)
    return f"reshapes {[None, *x.shape]} to {[None if v == 'N' else v for v in target]}"


def softmax(walk, node: Node):
    x = walk.frame_input(node, 0)
    rank = 3 if isinstance(x, Sequence) else len(x.shape) + 1
    axis = walk.attr(node, "axis", 1, int) % rank
    if isinstance(x, Sequence) and axis == 2:
        walk.refuse(node, "a softmax over the time axis: its output at every step depends on "
                          "every step of the window (mixes steps)")
    if axis == 0:
        walk.refuse(node, f"{node.type} over the batch axis")
    if isinstance(x, Head) and any(d != 1 for i, d in enumerate(x.shape) if i != axis - 1):
        walk.refuse(node, f"{node.type} over axis {axis} of {[None] + list(x.shape)}: a stream "
                          f"takes the softmax of a whole frame")
    log = node.type == "LogSoftmax"
    return like(x, walk.emit(ChannelSoftmax(x.frame, "", log, node.name), node, x.size))


LAYERS = {"Gather": gather, "Slice": slice_, "Reshape": reshape, "Squeeze": reshape,
          "Unsqueeze": reshape, "SoftMax": softmax, "LogSoftmax": softmax}
