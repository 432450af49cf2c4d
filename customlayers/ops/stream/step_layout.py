"""Where a step kernel keeps everything: the packed parameters, the ring buffers, the frames.

One float buffer holds every weight, bias and per-channel constant of the program, at offsets
the generated kernel text names as literals (the kernel is generated per model). A causal
convolution's weights are stored in one of two orders, for the kernel's two forms:
- [tap][input channel][output channel] (the CPU form, step_kernel.py): a work-item's loop over
  a block of neighbouring output channels reads neighbouring floats, which PoCL vectorizes;
- rows=True, [tap][output channel][input channels padded to 4] (the GPU form, step_gpu.py):
  one work-item takes one row, a dot product of float4s; every block 4-aligned, and the rings'
  rows padded to 4 floats too (`stride`).

The state is [N, S]: per stream, each convolution with history keeps its last L = (k-1)*d input
frames of C_in channels, slot s (the frame of step s lives at slot s mod L), at its own offset;
the CPU form then keeps the stream's step count (a uint, `step_at`), which the GPU form's host
gives by value instead. Every frame of the step lives in local memory, at its own offset (frames are written once per
step, so none shares another's place).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .program import Binary, CausalConv, StreamProgram


@dataclass(frozen=True)
class ConvParams:
    """Offsets (in floats) of one convolution's parameters in the packed buffer."""
    past: int          # taps j < k-1: [k-1][C_in/groups][C_out] (rows: [k-1][C_out][row])
    current: int       # tap k-1: [C_in/groups][C_out] (rows: [C_out][row])
    bias: int | None   # [C_out], None when the convolution has none
    row: int = 0       # rows: C_in/groups rounded up to 4, the floats of one weight row


@dataclass(frozen=True)
class Ring:
    """One convolution's history in the state buffer: `length` frames of `channels` floats
    from `offset` (floats, per stream), each `stride` floats after the last."""
    name: str
    offset: int
    length: int
    channels: int
    stride: int


@dataclass(frozen=True)
class OutputSlot:
    name: str
    frame: str
    offset: int        # in the per-stream output row
    size: int
    shape: tuple


@dataclass
class StepLayout:
    params: np.ndarray                              # the packed float32 buffer
    conv_params: dict = field(default_factory=dict)     # id(op) -> ConvParams
    constants: dict = field(default_factory=dict)       # id(op) -> offset of a [C] constant
    rings: dict = field(default_factory=dict)           # id(op) -> Ring
    state_floats: int = 0                           # S: floats of state per stream
    step_at: int = 0          # the CPU form's step count (a uint, modulo `period`) in its state
    period: int = 1
    frames: dict = field(default_factory=dict)          # frame name -> local offset (floats)
    frame_floats: int = 0
    outputs: tuple = ()                             # OutputSlot, in the program's order
    output_floats: int = 0                          # floats of output per stream


def layout(program: StreamProgram, rows: bool = False) -> StepLayout:
    """The packed parameters, the rings, the frames' places and the output row of `program`
    (rows: the GPU form's weight rows, above)."""
    blocks: list[np.ndarray] = []
    used = 0
    align = _round4 if rows else int

    def put(array: np.ndarray) -> int:
        nonlocal used
        flat = np.ascontiguousarray(array, np.float32).reshape(-1)
        if rows:                          # every block 4-aligned
            flat = np.concatenate([flat, np.zeros(-flat.size % 4, np.float32)])
        blocks.append(flat)
        used += flat.size
        return used - flat.size

    out = StepLayout(params=np.zeros(0, np.float32))
    for op in program.ops:
        if isinstance(op, CausalConv):
            w = np.asarray(op.weight, np.float32)                # [C_out, C_in/g, k]
            if rows:
                cout, cin_g = w.shape[0], w.shape[1]
                row = _round4(cin_g)
                taps = np.zeros((op.kernel, cout, row), np.float32)   # [tap][C_out][row]
                taps[:, :, :cin_g] = w.transpose(2, 0, 1)
                past = put(taps[:-1]) if op.kernel > 1 else 0
                current = put(taps[-1])
            else:
                row = 0
                past = put(w[:, :, :-1].transpose(2, 1, 0)) if op.kernel > 1 else 0
                current = put(w[:, :, -1].T)
            bias = put(op.bias) if op.bias is not None else None
            out.conv_params[id(op)] = ConvParams(past, current, bias, row)
            if op.history:
                channels = program.frames[op.src]
                stride = align(channels)
                out.rings[id(op)] = Ring(op.name or op.dst, out.state_floats, op.history,
                                         channels, stride)
                out.state_floats += op.history * stride
        elif isinstance(op, Binary) and op.constant is not None and op.constant.size > 1:
            out.constants[id(op)] = put(op.constant)
    if out.rings:
        out.period = _period(r.length for r in out.rings.values())
        if not rows:
            # the CPU form: each stream keeps its own step count, so no step needs an argument
            # set anew (the GPU form's host counts the steps and gives t by value)
            out.step_at = out.state_floats
            out.state_floats += 1
    out.params = np.concatenate(blocks) if blocks else np.zeros(1, np.float32)
    if out.params.size == 0:
        out.params = np.zeros(1, np.float32)
    out.state_floats = align(out.state_floats)     # rows: each stream's state 16-byte aligned
    for name, channels in program.frames.items():
        out.frames[name] = out.frame_floats
        out.frame_floats += align(int(channels))
    slots = []
    for o in program.outputs:
        size = int(program.frames[o.frame])
        slots.append(OutputSlot(o.name, o.frame, out.output_floats, size, tuple(o.shape)))
        out.output_floats += size
    out.outputs = tuple(slots)
    return out


def _round4(n: int) -> int:
    return (int(n) + 3) // 4 * 4


def _period(lengths) -> int:
    """The step count is kept modulo the rings' lengths' least common multiple (every ring
    reads t mod its length), so it never overflows; past 2^31 (a pathological mix of lengths)
    modulo 2^31 instead, a ring then off only after 2^31 steps."""
    period = 1
    for length in lengths:
        period = math.lcm(period, int(length))
        if period >= 2 ** 31:
            return 2 ** 31
    return period
