"""A numpy stepper of a StreamProgram (program.py): the oracle the device step is tested
against. float64 arithmetic; each causal convolution keeps its last (k-1)*d input frames."""
from __future__ import annotations

import numpy as np
from math import erf as _erf

from .program import (Binary, CausalConv, ChannelSlice, ChannelSoftmax, Pointwise,
                      StreamProgram)

_erf_v = np.vectorize(_erf, otypes=[np.float64])

POINTWISE_NUMPY = {
    "identity": lambda x: x,
    "relu": lambda x: np.maximum(x, 0.0),
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "tanh": np.tanh, "exp": np.exp, "log": np.log, "abs": np.abs, "neg": np.negative,
    "sqrt": np.sqrt, "erf": _erf_v,
    "softplus": lambda x: np.logaddexp(0.0, x),
    "silu": lambda x: x / (1.0 + np.exp(-x)),
    "leaky_relu": lambda x, a: np.where(x >= 0, x, a * x),
    "elu": lambda x, a: np.where(x >= 0, x, a * (np.exp(x) - 1.0)),
    "clip": lambda x, lo, hi: np.clip(x, lo, hi),
    "gelu_erf": lambda x: 0.5 * x * (1.0 + _erf_v(x / np.sqrt(2.0))),
    "gelu_tanh": lambda x: 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) *
                                                    (x + 0.044715 * x ** 3))),
    "hard_sigmoid": lambda x, a, b: np.clip(a * x + b, 0.0, 1.0),
}
BINARY_NUMPY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
                "max": np.maximum, "min": np.minimum}


class ReferenceStream:
    """step(frame [N, C_in]) -> {output name: array}; reset() forgets the history."""

    def __init__(self, program: StreamProgram, batch: int):
        program.check()
        self.program = program
        self.batch = batch
        self.reset()

    def reset(self) -> None:
        self.t = 0
        # per convolution with history: its input frames of the last (k-1)*d steps, oldest
        # first ([N, C_in, history])
        self.history = {id(op): np.zeros((self.batch, self.program.frames[op.src], op.history))
                        for op in self.program.convolutions}

    def step(self, frame: np.ndarray) -> dict:
        p = self.program
        frame = np.asarray(frame, np.float64)
        if frame.shape != (self.batch, p.input_channels):
            raise ValueError(f"frame of shape {frame.shape}; expected "
                             f"{(self.batch, p.input_channels)}")
        values = {p.input: frame}
        for op in p.ops:
            values[op.dst] = _run(op, values, self.history, p.frames)
        for op in p.convolutions:        # the newest input frame joins the history
            h = self.history[id(op)]
            h[:, :, :-1] = h[:, :, 1:]
            h[:, :, -1] = values[op.src]
        self.t += 1
        return {o.name: values[o.frame].reshape((self.batch,) + tuple(o.shape))
                for o in p.outputs}


def _run(op, values, history, frames):
    if isinstance(op, CausalConv):
        x = values[op.src]                                   # [N, C_in]
        k, d = op.kernel, op.dilation
        if op.history:
            # taps j = 0..k-1 read the step t-(k-1-j)*d: the history's oldest is t-(k-1)*d
            past = history[id(op)]
            taps = [past[:, :, j * d] for j in range(k - 1)] + [x]
        else:
            taps = [x]
        w = op.weight.astype(np.float64)                     # [C_out, C_in/g, k]
        n, cout = x.shape[0], w.shape[0]
        g = op.groups
        cin_g, cout_g = x.shape[1] // g, cout // g
        out = np.zeros((n, cout))
        for grp in range(g):
            xs = [tap[:, grp * cin_g:(grp + 1) * cin_g] for tap in taps]
            ws = w[grp * cout_g:(grp + 1) * cout_g]
            for j in range(k):
                out[:, grp * cout_g:(grp + 1) * cout_g] += xs[j] @ ws[:, :, j].T
        if op.bias is not None:
            out += op.bias.astype(np.float64)
        return out
    if isinstance(op, Pointwise):
        return POINTWISE_NUMPY[op.kind](values[op.src], *op.params)
    if isinstance(op, Binary):
        a = values[op.a]
        b = values[op.b] if op.b is not None else op.constant.astype(np.float64).reshape(1, -1)
        if op.constant_first:
            a, b = b, a
        return BINARY_NUMPY[op.kind](a, b)
    if isinstance(op, ChannelSlice):
        picked = op.start + op.step * np.arange(frames[op.dst])
        return values[op.src][:, picked]
    if isinstance(op, ChannelSoftmax):
        x = values[op.src]
        z = x - x.max(axis=1, keepdims=True)
        s = np.log(np.exp(z).sum(axis=1, keepdims=True))
        return z - s if op.log else np.exp(z - s)
    raise TypeError(f"unknown stream op {op!r}")
