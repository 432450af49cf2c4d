"""Output elements a run never wrote, and writes past an output's end, found by what the memory
started as.

An output is filled with a sentinel before the code that should write it runs; an element that
still holds it afterwards was never written. A float's sentinel is a quiet NaN with a payload
that arithmetic on numbers never yields (a NaN passes its payload on, so a kernel would have to
read one to write one); an integer's is a value, which a kernel may well compute. So where a
second run is possible (BoundKernel's numpy call) an element is called unwritten only when it
kept the sentinel through two runs with different sentinels (`FIRST`, then `SECOND` for the
suspects' run), which no kernel that writes it can do. Where there is one run, only types whose
sentinel a kernel would have to produce bit for bit are checked: floats in a model's first
inference (FirstRunCheck), and also integers of 2 bytes or more for a Python layer's outputs
(ONE_RUN_CHECKED, as before this check existed in the executor).

The same fill reaches past the output: a custom kernel's output buffer has a guard zone after
it (guard_bytes; in a model, its slot of the memory plan is that much larger), filled with the
sentinel too. A guard byte that changed was written by the kernel past the output's end, the
bug of work sizes rounded up to the local size with no `if (i < count)` in the kernel. Without
the guard that write lands in whatever memory follows: another tensor's numbers, or the heap,
which crashed the process at the next free.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable

import numpy as np
import pyopencl as cl

from ...errors import KernelWriteError
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
# a model's first inference checks only the types whose sentinel is a NaN: an integer output
# may hold any value (an identity layer over data holding 0xA5A5A5A5 is correct)
NAN_SENTINELS = frozenset(t for t in _SENTINELS if t.kind == "f")


# a guard zone is as long as the output, within these bounds: a work size rounded up to a local
# size of up to 1024 items overshoots by less than 4 KiB of floats
GUARD_MIN_BYTES, GUARD_MAX_BYTES = 4 << 10, 1 << 20


def guard_bytes(nbytes: int, room: int | None = None) -> int:
    """The guard zone after an output of `nbytes` (a multiple of its element size), at most
    `room` (what the device's largest buffer leaves after the output; 0 where none is left)."""
    guard = min(max(nbytes, GUARD_MIN_BYTES), GUARD_MAX_BYTES)
    return guard if room is None else max(0, min(guard, room))


def guard_pattern(dtype, run: int = FIRST) -> np.ndarray:
    """What a guard zone is filled with: the output's sentinel, or a byte for a type without."""
    pattern = sentinel(dtype, run)
    return pattern if pattern is not None else np.array([0xA5], np.uint8)


def changed_guard(guard: np.ndarray, pattern: np.ndarray) -> tuple[int, int] | None:
    """(bytes changed, the first one's offset past the output's end) of a guard zone read back
    (any dtype; its bytes are compared), filled with `pattern` (guard_pattern), or None when it
    is intact."""
    got = np.ascontiguousarray(guard).view(np.uint8).reshape(-1)
    moved = np.flatnonzero(got != np.resize(pattern.view(np.uint8), got.size))
    if moved.size == 0:
        return None
    return int(moved.size), int(moved[0])


def past_end_message(what: str, desc: TensorDesc | None, changed: tuple[int, int],
                     guard: int, fix: str) -> str:
    """The error for an output whose guard zone a kernel wrote: `what` names the layer and the
    output (with `desc`, its description; None where `what` says it), `fix` where to mend it."""
    count, offset = changed
    if desc is None:
        first = "right at its end" if offset == 0 else f"{offset} bytes past its end"
        return (f"{what}: the kernel wrote past its end: {count} of the {guard} bytes after it "
                f"changed, the first {first}; {fix}. Without the guard zone such "
                f"a write changes whatever memory follows, another tensor or the heap "
                f"(--sanitize shows each write out of bounds)")
    element = desc.buffer_count + offset // desc.np_dtype.itemsize
    return (f"{what} ({desc.describe()}): the kernel wrote past the end of the output: {count} "
            f"of the {guard} bytes after it changed, the first at element {element} of a "
            f"buffer of {desc.buffer_count} elements. Its work sizes cover more than the "
            f"output and the kernel writes without a guard; {fix}. Without the guard zone such "
            f"a write changes whatever memory follows, another tensor or the heap "
            f"(--check-bounds shows each write out of bounds)")


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
# what a first run copies back to check, in all: outputs past it are not checked (their copies
# take as much device memory in the check's buffer, and host memory until wait())
MAX_CHECKED_BYTES = 256 << 20


@dataclass(frozen=True)
class CheckedOutput:
    first: int              # the first step that writes it (its fill goes before)
    last: int               # the last (its read goes after): an MVCL layer's stages may share it
    port: int
    key: Hashable           # the tensor
    desc: TensorDesc
    guard: int = 0          # bytes of its slot after it, filled and checked with it

    @property
    def whole(self) -> bool:
        """Whether the output itself is checked for elements never written (a layer output of
        a float type, NAN_SENTINELS), or only the guard zone after it."""
        return layer_output(self.key) and self.desc.np_dtype in NAN_SENTINELS

    @property
    def what(self) -> str:
        """How an error names it: the layer's output port, or an MVCL layer's own buffer."""
        if internal_buffer(self.key):
            return (f"its buffer of port-index {self.key[2][1]} (a <Tensor "
                    f"type=\"output_buffer\">, {self.desc.nbytes} bytes by its size formula)")
        return f"output {self.port}"

    def span(self, own: bool) -> tuple[int, int]:
        """(offset, bytes) of what is filled and read back: the output (a float one) and its
        guard zone where the buffer is the request's own slot (`own`; a user's buffer has none
        of ours after the tensor)."""
        start = 0 if self.whole else self.desc.nbytes
        return start, self.desc.nbytes + (self.guard if own else 0) - start


def layer_output(key) -> bool:
    """Whether a step's output tensor is its layer's output: (node, port), or the kernel-layout
    temporary that a reorder then turns into it (("temp", node, ("out", port)), for an output
    the kernel writes padded or in another format); not a temporary between MVCL stages."""
    if len(key) == 2 and isinstance(key[1], int):
        return True
    return len(key) == 3 and key[0] == "temp" and isinstance(key[2], tuple) and \
        key[2][:1] == ("out",)


def internal_buffer(key) -> bool:
    """Whether a step's output tensor is an MVCL layer's own buffer between its stages (an
    output_buffer: ("temp", node, ("buffer", port)))."""
    return len(key) == 3 and key[0] == "temp" and isinstance(key[2], tuple) and \
        key[2][:1] == ("buffer",)


def guarded(step, key, desc: TensorDesc) -> bool:
    """Whether the memory plan gives output `key` of `step` a guard zone (guard_bytes) that a
    first run checks: a layer output (layer_output) or an MVCL layer's own buffer
    (internal_buffer) written by a custom layer's kernels (SimpleGPU, MVCL stages; a Python
    layer checks its own), not empty, of any type. A float layer output is also checked for
    elements never written (CheckedOutput.whole)."""
    return step.impl == "custom" and bool(step.launches) and \
        (layer_output(key) or internal_buffer(key)) and desc.nbytes > 0 and \
        desc.np_dtype in _SENTINELS


def custom_outputs(plan) -> list[CheckedOutput]:
    """What a request's first run checks: every `guarded` output in memory of its own, not an
    input's, that is a float (the whole output and its guard zone) or has a guard zone in the
    plan (that alone; a plan made before guards, or a package's without them, has none), up to
    MAX_CHECKED_BYTES in all, in step order."""
    slot_of = plan.memory.slot_of
    guards = plan.memory.guards
    spans: dict = {}                   # key -> [first step, last step, port, desc]
    for index, step in enumerate(plan.steps):
        if step.impl != "custom" or not step.launches:
            continue
        read = {slot_of.get(plan.root(k)) for k in step.inputs}
        for port, (key, desc) in enumerate(zip(step.outputs, step.output_descs)):
            root = plan.root(key)
            if key in spans:
                spans[key][1] = index
            elif guarded(step, key, desc) and root in slot_of and slot_of[root] not in read:
                spans[key] = [index, index, port, desc]
    found, total = [], 0
    for key, (first, last, port, desc) in spans.items():
        out = CheckedOutput(first, last, port, key, desc,
                            guards.get(key, 0) if plan.root(key) == key else 0)
        if not out.whole and not out.guard:
            continue
        total += out.span(True)[1]
        if total > MAX_CHECKED_BYTES:
            break
        found.append(out)
    return found


class FirstRunCheck:
    """A request's check of its custom layers' outputs, in its first run and until a run passes
    it: before the first step that writes such an output, it and the guard zone after it are
    filled with the sentinel; after the last, a device-side copy puts them into the check's own
    buffer (the in-order queue runs it before any later layer reuses the memory); after the
    run's last command that buffer is read back (by a map in a run with Python layers, whose
    outputs are read so: PoCL may block in a read while their user event is pending), and
    wait() looks at it. A kernel whose work sizes or guards do not cover the output the model
    gives it would otherwise hand on whatever the memory held; one that writes past the
    output's end (into the guard zone; of an integer output, that alone is checked) would
    change the next tensor's. The host waits nowhere more; the run adds a fill and a copy per
    checked output and one read, once. Not made for a request on an out-of-order queue."""

    def __init__(self, plan, launches, context):
        outputs = custom_outputs(plan)
        starts: dict[int, int] = {}    # step -> its first launch in the request's flat list
        ends: dict[int, int] = {}      # ... its last
        for n, (_, _, _, index) in enumerate(launches):
            starts.setdefault(index, n)
            ends[index] = n
        # launch number -> the outputs filled before it, copied after it
        self.fills: dict[int, list[CheckedOutput]] = {}
        self.reads: dict[int, list[CheckedOutput]] = {}
        # each output's place in the check's buffer (8-byte aligned, for any element type)
        self.at: dict[Hashable, int] = {}
        size = 0
        for out in outputs:
            if out.first in starts and out.last in ends:
                self.fills.setdefault(starts[out.first], []).append(out)
                self.reads.setdefault(ends[out.last], []).append(out)
                self.at[out.key] = size
                size += -(-out.span(True)[1] // 8) * 8
        self.pending = bool(self.fills)
        self.steps = plan.steps
        self.context, self.size = context, size
        self.buffer = None                 # allocated by the first run, freed once one passes

    def fill(self, queue, n: int, buffer_of, wait_list) -> list:
        """Enqueue the fills that go before launch n; their events. `buffer_of(key)`: (the
        buffer, whether it is the request's own slot, which has the guard zone after it);
        `wait_list()`: what the first fill waits for, asked only when one is enqueued (the
        request's first command takes the user's events)."""
        events = []
        for out in self.fills.get(n, ()):
            buffer, own = buffer_of(out.key)
            offset, size = out.span(own)
            if size:
                events.append(cl.enqueue_fill_buffer(
                    queue, buffer, sentinel(out.desc.np_dtype), offset, size,
                    wait_for=None if events else wait_list()))
        return events

    def read(self, queue, n: int, buffer_of, into: list) -> list:
        """Enqueue the copies that go after launch n into the check's buffer (appending what
        each copied to `into`: (CheckedOutput, its place, bytes)); their events."""
        if self.buffer is None:
            self.buffer = cl.Buffer(self.context, cl.mem_flags.READ_WRITE, max(self.size, 1))
        events = []
        for out in self.reads.get(n, ()):
            buffer, own = buffer_of(out.key)
            offset, size = out.span(own)
            if size:
                events.append(cl.enqueue_copy(queue, self.buffer, buffer, byte_count=size,
                                              src_offset=offset, dst_offset=self.at[out.key]))
                into.append((out, self.at[out.key], size))
        return events

    def collect(self, queue, by_map: bool):
        """After the run's last command: the check's buffer read back into a new host array,
        by a non-blocking read, or by a non-blocking map (`by_map`: a run with host steps; the
        caller copies it out of the map after the queue finished, as it does its outputs).
        Returns (the event, the host array, the mapped array or None)."""
        host = np.empty(max(self.size, 1), np.uint8)
        if by_map:
            mapped, event = cl.enqueue_map_buffer(queue, self.buffer, cl.map_flags.READ, 0,
                                                  host.shape, np.uint8, is_blocking=False)
            return event, host, mapped
        return cl.enqueue_copy(queue, host, self.buffer, is_blocking=False), host, None

    def verify(self, read: list, host: np.ndarray, where) -> None:
        """ExecutionError for the first output copied back whose guard zone changed (the kernel
        wrote past its end) or with elements that kept the sentinel; else the check is done for
        this request (and its buffer freed). `read`: what the run's copies put where in the
        check's buffer, which `host` holds read back; `where(step)`: the layer described, and
        where its work sizes are written. `read` is emptied either way."""
        found = past = None
        for out, at, size in read:
            got = host[at:at + size]
            body = out.desc.nbytes if out.whole else 0      # the output's bytes copied
            changed = changed_guard(got[body:], sentinel(out.desc.np_dtype))
            if changed is not None:
                past = out, changed, size - body
                break
            never = kept(out.desc.unpack(got[:body].view(out.desc.np_dtype))) if body else None
            if never is not None and never.any():
                found = out, never
                break
        read.clear()
        if past is not None:
            out, changed, guard = past
            layer, sizes = where(self.steps[out.last])
            if internal_buffer(out.key):
                raise KernelWriteError(past_end_message(
                    f"{layer}: {out.what}", None, changed, guard,
                    f"make the size formula cover what the kernel writes, or fix the stage's "
                    f"<WorkSizes>{sizes}"))
            raise KernelWriteError(past_end_message(
                f"{layer}: {out.what}", out.desc, changed, guard,
                f"guard the writes in the kernel, or fix the layer's <WorkSizes>{sizes}"))
        if found is None:
            self.pending = False
            self.buffer = None
            return
        out, never = found
        layer, sizes = where(self.steps[out.last])
        raise KernelWriteError.never_written(
            f"{layer}: output {out.port} ({out.desc.describe()}): {int(never.sum())} of "
            f"{never.size} elements were never written by its kernel in this inference, the "
            f"first at index {first_index(never)}: its work sizes or its guards do not cover "
            f"the output the model gives it, so those elements would hold whatever the memory "
            f"held. Fix the layer's <WorkSizes>{sizes} or its kernel (run the model with "
            f"--check-bounds to find writes out of bounds too)")
