"""SignalDFT (ONNX DFT, opsets 17-20) and SignalSTFT (ONNX STFT-17) on f32 or f64 data: one
work-item per output bin, a direct O(length) sum (signal_dft.cl). One program per element type;
sizes, strides and the transform's form are kernel arguments.

A complex tensor holds (re, im) in a trailing dim of 2; a real one a trailing dim of 1. The
transform's length, axis, frame step and frame length are constant inputs (constants, or graph
inputs compiled in per value), read when the plan is compiled.
"""
from __future__ import annotations

import numpy as np

from ...errors import BindingError
from ...jit.launch import Arg, DEFAULT_CONTEXT, KernelLaunch
from .._program import global_1d, numel, program_text, shape_of
from ..base import Attr, Op, register_op

# the kernels index with int: a size past it is refused, not wrapped
INT_MAX = 2**31 - 1

# the sums read `length` values per output bin: past this a direct DFT is not what to run
MAX_LENGTH = 1 << 16
_FLOAT_TYPES = {"f32": "float", "f64": "double"}


def refuse(op_type: str, attrs, why: str) -> BindingError:
    return BindingError(f"layer '{getattr(attrs, 'layer', '?')}' ({op_type}): {why}")


def scalar(value: int) -> Arg:
    return Arg.scalar(np.int32(value))


def launch(source: str, entry: str, args, count: int, label: str) -> KernelLaunch:
    """One work-item per output element of `count` (padded; the kernels guard the tail)."""
    return KernelLaunch(source, entry, tuple(args), global_1d(count), label=label)


def _program(op_type: str, attrs, dtype: str) -> str:
    if dtype not in _FLOAT_TYPES:
        raise refuse(op_type, attrs, f"the input is {dtype}; this built-in runs f32 and f64")
    cl_type = _FLOAT_TYPES[dtype]
    return program_text(f"signal_{cl_type}", {"DATA_TYPE": cl_type}, "signal_dft.cl")


def _const_int(op_type: str, attrs, consts, k: int, what: str) -> int:
    if k not in consts:
        raise refuse(op_type, attrs, f"the {what} (input {k}) must be known when the plan is "
                                     f"compiled (a constant or a graph input)")
    value = np.asarray(consts[k]).reshape(-1)
    if value.size != 1 or value.dtype.kind not in "iu":
        raise refuse(op_type, attrs, f"the {what} (input {k}) must be one integer, found "
                                     f"{value.dtype} of {value.size} values")
    return int(value[0])


def _signal_shape(op_type: str, attrs, desc) -> tuple[int, ...]:
    shape = shape_of(desc)
    if len(shape) < 2 or shape[-1] not in (1, 2):
        raise refuse(op_type, attrs, f"the input's last dim must be 1 (real) or 2 (complex: "
                                     f"re, im); found shape {list(shape)}")
    return shape


def _check_length(op_type: str, attrs, what: str, value: int) -> int:
    if not 1 <= value <= MAX_LENGTH:
        raise refuse(op_type, attrs, f"the {what} {value} is not in 1..{MAX_LENGTH}")
    return value


