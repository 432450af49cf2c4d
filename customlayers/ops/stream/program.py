"""StreamProgram: one time step of a causal model, per stream, as a chain of ops on frames.

A frame is what one tensor of the model holds at one time step for one stream: a vector of
`channels` floats (a tensor [N, C, T] of the model is, at step t, the frames [n, :, t]). The
program's ops compute the frames of step t from the input frame of step t and the histories
the causal convolutions keep: a convolution of kernel k and dilation d reads its input at the
steps t, t-d, ..., t-(k-1)d, so it keeps the last (k-1)*d input frames (its ring buffer).
Frames before the first step are zeros: the zero padding of the whole-window model.

Made by passes/stream/causal_stream.py from a Graph; run by ops/stream/step_kernel.py on a device and by
ops/stream/reference.py in numpy. Every array is float32 and C-contiguous.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# pointwise kinds and the parameters each takes (params tuple, in this order)
POINTWISE = {
    "identity": (), "relu": (), "sigmoid": (), "tanh": (), "exp": (), "log": (), "abs": (),
    "neg": (), "sqrt": (), "erf": (), "softplus": (), "silu": (),
    "leaky_relu": ("alpha",), "elu": ("alpha",), "clip": ("min", "max"),
    "gelu_erf": (), "gelu_tanh": (), "hard_sigmoid": ("alpha", "beta"),
}
BINARY = ("add", "sub", "mul", "div", "max", "min")


@dataclass(frozen=True, eq=False)
class CausalConv:
    """dst[co] = bias[co] + sum over ci in co's group, j < k of
    weight[co, ci - group start, j] * src at step t - (k-1-j)*dilation.
    k == 1 is a pointwise (1x1) convolution or a dense layer (Gemm/MatMul on a head frame);
    it keeps no history. groups > 1: grouped (groups == channels: depthwise)."""
    src: str
    dst: str
    weight: np.ndarray          # [C_out, C_in / groups, k] float32
    bias: np.ndarray | None     # [C_out] float32, or None
    dilation: int = 1
    groups: int = 1
    name: str = ""              # the model's layer, for messages and state names

    @property
    def kernel(self) -> int:
        return int(self.weight.shape[2])

    @property
    def history(self) -> int:
        """How many past input frames it keeps: (k-1)*dilation."""
        return (self.kernel - 1) * self.dilation


@dataclass(frozen=True, eq=False)
class Pointwise:
    """dst[c] = f(src[c]); f is one of POINTWISE with its params."""
    kind: str
    src: str
    dst: str
    params: tuple = ()
    name: str = ""


@dataclass(frozen=True, eq=False)
class Binary:
    """dst[c] = a[c] op b[c], or with a constant: a[c] op constant[c] (constant_first:
    constant[c] op a[c]). A constant is [C] (per channel) or [1] (one number for all)."""
    kind: str                   # one of BINARY
    a: str
    dst: str
    b: str | None = None
    constant: np.ndarray | None = None
    constant_first: bool = False
    name: str = ""


@dataclass(frozen=True, eq=False)
class ChannelSoftmax:
    """dst = softmax(src) over the frame's channels (log: log_softmax)."""
    src: str
    dst: str
    log: bool = False
    name: str = ""


@dataclass(frozen=True, eq=False)
class ChannelSlice:
    """dst[c] = src[start + c * step] for each of dst's channels (a Slice, or a Split, of the
    channel axis: a gated unit's halves)."""
    src: str
    dst: str
    start: int
    step: int = 1
    name: str = ""


@dataclass(frozen=True)
class StreamOutput:
    """A model output as a step gives it: the frame `frame`, returned as an array of shape
    [N] + shape (shape: the output's shape without the batch, and without its time axis where
    the output has one: a per-step sequence output [N, C, T] gives [N, C] per step)."""
    name: str
    frame: str
    shape: tuple
    per_step_sequence: bool = False    # the output has a time axis (every step's frame)


@dataclass(frozen=True)
class StreamProgram:
    input: str                  # the model input's name (its frames: [N, input_channels])
    input_channels: int
    frames: dict                # frame name -> channels (the input's frame among them)
    ops: tuple                  # in order; each writes one frame no earlier op wrote
    outputs: tuple              # of StreamOutput
    notes: tuple = field(default=())   # what the conversion did, for messages

    @property
    def convolutions(self) -> list:
        """The causal convolutions that keep a history (k > 1), in program order: one ring
        buffer each."""
        return [op for op in self.ops if isinstance(op, CausalConv) and op.history > 0]

    def check(self) -> None:
        """Every op reads frames already written, writes a new one, and agrees with the channel
        counts: a ValueError naming the op otherwise (a bug of the maker, not the user's)."""
        known = {self.input}
        if self.frames.get(self.input) != self.input_channels:
            raise ValueError(f"input frame '{self.input}' has {self.frames.get(self.input)} "
                             f"channels, not {self.input_channels}")
        for op in self.ops:
            reads = [op.a] + ([op.b] if op.b else []) if isinstance(op, Binary) else [op.src]
            for r in reads:
                if r not in known:
                    raise ValueError(f"{op}: reads '{r}' before it is written")
            if op.dst in known:
                raise ValueError(f"{op}: writes '{op.dst}' a second time")
            known.add(op.dst)
            c = self.frames[op.dst]
            if isinstance(op, CausalConv):
                cin = self.frames[op.src]
                co, cig, _ = op.weight.shape
                if co != c or cig * op.groups != cin or c % op.groups:
                    raise ValueError(f"{op.name or op.dst}: weight {op.weight.shape} with "
                                     f"groups {op.groups} does not map {cin} to {c} channels")
            elif isinstance(op, Binary):
                sizes = {self.frames[op.a]} | ({self.frames[op.b]} if op.b else set())
                if op.constant is not None and op.constant.size not in (1, c):
                    raise ValueError(f"{op.name or op.dst}: constant of {op.constant.size}")
                if sizes - {c, 1}:
                    raise ValueError(f"{op.name or op.dst}: operands of {sizes} channels")
            elif isinstance(op, ChannelSlice):
                last = op.start + (c - 1) * op.step
                if c < 1 or op.step == 0 or not (0 <= op.start < self.frames[op.src] and
                                                 0 <= last < self.frames[op.src]):
                    raise ValueError(f"{op.name or op.dst}: channels {op.start}, "
                                     f"{op.start} + {op.step}k of {self.frames[op.src]}")
            elif self.frames[op.src] != c:
                raise ValueError(f"{op.name or op.dst}: {self.frames[op.src]} -> {c} channels")
        for out in self.outputs:
            if out.frame not in known:
                raise ValueError(f"output '{out.name}' reads frame '{out.frame}', never written")
