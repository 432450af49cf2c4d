"""One launch run alone on buffers given as host bytes, each read back after it: what the checkers
run (bounds.py's guarded buffers; sanitize_worker.py's launch on Oclgrind). The checker decides
what the bytes are and reads what they became; the buffers, the enqueue and the wait are here.

The checkers bind a launch's arguments (launch_args.bind_args) to HostBytes for a buffer,
LocalBytes for __local memory, and a scalar's own value.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyopencl as cl

from ...errors import ExecutionError
from ..device.kernel_objects import set_kernel_args
from ..device.sub_buffers import SubBuffers


@dataclass(frozen=True)
class HostBytes:
    """A buffer argument: `contents` (uint8) uploaded whole. The kernel sees `size` bytes from
    byte `offset` (a sub-buffer when that is not the whole buffer, so the bytes around it are a
    guard zone); after the run the whole buffer is read back."""
    contents: np.ndarray
    offset: int = 0
    size: int | None = None


@dataclass(frozen=True)
class LocalBytes:
    """A __local memory argument of `nbytes`."""
    nbytes: int


class LaunchFailed(ExecutionError):
    """The device refused or stopped a launch whose program was built (a GPU's illegal address,
    an entry the program lacks, a buffer it cannot allocate); the message is the driver's."""


def run_one_launch(engine, program, entry: str, global_size: Sequence[int],
                   local_size: Sequence[int] | None, args: Sequence,
                   read_back: bool = True) -> list[np.ndarray | None]:
    """Run kernel `entry` of `program` once on `engine`'s queue with `args` (HostBytes, LocalBytes
    or scalar values) and wait for it. Returns, per argument, the bytes of its whole buffer after
    the run (None for the others, and for every argument without `read_back`). LaunchFailed
    when OpenCL refuses or fails any of it."""
    owner = SubBuffers()
    try:
        parents, bound = [], []
        for arg in args:
            parent, value = _bind(engine.context, owner, arg)
            parents.append(parent)
            bound.append(value)
        kernel = cl.Kernel(program, entry)
        set_kernel_args(kernel, bound)
        cl.enqueue_nd_range_kernel(engine.queue, kernel, tuple(global_size),
                                   tuple(local_size) if local_size else None)
        after: list[np.ndarray | None] = []
        for arg, parent in zip(args, parents):
            host = None
            if read_back and parent is not None:
                host = np.empty(arg.contents.nbytes, np.uint8)
                cl.enqueue_copy(engine.queue, host, parent)
            after.append(host)
        engine.queue.finish()
        return after
    except cl.Error as e:
        # built, then failed: a GPU reports a wild access as an error of the launch or of the
        # wait after it (NVIDIA: an illegal address), where a CPU device faults instead
        raise LaunchFailed(_first_line(e)) from None
    finally:
        owner.release()          # the sub-buffers before their parents (sub_buffers.py)


def _bind(context, owner: SubBuffers, arg) -> tuple:
    """(the parent buffer or None, the kernel argument) for one argument."""
    if isinstance(arg, LocalBytes):
        return None, cl.LocalMemory(arg.nbytes)
    if not isinstance(arg, HostBytes):
        return None, arg
    contents = np.ascontiguousarray(arg.contents).view(np.uint8).reshape(-1)
    parent = cl.Buffer(context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                       hostbuf=contents)
    size = contents.nbytes - arg.offset if arg.size is None else arg.size
    if arg.offset == 0 and size == contents.nbytes:
        return parent, parent
    return parent, owner.cut(parent, arg.offset, size)


def _first_line(e: Exception) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