@register_op
class SignalDFT(Op):
    """ONNX DFT: x [..., n, ..., 1 or 2], dft_length (input 1, <= 0: the axis' length, or
    2 * (n - 1) for the inverse of a one-sided spectrum), axis (input 2, not the last dim).
    Out: the axis becomes dft_length (dft_length // 2 + 1 one-sided), the last dim 2; the
    inverse of a one-sided spectrum is real (last dim 1)."""
    input_count = (3, 3)
    type = "SignalDFT"
    const_inputs = (1, 2)
    attributes = (Attr("inverse", "bool", False), Attr("onesided", "bool", False))

    def _geometry(self, attrs, inputs, consts):
        shape = _signal_shape(self.type, attrs, inputs[0])
        axis = _const_int(self.type, attrs, consts, 2, "axis")
        if not -len(shape) <= axis < len(shape) - 1:
            raise refuse(self.type, attrs, f"axis {axis} is out of range for an input of "
                                           f"shape {list(shape)} (the last dim holds re, im)")
        axis %= len(shape)
        n = shape[axis]
        length = _const_int(self.type, attrs, consts, 1, "dft_length")
        irfft = attrs["inverse"] and attrs["onesided"]
        if attrs["onesided"] and not attrs["inverse"] and shape[-1] == 2:
            raise refuse(self.type, attrs, "onesided=1 on a complex input (last dim 2): ONNX "
                                           "defines a one-sided forward DFT of a real input "
                                           "only")
        if length <= 0:
            length = 2 * (n - 1) if irfft else n
        _check_length(self.type, attrs, "dft_length", length)
        if irfft:
            bins, width = length, 1
        else:
            bins, width = (length // 2 + 1 if attrs["onesided"] else length), 2
        out = shape[:axis] + (bins,) + shape[axis + 1:-1] + (width,)
        if numel(out) > INT_MAX or numel(shape) > INT_MAX:
            raise refuse(self.type, attrs, f"an output of {list(out)} is too large")
        return shape, axis, length, out

    def infer_shapes(self, attrs, inputs, consts):
        _, _, _, out = self._geometry(attrs, inputs, consts)
        _program(self.type, attrs, inputs[0].dtype)
        return [(out, inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        shape, axis, length, out = self._geometry(attrs, inputs, consts)
        src = _program(self.type, attrs, inputs[0].dtype)
        n, inner = shape[axis], numel(shape[axis + 1:-1])
        outer, complex_in = numel(shape[:axis]), int(shape[-1] == 2)
        if attrs["inverse"] and attrs["onesided"]:
            count = numel(out)
            return [launch(src, "irfft", (
                Arg.input(0), Arg.output(0), scalar(count), scalar(length), scalar(inner),
                scalar(min(n, length // 2 + 1)), scalar(n * inner), scalar(inner),
                scalar(complex_in)), count, "irfft")]
        count = numel(out) // 2
        return [launch(src, "dft", (
            Arg.input(0), Arg.input(0), Arg.output(0), scalar(count), scalar(1),
            scalar(out[axis]), scalar(inner), scalar(length), scalar(min(n, length)),
            scalar(n * inner), scalar(0), scalar(inner), scalar(1), scalar(complex_in),
            scalar(1 if attrs["inverse"] else -1), scalar(0), scalar(attrs["inverse"])),
            count, "dft")]


@register_op
class SignalSTFT(Op):
    """ONNX STFT-17: signal [batch, length, 1 or 2], frame_step (input 1), frame_length
    (input 2; <= 0: the window's length), window (input 3, optional, [frame_length]).
    Out [batch, frames, bins, 2]: frames = (length - frame_length) // frame_step + 1, bins
    frame_length // 2 + 1 one-sided, else frame_length."""
    input_count = (3, 4)
    type = "SignalSTFT"
    const_inputs = (1, 2)
    attributes = (Attr("onesided", "bool", True),)

    def _geometry(self, attrs, inputs, consts):
        shape = _signal_shape(self.type, attrs, inputs[0])
        if len(shape) != 3:
            raise refuse(self.type, attrs, f"the signal must be [batch, length, 1 or 2]; "
                                           f"found {list(shape)}")
        step = _const_int(self.type, attrs, consts, 1, "frame_step")
        frame = _const_int(self.type, attrs, consts, 2, "frame_length")
        window = shape_of(inputs[3]) if len(inputs) > 3 else None
        if frame <= 0:
            if window is None:
                raise refuse(self.type, attrs, "neither a frame_length nor a window is given")
            frame = numel(window)
        if window is not None and (len(window) != 1 or window[0] != frame or
                                   inputs[3].dtype != inputs[0].dtype):
            raise refuse(self.type, attrs, f"the window must be [frame_length = {frame}] of "
                                           f"the signal's type; found {inputs[3].dtype} "
                                           f"{list(window)}")
        _check_length(self.type, attrs, "frame_length", frame)
        if step < 1 or frame > shape[1]:
            raise refuse(self.type, attrs, f"frame_step {step} must be positive and "
                                           f"frame_length {frame} at most the signal's "
                                           f"length {shape[1]}")
        frames = (shape[1] - frame) // step + 1
        bins = frame // 2 + 1 if attrs["onesided"] else frame
        return shape, step, frame, (shape[0], frames, bins, 2)

    def infer_shapes(self, attrs, inputs, consts):
        _, _, _, out = self._geometry(attrs, inputs, consts)
        _program(self.type, attrs, inputs[0].dtype)
        return [(out, inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        shape, step, frame, out = self._geometry(attrs, inputs, consts)
        src = _program(self.type, attrs, inputs[0].dtype)
        has_window = len(inputs) > 3
        count = numel(out) // 2
        return [launch(src, "dft", (
            Arg.input(0), Arg.input(3 if has_window else 0), Arg.output(0), scalar(count),
            scalar(out[1]), scalar(out[2]), scalar(1), scalar(frame), scalar(frame),
            scalar(shape[1]), scalar(step), scalar(1), scalar(0), scalar(int(shape[-1] == 2)),
            scalar(-1), scalar(int(has_window)), scalar(0)), count, "stft")]
