"""--check-bounds: run a custom layer's kernels with guard zones, to find where a kernel and the
model disagree about shapes (a kernel that writes past its output or before it, or leaves part of
it unwritten) before it becomes a garbage number or a crash.

Every buffer a launch touches is a sub-buffer in the middle of a larger one: a guard zone before
and after it is filled with a byte pattern, and an output's own bytes with a NaN pattern (an
integer output with the same bytes). After the kernel, a changed guard byte is a write out of
bounds (named with its offset in elements from the tensor's first element: negative before it,
past the end after it), an input whose bytes changed was written by the kernel, and output
elements that still hold the pattern were never written (counted, with the first B,F,Y,X index).
Guard zones catch writes that land near the buffer: a wild write far away can still crash the
process, which --sanitize (sanitize.py, on Oclgrind) reports instead.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from ...jit.launch import KernelLaunch
from ...jit.tensor import TensorDesc
from ..device.launch_args import ArgumentSource, bind_args
from ..execute.one_launch import HostBytes, LocalBytes, run_one_launch
from ..execute.unwritten import SECOND, sentinel

# the guard zones around what the kernel reads (inputs, constants), and around what it writes
# (outputs, scratch): two bytes, so that a kernel that copies or averages an input's guard into
# an output's (a work size rounded up past both, no `if (i < count)`) changes the output's
GUARD_BYTE = 0xCB
WRITTEN_GUARD_BYTE = 0xB5
# an output starts as execute/unwritten.py's second sentinel of its type (a NaN with a payload
# for floats), the one the numpy call confirms with; a type without one, as this byte
UNWRITTEN_BYTE = 0xDE
MIN_GUARD_BYTES = 4096


@dataclass(frozen=True)
class BoundsProblem:
    layer: str
    tensor: str          # "output 0", "input 1", "Data 'weights'"
    message: str
    # whether the usual fix is the descriptor's <WorkSizes> (elements never written, writes
    # past an output's ends): validate reports it there, not at the <CustomLayer>
    work_sizes: bool = False

    def __str__(self) -> str:
        return f"layer '{self.layer}': {self.tensor}: {self.message}"


@dataclass
class _Guarded:
    what: str
    desc: TensorDesc
    position: int         # the launch's argument number
    guard: int            # bytes before (and after) the tensor
    nbytes: int
    contents: np.ndarray  # the bytes the tensor started with
    fill: int = GUARD_BYTE    # the guard zones' byte


def guard_bytes(device) -> int:
    """A guard zone big enough to catch near misses, on the device's sub-buffer alignment."""
    align = max(int(device.mem_base_addr_align) // 8, 1)
    return -(-MIN_GUARD_BYTES // align) * align


def unwritten_pattern(desc: TensorDesc) -> np.ndarray:
    """The bytes an output starts with: its type's sentinel (unwritten.sentinel) in every
    element, else UNWRITTEN_BYTE."""
    pattern = sentinel(desc.np_dtype, SECOND)
    if pattern is not None and desc.buffer_count:
        return np.full(desc.buffer_count, pattern[0], pattern.dtype).view(np.uint8)
    return np.full(max(desc.nbytes, 1), UNWRITTEN_BYTE, np.uint8)


def run_guarded(engine, program, launch: KernelLaunch, layer: str,
                inputs: Sequence[np.ndarray], input_descs: Sequence[TensorDesc],
                output_descs: Sequence[TensorDesc], unwritten: Sequence[bool] | None = None
                ) -> tuple[list[np.ndarray], list[BoundsProblem]]:
    """Run one launch with guarded buffers. `inputs` are the buffer contents of the launch's
    Arg.input tensors (desc.pack of the logical arrays). Returns the outputs' logical arrays and
    every problem found (empty when the kernel kept to its tensors). `unwritten`: per output,
    whether elements this launch leaves unwritten are a problem (not where a later stage of
    the layer writes them, nor in an MVCL layer's own byte buffer, whose bytes any float
    value may match); all, by default. LaunchFailed (execute/one_launch.py) when the device
    refuses or stops the launch."""
    source = _GuardedArgs(guard_bytes(engine.device), inputs, input_descs, output_descs)
    args = bind_args(launch.args, source, layer)
    after = run_one_launch(engine, program, launch.entry, launch.global_size, launch.local_size,
                           args)
    problems: list[BoundsProblem] = []
    outputs: dict[int, np.ndarray] = {}
    for g in source.guarded:
        host = after[g.position]
        problems += _guard_problems(layer, g, host)
        body = host[g.guard:g.guard + g.nbytes]
        if g.what.startswith("output"):
            index = int(g.what.split()[1])
            if unwritten is None or unwritten[index]:
                problems += _unwritten(layer, g, body, launch)
            outputs[index] = g.desc.unpack(body[:g.desc.nbytes].view(g.desc.np_dtype))
        elif g.what.startswith("input") and not np.array_equal(body, g.contents):
            first = int(np.flatnonzero(body != g.contents)[0]) // g.desc.np_dtype.itemsize
            problems.append(BoundsProblem(layer, g.what, f"the kernel wrote into this input "
                                                          f"(first changed element at buffer "
                                                          f"offset {first})"))
    return [outputs[i] for i in sorted(outputs)], problems


class _GuardedArgs(ArgumentSource):
    """Binds every buffer of a launch to the middle of a larger one, between guard zones of
    `guard` bytes (`guarded`, in argument order): inputs hold `inputs`' bytes, outputs the
    unwritten pattern, constants their values, scratch zeros (guarded like an output)."""

    def __init__(self, guard: int, inputs, input_descs, output_descs):
        self.guard = guard
        self.inputs, self.input_descs, self.output_descs = inputs, input_descs, output_descs
        self.guarded: list[_Guarded] = []

    def _guarded(self, what: str, desc: TensorDesc, contents: np.ndarray,
                 position: int, fill: int = GUARD_BYTE) -> HostBytes:
        guard = self.guard
        nbytes = max(int(contents.nbytes), 1)
        host = np.full(guard + nbytes + guard, fill, np.uint8)
        host[guard:guard + contents.nbytes] = contents.view(np.uint8).reshape(-1)
        self.guarded.append(_Guarded(what, desc, position, guard, nbytes,
                                     host[guard:guard + nbytes].copy(), fill))
        return HostBytes(host, offset=guard, size=nbytes)

    def input(self, arg, position):
        return self._guarded(f"input {arg.index}", self.input_descs[arg.index],
                             np.ascontiguousarray(self.inputs[arg.index]), position)

    def output(self, arg, position):
        desc = self.output_descs[arg.index]
        return self._guarded(f"output {arg.index}", desc, unwritten_pattern(desc), position,
                             WRITTEN_GUARD_BYTE)

    def const(self, arg, position):
        value = np.ascontiguousarray(arg.value)
        return self._guarded(f"constant argument {position}",
                             TensorDesc((value.size,), value.dtype), value, position)

    def scratch(self, arg, position):
        desc = TensorDesc((max(arg.nbytes, 1),), "u8")
        return self._guarded(f"scratch {arg.index}", desc, np.zeros(max(arg.nbytes, 1), np.uint8),
                             position, WRITTEN_GUARD_BYTE)

    def local(self, arg, position):
        return LocalBytes(arg.nbytes)


def _guard_problems(layer: str, g: _Guarded, host: np.ndarray) -> list[BoundsProblem]:
    itemsize = g.desc.np_dtype.itemsize
    before = np.flatnonzero(host[:g.guard] != g.fill)
    after = np.flatnonzero(host[g.guard + g.nbytes:] != g.fill)
    found = []
    if before.size:
        offset = -((g.guard - int(before[0]) + itemsize - 1) // itemsize)
        found.append(BoundsProblem(
            layer, g.what, f"the kernel wrote before the buffer's first element: the first "
                           f"byte changed is at element offset {offset} ({before.size} bytes "
                           f"changed in the guard zone before it)",
            work_sizes=g.what.startswith("output")))
    if after.size:
        count = g.nbytes // itemsize
        offset = count + int(after[0]) // itemsize
        found.append(BoundsProblem(
            layer, g.what, f"the kernel wrote past the end of the buffer ({count} elements, "
                           f"{g.desc.describe()}): the first out-of-bounds write is at element "
                           f"offset {offset} ({after.size} bytes changed in the guard zone "
                           f"after it)",
            work_sizes=g.what.startswith("output")))
    return found


def _unwritten(layer: str, g: _Guarded, body: np.ndarray,
               launch: KernelLaunch | None = None) -> list[BoundsProblem]:
    """The elements of an output the launch left holding the pattern: counted, with the first
    one's index and the launch's work sizes (a <WorkSizes> that covers too little is the usual
    cause)."""
    desc = g.desc
    item = desc.np_dtype.itemsize
    pattern = unwritten_pattern(desc)[:desc.nbytes].reshape(-1, item)
    same = np.all(body[:desc.nbytes].reshape(-1, item) == pattern, axis=1)
    # element by element of the buffer, then through the layout (pitches count elements, so a
    # u8 twin of the description maps the mask like the data)
    never = replace(desc, dtype="u8").unpack(same.astype(np.uint8)).astype(bool)
    count = int(never.sum())
    if not count:
        return []
    first = np.unravel_index(int(np.flatnonzero(never.reshape(-1))[0]), never.shape)
    bfyx = tuple(int(v) for v in first) + (0,) * (4 - len(first))
    sizes = ""
    if launch is not None:
        local = list(launch.local_size) if launch.local_size else "the driver's"
        sizes = f" (work sizes: global {list(launch.global_size)}, local {local})"
    return [BoundsProblem(layer, g.what, f"{count} of {never.size} elements were never written; "
                                         f"the first at B,F,Y,X = {','.join(map(str, bfyx))}"
                                         f"{sizes}", work_sizes=True)]
