"""StreamPrograms built by hand (ops/stream/program.py), for the step kernel's tests and bench:
every kind of op, in the forms a converted model gives."""
from __future__ import annotations

import numpy as np

from customlayers.ops.stream.program import (POINTWISE, Binary, CausalConv, ChannelSlice,
                                             ChannelSoftmax, Pointwise, StreamOutput,
                                             StreamProgram)


class Builder:
    def __init__(self, cin: int, seed: int = 0, name: str = "x"):
        self.rng = np.random.default_rng(seed)
        self.frames = {name: cin}
        self.ops: list = []
        self.input, self.cin = name, cin
        self.count = 0

    def _new(self, channels: int, prefix: str) -> str:
        self.count += 1
        name = f"{prefix}{self.count}"
        self.frames[name] = channels
        return name

    def conv(self, src, cout, k=1, d=1, groups=1, bias=True, scale=1.0):
        cin = self.frames[src]
        w = self.rng.standard_normal((cout, cin // groups, k)) * scale / np.sqrt(cin // groups * k)
        b = self.rng.standard_normal(cout).astype(np.float32) * 0.1 if bias else None
        dst = self._new(cout, "conv")
        self.ops.append(CausalConv(src, dst, w.astype(np.float32), b, d, groups, name=dst))
        return dst

    def pw(self, src, kind, *params):
        dst = self._new(self.frames[src], kind)
        self.ops.append(Pointwise(kind, src, dst, tuple(params), name=dst))
        return dst

    def binary(self, kind, a, b=None, constant=None, constant_first=False):
        c = max(self.frames[a], self.frames[b] if b else 1,
                np.asarray(constant).size if constant is not None else 1)
        dst = self._new(c, kind)
        const = None if constant is None else np.asarray(constant, np.float32).reshape(-1)
        self.ops.append(Binary(kind, a, dst, b, const, constant_first, name=dst))
        return dst

    def softmax(self, src, log=False):
        dst = self._new(self.frames[src], "softmax")
        self.ops.append(ChannelSoftmax(src, dst, log, name=dst))
        return dst

    def slice(self, src, start, count, step=1):
        dst = self._new(count, "slice")
        self.ops.append(ChannelSlice(src, dst, start, step, name=dst))
        return dst

    def program(self, outputs) -> StreamProgram:
        outs = tuple(StreamOutput(name, frame, (self.frames[frame],)) for name, frame in outputs)
        p = StreamProgram(self.input, self.cin, dict(self.frames), tuple(self.ops), outs)
        p.check()
        return p


def tcn(levels=8, channels=25, kernel=7, cin=1, classes=10, seed=0) -> StreamProgram:
    """The seed's TCN as a stream: per level two causal convolutions (dilation 2^level) with
    ReLU, a 1x1 downsample where the channels change, the residual Add and ReLU; the head a
    dense layer on the last frame and a LogSoftmax."""
    b = Builder(cin, seed)
    x = b.input
    for level in range(levels):
        d = 2 ** level
        h = b.pw(b.conv(x, channels, kernel, d, scale=0.3), "relu")
        h = b.pw(b.conv(h, channels, kernel, d, scale=0.3), "relu")
        res = b.conv(x, channels, 1) if b.frames[x] != channels else x
        x = b.pw(b.binary("add", h, res), "relu")
    y = b.softmax(b.conv(x, classes, 1, scale=0.2), log=True)
    return b.program([("y", y)])


def every_op(channels=37, seed=1) -> StreamProgram:
    """Dilated convolutions of kernel 2, 3 and 7 (dilation up to 128), grouped and depthwise,
    a dense k=1 layer, every pointwise kind, binaries with frames and constants (per channel,
    one number, constant first, a one-channel operand), softmax and log-softmax, three
    outputs."""
    b = Builder(3, seed)
    x = b.conv(b.input, channels, 2, 1)
    x = b.conv(x, channels, 3, 128)
    g = b.conv(x, channels - 1 if channels % 2 else channels, 7, 5, scale=0.5)
    g = b.conv(g, 12, 3, 2, groups=2 if b.frames[g] % 2 == 0 else 1)
    dw = b.conv(g, 12, 7, 16, groups=12, bias=False)
    y = b.binary("add", b.conv(dw, channels, 1), x)
    pos = b.binary("add", b.pw(y, "abs"), constant=[0.5])          # > 0: log, sqrt
    outs = [b.pw(pos, "log"), b.pw(pos, "sqrt")]
    for kind, params in POINTWISE.items():
        if kind in ("log", "sqrt"):
            continue
        values = {"alpha": 0.2, "beta": 0.5, "min": -0.5, "max": 0.75}
        src = b.binary("mul", y, constant=[0.3]) if kind == "exp" else y
        outs.append(b.pw(src, kind, *[values[p] for p in params]))
    acc = outs[0]
    const = b.rng.standard_normal(channels).astype(np.float32)
    for i, o in enumerate(outs[1:]):
        kind = ("add", "sub", "max", "min", "mul")[i % 5]
        acc = b.binary(kind, acc, o)
    acc = b.binary("sub", acc, constant=const, constant_first=True)
    acc = b.binary("div", acc, constant=np.abs(const) + 1.0)
    one = b.conv(acc, 1, 3, 4)                                       # a one-channel frame
    acc = b.binary("mul", acc, b.pw(one, "sigmoid"))
    acc = b.binary("max", b.pw(one, "tanh"), acc)
    head = b.conv(acc, 10, 1)
    return b.program([("logp", b.softmax(head, log=True)), ("p", b.softmax(head)),
                      ("features", acc)])


def wide(channels=300, seed=2) -> StreamProgram:
    """More channels than a work-group has work-items, and a long receptive field of kernel 3
    and dilation 1 (the stack reaches further back than a short sequence)."""
    b = Builder(channels, seed)
    x = b.input
    for _ in range(3):
        x = b.pw(b.conv(x, channels, 3, 1), "tanh")
    k2 = b.conv(x, 5, 2, 1)
    return b.program([("y", x), ("k2", k2)])
