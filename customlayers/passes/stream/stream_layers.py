"""Each layer a causal model streams, as the frame ops (ops/stream/program.py) of one step: the
handlers causal_stream.py calls per IR type (those of the head, the last step, in
stream_head.py), and why each other layer cannot stream.

A value the step knows is a Sequence (a tensor [N, C, T] of the model: its frame [N, C] at the
current step) or a Head (a tensor without the time axis, computed from the last step only:
[N] + shape, one flat frame per stream). Constants are numpy arrays. A handler reads its
inputs through the walk (`walk.input`, `walk.const`), adds ops with `walk.emit` and returns
the value of the layer's output; what it cannot stream it refuses with `walk.refuse(node,
why)`, which raises.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ...graph.graph import Node
from ...ops.stream.program import Binary, CausalConv, Pointwise
from .stream_constants import channel_vector, head_vector


@dataclass(frozen=True)
class Sequence:
    """A tensor [N, C, T]: at each step, the frame `frame` of `channels` values per stream.
    `extra` > 0: the tensor has `extra` steps more at its end (a convolution `padded` at the
    end, torch's causal convolution before its chomp): its steps 0..T-1 are the stream's, and
    it streams only once a Slice cuts the extra steps off (a symbolic time axis, where the
    window-folding pass does not fold the chomp into the padding)."""
    frame: str
    channels: int
    extra: int = 0
    padded: Node | None = None
    padded_history: int = 0       # its (k-1)*d, for the message

    @property
    def size(self) -> int:
        return self.channels


@dataclass(frozen=True)
class Head:
    """A tensor [N] + shape computed from the last step: the frame `frame` of its elements."""
    frame: str
    shape: tuple

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


def like(value, frame: str, size: int | None = None):
    """A value of the same kind (and shape, and extra steps) as `value` held in `frame`."""
    if isinstance(value, Sequence):
        return replace(value, frame=frame, channels=value.channels if size is None else size)
    return Head(frame, value.shape if size is None else (size,))


def not_causal(end: int, history: int) -> str:
    """Why a convolution padded `end` steps at the end does not stream."""
    return (f"pads_end {end} on the time axis (its padding at the end, less what a Slice after "
            f"it already cuts off): its output at step t reads the input at steps after t (not "
            f"causal); a causal convolution pads (k-1)*d = {history} at the start and 0 at the "
            f"end, or is followed by a Slice that cuts all of its end padding off (through "
            f"per-step layers only): here {end} more step(s)")


def _ints(walk, node: Node, key: str, default: int) -> list[int]:
    """An attribute's list of ints ("1,2"); [default] when absent or empty."""
    text = node.attrs.get(key)
    if text is None:
        return [default]
    try:
        return [int(v) for v in str(text).replace(" ", "").split(",") if v] or [default]
    except ValueError:
        walk.refuse(node, f"{key}='{text}' is not a list of integers")


# -- convolutions ----------------------------------------------------------------------------
def convolution(walk, node: Node):
    x = walk.sequence(node, 0, "convolves")
    w = walk.const(node, 1, "its weights")
    grouped = node.type == "GroupConvolution"
    if w.ndim != (4 if grouped else 3):
        walk.refuse(node, f"weights of shape {list(w.shape)}: a stream steps 1-D convolutions "
                          f"over [N, C, T]")
    groups = w.shape[0] if grouped else 1
    weight = w.reshape((-1,) + w.shape[-2:]) if grouped else w
    k = int(weight.shape[2])
    strides, dilations = _ints(walk, node, "strides", 1), _ints(walk, node, "dilations", 1)
    if strides != [1]:
        walk.refuse(node, f"stride {strides[0]} over time: its output has fewer steps than its "
                          f"input (downsampling), which no step-by-step form keeps")
    d = dilations[0]
    if k < 1 or d < 1 or len(dilations) != 1:
        walk.refuse(node, f"kernel {k} with dilations {dilations}: a 1-D convolution has a "
                          f"kernel and a dilation of at least 1")
    begin, end = _pads(walk, node, k, d)
    history = (k - 1) * d
    if begin != history:
        walk.refuse(node, f"pads_begin {begin} on the time axis with kernel {k} and dilation "
                          f"{d}: a causal convolution pads (k-1)*d = {history} at the start, so "
                          f"that its output at step t reads the input at steps t-{history}..t")
    if weight.shape[1] * groups != x.channels:
        walk.refuse(node, f"weights of shape {list(w.shape)} do not read {x.channels} channels")
    cout = int(weight.shape[0])
    if end < 0:
        walk.refuse(node, f"pads_end {end} on the time axis: a stream keeps every step")
    dst = walk.emit(CausalConv(x.frame, "", weight, None, d, groups, node.name), node, cout)
    return Sequence(dst, cout, end, node if end else None, history if end else 0)


def _pads(walk, node: Node, k: int, d: int) -> tuple[int, int]:
    """(begin, end) padding of the time axis, auto_pad worked out."""
    auto = (node.attrs.get("auto_pad") or "explicit").lower()
    total = (k - 1) * d
    if auto == "valid":
        return 0, 0
    if auto in ("same_upper", "same_lower"):
        small = total // 2
        return (small, total - small) if auto == "same_upper" else (total - small, small)
    return _ints(walk, node, "pads_begin", 0)[-1], _ints(walk, node, "pads_end", 0)[-1]


def matmul(walk, node: Node):
    """A dense layer on a head frame (x @ W, W constant) or a per-step one on a sequence
    (W @ x: a 1x1 convolution): a CausalConv of kernel 1."""
    ta = str(node.attrs.get("transpose_a", "false")).lower() == "true"
    tb = str(node.attrs.get("transpose_b", "false")).lower() == "true"
    a, b = walk.input(node, 0), walk.input(node, 1)
    if isinstance(a, Head) and isinstance(b, np.ndarray) and not ta and len(a.shape) == 1 \
            and b.ndim == 2:
        w = b if tb else b.T                                   # [M, C]
        if w.shape[1] != a.size:
            walk.refuse(node, f"a weight of shape {list(b.shape)} does not read {a.size} values")
        dst = walk.emit(CausalConv(a.frame, "", w[:, :, None], None, 1, 1, node.name), node,
                        w.shape[0])
        return Head(dst, (int(w.shape[0]),))
    if isinstance(a, np.ndarray) and isinstance(b, Sequence) and not tb and a.ndim == 2:
        w = a.T if ta else a                                   # [M, C]
        if w.shape[1] != b.channels:
            walk.refuse(node, f"a weight of shape {list(a.shape)} does not read {b.channels} "
                              f"channels")
        dst = walk.emit(CausalConv(b.frame, "", w[:, :, None], None, 1, 1, node.name), node,
                        w.shape[0])
        return Sequence(dst, int(w.shape[0]))
    if isinstance(a, Sequence) or isinstance(b, Sequence) and not isinstance(a, np.ndarray):
        walk.refuse(node, "multiplies along the time axis of a sequence [N, C, T] (its output "
                          "at a step reads every step): mixes steps")
    walk.refuse(node, "a stream runs a MatMul as a dense layer of a constant weight on the last "
                      "step's frame ([N, C] @ W) or on every step's channels (W @ [N, C, T])")


# -- per element -----------------------------------------------------------------------------
_UNARY = {"ReLU": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Exp": "exp", "Log": "log",
          "Abs": "abs", "Negative": "neg", "Sqrt": "sqrt", "Erf": "erf", "SoftPlus": "softplus"}


def pointwise(walk, node: Node):
    x = walk.frame_input(node, 0)
    kind, params = _UNARY.get(node.type), ()
    if node.type == "Elu":
        kind, params = "elu", (walk.attr(node, "alpha", 1.0),)
    elif node.type == "Clamp":
        kind, params = "clip", (walk.attr(node, "min"), walk.attr(node, "max"))
    elif node.type == "Gelu":
        mode = (node.attrs.get("approximation_mode") or "erf").lower()
        kind = {"erf": "gelu_erf", "tanh": "gelu_tanh"}.get(mode)
        if kind is None:
            walk.refuse(node, f"approximation_mode '{mode}' is not erf or tanh")
    elif node.type in ("HSigmoid", "HardSigmoid"):
        alpha, beta = (1 / 6, 0.5) if node.type == "HSigmoid" else \
            (walk.scalar(node, 1, "alpha"), walk.scalar(node, 2, "beta"))
        kind, params = "hard_sigmoid", (alpha, beta)
    return like(x, walk.emit(Pointwise(kind, x.frame, "", params, node.name), node, x.size))


def composite(walk, node: Node):
    """Activations a chain of frame ops computes exactly as written (x * sigmoid(x), ...)."""
    x = walk.frame_input(node, 0)

    def op(kind, src, params=(), part=""):
        return walk.emit(Pointwise(kind, src, "", params, node.name), node, x.size, part)

    def binary(kind, a, b=None, constant=None, part=""):
        c = None if constant is None else np.asarray(constant, np.float32).reshape(-1)
        return walk.emit(Binary(kind, a, "", b, c, False, node.name), node, x.size, part)

    t = node.type
    if t == "Swish" and len(node.inputs) < 2:
        out = op("silu", x.frame)
    elif t == "Swish":                                # x * sigmoid(beta * x)
        beta = walk.scalar(node, 1, "beta")
        out = binary("mul", x.frame, op("sigmoid", binary("mul", x.frame, constant=beta,
                                                          part="scaled"), part="gate"))
    elif t == "HSwish":                               # x * clip(x / 6 + 1 / 2, 0, 1)
        out = binary("mul", x.frame, op("hard_sigmoid", x.frame, (1 / 6, 0.5), "gate"))
    elif t == "Mish":                                 # x * tanh(softplus(x))
        out = binary("mul", x.frame, op("tanh", op("softplus", x.frame, part="softplus"),
                                        part="gate"))
    elif t == "SoftSign":                             # x / (1 + |x|)
        out = binary("div", x.frame, binary("add", op("abs", x.frame, part="abs"),
                                            constant=1.0, part="denominator"))
    elif t == "Selu":                                 # lambda * elu(x, alpha)
        alpha, lam = walk.scalar(node, 1, "alpha"), walk.scalar(node, 2, "lambda")
        out = binary("mul", op("elu", x.frame, (alpha,), "elu"), constant=lam)
    else:                                             # PRelu
        slope = walk.const(node, 1, "its slope")
        if slope.size == 1:
            out = op("leaky_relu", x.frame, (float(slope.reshape(-1)[0]),))
        else:                                         # relu(x) + slope * min(x, 0): exact
            per = _operand(walk, node, x, _per_channel(x, slope))
            neg = binary("mul", binary("min", x.frame, constant=0.0, part="negative"),
                         constant=per, part="sloped")
            out = binary("add", op("relu", x.frame, part="positive"), neg)
    return like(x, out)


_BINARY = {"Add": "add", "Subtract": "sub", "Multiply": "mul", "Divide": "div",
           "Maximum": "max", "Minimum": "min"}


def binary(walk, node: Node):
    kind = _BINARY[node.type]
    a, b = walk.input(node, 0), walk.input(node, 1)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        first = isinstance(a, np.ndarray)
        x, c = (b, a) if first else (a, b)
        vec = _operand(walk, node, x, c)
        size = max(x.size, vec.size)          # a sequence of 1 channel grows to the constant's
        out = walk.emit(Binary(kind, x.frame, "", None, vec, first, node.name), node, size)
        return like(x, out, size if isinstance(x, Sequence) else None)
    if type(a) is not type(b):
        walk.refuse(node, "combines a sequence [N, C, T] with a tensor of the last step: every "
                          "step would read the window's last step (mixes steps)")
    if isinstance(a, Sequence):
        if a.channels != b.channels and 1 not in (a.channels, b.channels):
            walk.refuse(node, f"operands of {a.channels} and {b.channels} channels")
        if a.extra != b.extra:                 # the one padded at the end is not cut yet
            walk.settled(a if a.extra > b.extra else b)
        size = max(a.channels, b.channels)
        return replace(a, frame=walk.emit(Binary(kind, a.frame, "", b.frame, name=node.name),
                                          node, size), channels=size)
    if a.shape != b.shape and 1 not in (a.size, b.size):
        walk.refuse(node, f"operands of shapes {list(a.shape)} and {list(b.shape)}: a stream "
                          f"combines equal shapes or one number")
    big = a if a.size >= b.size else b
    return like(big, walk.emit(Binary(kind, a.frame, "", b.frame, name=node.name), node,
                                big.size))


def _operand(walk, node: Node, x, constant: np.ndarray) -> np.ndarray:
    """A constant operand of `x` as a frame op takes it, or the layer refused."""
    if isinstance(x, Sequence):
        vec = channel_vector(constant, 3, x.channels, time_axis=True)
    else:
        vec = head_vector(constant, x.shape)
    if isinstance(vec, str):
        walk.refuse(node, vec)
    return vec


def _per_channel(x, slope: np.ndarray) -> np.ndarray:
    """PRelu's slope: a 1-D one of one value per channel (axis 1) applies per channel; any
    other broadcasts with numpy's rules."""
    channels = x.channels if isinstance(x, Sequence) else (x.shape or (0,))[0]
    if slope.ndim != 1 or slope.size != channels:
        return slope
    rank = 3 if isinstance(x, Sequence) else len(x.shape) + 1
    return slope.reshape((1, channels) + (1,) * (rank - 2))


def batch_norm(walk, node: Node):
    """BatchNormInference: x * a + b per channel (a = gamma / sqrt(var + eps))."""
    x = walk.frame_input(node, 0)
    gamma, beta, mean, var = (walk.const(node, i, what).astype(np.float64).reshape(-1)
                              for i, what in ((1, "gamma"), (2, "beta"), (3, "mean"),
                                              (4, "variance")))
    eps = walk.attr(node, "epsilon", 1e-5)
    a = gamma / np.sqrt(var + eps)
    shift = beta - mean * a
    channels = x.channels if isinstance(x, Sequence) else (x.shape[0] if x.shape else 0)
    if a.size != channels:
        walk.refuse(node, f"{a.size} scales for {channels} channels")
    per = (1, channels) + (1,) * (len(x.shape) - 1 if isinstance(x, Head) else 1)
    scaled = walk.emit(Binary("mul", x.frame, "", None, _operand(walk, node, x, a.reshape(per)),
                              name=node.name), node, x.size, "scaled")
    return like(x, walk.emit(Binary("add", scaled, "", None,
                                     _operand(walk, node, x, shift.reshape(per)),
                                     name=node.name), node, x.size))



def identity(walk, node: Node):
    """Identity, and a Convert to f32 (every frame is float32): the value as it is."""
    if node.type == "Convert" and node.attrs.get("destination_type", "f32") != "f32":
        walk.refuse(node, f"converts to {node.attrs.get('destination_type')}; a stream's frames "
                          f"are f32")
    return walk.frame_input(node, 0)


# the handlers that take a sequence with extra steps at its end (per step, or the Slice that
# cuts them): every other refuses it, naming the convolution padded at the end
KEEP_EXTRA = ("pointwise", "composite", "binary", "batch_norm", "slice_", "identity")

LAYERS = {
    "Convolution": convolution, "GroupConvolution": convolution, "MatMul": matmul,
    **{t: pointwise for t in _UNARY}, "Elu": pointwise, "Clamp": pointwise, "Gelu": pointwise,
    "HSigmoid": pointwise, "HardSigmoid": pointwise,
    **{t: composite for t in ("Swish", "HSwish", "Mish", "SoftSign", "Selu", "PRelu")},
    **{t: binary for t in _BINARY}, "BatchNormInference": batch_norm, "Identity": identity,
    "Convert": identity,
}

# why a layer that is not in LAYERS cannot stream, by type
_POOL = ("pools over the time axis: one output step reads a window of input steps, or all of "
         "them (mixes steps)")
TIME_MIXING = {
    "MaxPool": _POOL, "AvgPool": _POOL, "AdaptiveAvgPool": _POOL, "AdaptiveMaxPool": _POOL,
    "CumSum": "accumulates along an axis (a running sum over time is state a stream keeps "
              "only for convolutions)",
    "Pad": "pads the sequence: only a zero Pad of the start of the time axis right before a "
           "convolution streams (it folds into the convolution's padding)",
    "ConvolutionBackpropData": "a transposed convolution upsamples time: mixes steps",
    "GroupConvolutionBackpropData": "a transposed convolution upsamples time: mixes steps",
    "Interpolate": "resamples the time axis: mixes steps",
    "MVN": "normalizes over the window: mixes steps",
    "NormalizeL2": "normalizes over an axis: mixes steps or channels",
    "ReverseSequence": "reverses time: mixes steps",
    "Roll": "shifts along an axis: mixes steps",
}
