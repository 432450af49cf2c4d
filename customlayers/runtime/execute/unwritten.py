"""Output elements a run never wrote, found by what they started as.

An output is filled with a sentinel before the code that should write it runs; an element that
still holds it afterwards was never written. A sentinel is a quiet NaN with a payload for floats
and a value unlikely to be computed for integers, but a kernel can compute any value of a one-
or two-byte type: so where a second run is possible (BoundKernel's numpy call) an element is
called unwritten only when it kept the sentinel through two runs with different sentinels
(`FIRST`, then `SECOND` for the suspects' run), which no kernel that writes it can do. Where
there is one run (a Python layer's outputs, a custom layer's in a model's first inference:
FirstRunCheck), only the types in ONE_RUN_CHECKED are checked, whose sentinel a kernel would
have to compute bit for bit.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable

import numpy as np
import pyopencl as cl

from ...errors import ExecutionError
from ...jit.tensor import TensorDesc

# dtype -> (the unsigned view of its bytes, the sentinel of the first run, of the second)
_SENTINELS = {
    np.dtype(np.float32): (np.uint32, 0x7FE5A5A5, 0x7FC0DEAD),
    np.dtype(np.float16): (np.uint16, 0x7E5A, 0x7EAD),
    np.dtype(np.float64): (np.uint64, 0x7FFCA5A5A5A5A5A5, 0x7FF8DEADDEADDEAD),
    np.dtype(np.int8): (np.uint8, 0xA5, 0x5A),
    np.dtype(np.uint8): (np.uint8, 0xA5, 0x5A),
    np.dtype(np.bool_): (np.uint8, 0xA5, 0x5A),
    np.dtype(np.int16): (np.uint16, 0xA5A5, 0x5A5A),
    np.dtype(np.uint16): (np.uint16, 0xA5A5, 0x5A5A),
    np.dtype(np.int32): (np.uint32, 0xA5A5A5A5, 0x5A5A5A5A),
    np.dtype(np.uint32): (np.uint32, 0xA5A5A5A5, 0x5A5A5A5A),
    np.dtype(np.int64): (np.uint64, 0xA5A5A5A5A5A5A5A5, 0x5A5A5A5A5A5A5A5A),
    np.dtype(np.uint64): (np.uint64, 0xA5A5A5A5A5A5A5A5, 0x5A5A5A5A5A5A5A5A),
}
FIRST, SECOND = 1, 2
# one-byte types have no value a kernel could not compute: a Python layer's single run skips them
ONE_RUN_CHECKED = frozenset(t for t, (view, *_) in _SENTINELS.items()
                            if np.dtype(view).itemsize > 1)


def sentinel(dtype, run: int = FIRST) -> np.ndarray | None:
    """The sentinel of `run` as one element of the unsigned type of dtype's size (the fill
    pattern of a device buffer), or None for a type not checked."""
    entry = _SENTINELS.get(np.dtype(dtype))
    return None if entry is None else np.array([entry[run]], entry[0])


def fill(array: np.ndarray, run: int = FIRST) -> None:
    """Set every element of `array` to the sentinel of `run` (nothing for a type not checked)."""
    pattern = sentinel(array.dtype, run)
    if pattern is not None:
        array.view(pattern.dtype)[...] = pattern[0]


def kept(array: np.ndarray, run: int = FIRST) -> np.ndarray | None:
    """Where `array` still holds the sentinel of `run` (bool, array's shape), or None when its
    type is not checked."""
    pattern = sentinel(array.dtype, run)
    if pattern is None:
        return None
    return np.ascontiguousarray(array).view(pattern.dtype) == pattern[0]


def first_index(mask: np.ndarray) -> tuple[int, ...]:
    """The index of the first true element of `mask`, in its shape."""
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(mask.reshape(-1))), mask.shape))


# -- a model's custom layers, checked in a request's first run ---------------------------------
# the largest output a first run reads back to check; a larger one is not checked (its copy
# would hold that much host memory once)
MAX_CHECKED_BYTES = 256 << 20


@dataclass(frozen=True)
class CheckedOutput:
    step: int               # the plan's step
    port: int
    key: Hashable           # the tensor
    desc: TensorDesc


def custom_outputs(plan) -> dict[int, list[CheckedOutput]]:
    """What a request's first run checks, by step: every output of a custom layer's step (a
    SimpleGPU kernel, an MVCL stage; a Python layer checks its own) that is a layer output, not
    a temporary between an MVCL layer's stages or a state; of a type one run can check
    (ONE_RUN_CHECKED); in memory of its own, not an input's; of at most MAX_CHECKED_BYTES."""
    slot_of = plan.memory.slot_of
    found: dict[int, list[CheckedOutput]] = {}
    for index, step in enumerate(plan.steps):
        if step.impl != "custom" or not step.launches:
            continue
        read = {slot_of.get(plan.root(k)) for k in step.inputs}
        for port, (key, desc) in enumerate(zip(step.outputs, step.output_descs)):
            root = plan.root(key)
            if (len(key) == 2 and isinstance(key[1], int) and root in slot_of
                    and slot_of[root] not in read and desc.np_dtype in ONE_RUN_CHECKED
                    and 0 < desc.nbytes <= MAX_CHECKED_BYTES):
                found.setdefault(index, []).append(CheckedOutput(index, port, key, desc))
    return found


class FirstRunCheck:
    """A request's check of the outputs its custom layers never wrote, in its first run and
    until a run passes it: before a custom step's first launch its outputs are filled with the
    sentinel, after its last launch they are read back (a non-blocking copy, ordered by the
    in-order queue before any later layer reuses the memory), and wait() looks at them.
    A kernel whose work sizes or guards do not cover the output the model gives it would
    otherwise hand on whatever the memory held. The host waits nowhere more; the run makes one
    fill and one read per checked output, once."""

    def __init__(self, plan, launches):
        self.outputs = custom_outputs(plan)
        # per checked step, its first and last launch in the request's flat list
        self.first: dict[int, int] = {}
        self.last: dict[int, int] = {}
        for n, (_, _, _, index) in enumerate(launches):
            if index in self.outputs:
                self.first.setdefault(index, n)
                self.last[index] = n
        self.pending = bool(self.first)
        self.steps = plan.steps

    def fill(self, queue, index: int, buffer_of, wait_for) -> list:
        """Enqueue the fills of step `index`'s checked outputs; their events."""
        events = []
        for out in self.outputs[index]:
            events.append(cl.enqueue_fill_buffer(queue, buffer_of(out.key),
                                                 sentinel(out.desc.np_dtype), 0,
                                                 out.desc.nbytes, wait_for=wait_for))
            wait_for = None
        return events

    def read(self, queue, index: int, buffer_of, into: list) -> list:
        """Enqueue the reads of step `index`'s checked outputs into new arrays (appended to
        `into` with what they are); their events."""
        events = []
        for out in self.outputs[index]:
            host = np.empty(out.desc.buffer_count, out.desc.np_dtype)
            events.append(cl.enqueue_copy(queue, host, buffer_of(out.key), is_blocking=False))
            into.append((out, host))
        return events

    def verify(self, read: list, where) -> None:
        """ExecutionError for the first output read back with elements that kept the sentinel;
        else the check is done for this request. `where(step)`: the layer described."""
        for out, host in read:
            never = kept(out.desc.unpack(host))
            if never is not None and never.any():
                step = self.steps[out.step]
                raise ExecutionError(
                    f"{where(step)}: output {out.port} ({out.desc.describe()}): "
                    f"{int(never.sum())} of {never.size} elements were never written by its "
                    f"kernel in this inference, the first at index {first_index(never)}: its "
                    f"work sizes or its guards do not cover the output the model gives it, so "
                    f"those elements would hold whatever the memory held. Fix the layer's "
                    f"<WorkSizes> or its kernel (run-layer -c CONFIG --layer {step.type} "
                    f"--output-shape {'x'.join(map(str, out.desc.shape))} on this input shows "
                    f"the same; add --check-bounds to find writes out of bounds too)")
        self.pending = False
