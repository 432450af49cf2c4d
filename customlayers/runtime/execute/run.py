"""One run of a request, prepared before anything is enqueued: where each tensor lies (the
user's buffer, or the request's own) and which copies the run makes.

A device input is bound where it lies (a sub-buffer for an aligned offset; one device-side
copy otherwise). A device output lies in the user's buffer when the memory plan lets it (a
tensor the network computes, dense, not already placed there for another output): the
kernels that write it, and those that read it later, are bound to that buffer. Otherwise it is
one device-side copy (an output that is an input, or a second output of the same tensor). Host
values are uploaded and read back; on a CPU device a suitable numpy input is bound where it
lies and a pinned host tensor is the device buffer itself.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable, Sequence

import numpy as np

from ...errors import TensorError
from ..device.host_memory import PinnedTensor, usable_in_place, wrap_in_place
from .user_tensors import DeviceTensor, host_array


@dataclass
class Copy:
    """A copy one run makes: host->device ("upload"), device->host ("read"), or
    device->device ("device": an output that cannot lie in the user's buffer)."""
    kind: str
    dst: object
    src: object
    reads: frozenset
    writes: frozenset
    nbytes: int = 0
    dst_offset: int = 0
    src_offset: int = 0


@dataclass
class Run:
    """What one started inference holds until wait()."""
    pre: list = field(default_factory=list)        # copies before the kernels
    post: list = field(default_factory=list)       # copies after them
    binding: dict = field(default_factory=dict)    # root key -> buffer, where not the default
    host_outputs: dict = field(default_factory=dict)   # name -> (array, desc, fresh)
    keep: list = field(default_factory=list)       # host memory the device still reads
    wait_for: list = field(default_factory=list)
    done: object = None
    # every command's event, held until wait(): PoCL aborts (a pthread error in
    # pocl_update_event_failed) when a failed dependency reaches commands whose events were
    # already released
    events: list = field(default_factory=list)
    # outputs read by maps (a run with host steps): (mapped array, the host array it fills)
    maps: list = field(default_factory=list)
    # the request's first-run check (unwritten.FirstRunCheck) when this run makes it, what its
    # copies put in its buffer ((CheckedOutput, place, bytes)), and that buffer read back
    check: object = None
    checked: list = field(default_factory=list)
    check_host: object = None

    def reusable(self) -> bool:
        """Whether another run may take this one's bindings and copies as they are: nothing
        is uploaded from or read into host memory (a host array would be one run's), only
        device buffers and device-side copies."""
        return not self.host_outputs and not self.keep and \
            all(c.kind == "device" for c in self.pre + self.post)

    def again(self) -> "Run":
        """A new run with this one's bindings and copies (which no run changes) and nothing
        of its own yet (events, maps, what it waits for). `keep` is not carried: only a run
        that keeps no host memory is reused (reusable())."""
        return Run(pre=self.pre, post=self.post, binding=self.binding,
                   host_outputs=self.host_outputs)


def prepare_run(plan, own_inputs: dict, user: dict, arrays: dict, context, unified: bool,
                own_buffer) -> Run:
    """This run's bindings and copies, every value checked; nothing enqueued.

    own_inputs: input name -> (the request's buffer, TensorDesc); user: tensor name -> what
    set_tensor or host_tensor gave; arrays: this run's numpy inputs by name (they win);
    unified: host memory is the device's (a CPU device); own_buffer(key): where a tensor lies
    when the user gave no buffer for it (a sub-buffer for a slice of a Concat's output)."""
    run = Run()
    for name, key in plan.inputs:
        buf, desc = own_inputs[name]
        value = arrays[name] if name in arrays else user.get(name)
        written = frozenset({key})
        if value is None:
            raise TensorError(f"input '{name}': no value; give it with set_tensor or "
                              f"host_tensor (or in infer's arrays)")
        if desc.count == 0:                 # no element: nothing to upload or bind
            if isinstance(value, np.ndarray):
                host_array(name, "input", value, desc)     # its shape and type checked
            continue
        if isinstance(value, DeviceTensor):
            if value.bindable:
                run.binding[key] = value.buffer
            else:           # an offset the device cannot make a sub-buffer at
                run.pre.append(Copy("device", buf, value.base, frozenset({("user", name)}),
                                     written, desc.nbytes, 0, value.offset))
        elif isinstance(value, PinnedTensor):
            if unified:
                run.binding[key] = value.buffer
            else:
                run.pre.append(Copy("upload", buf, value.array, frozenset(), written))
        else:
            array = host_array(name, "input", value, desc)
            wrapped = wrap_in_place(context, array) \
                if unified and usable_in_place(array, desc) else None
            if wrapped is not None:
                run.binding[key] = wrapped
                run.keep += [array, wrapped]
            else:
                host = np.ascontiguousarray(array, dtype=desc.np_dtype)
                run.keep.append(host)           # alive until the copy is done
                run.pre.append(Copy("upload", buf, host, frozenset(), written))
    _prepare_outputs(plan, user, run, unified, own_buffer)
    return run

def _prepare_outputs(plan, user: dict, run: Run, unified: bool, own_buffer) -> None:
    placed = set()
    # first, the outputs that can lie in the user's memory: their producers write there
    for name, key in plan.outputs:
        value, root = user.get(name), plan.root(key)
        target = value.buffer if isinstance(value, DeviceTensor) else \
            value.buffer if isinstance(value, PinnedTensor) and unified else None
        if target is not None and _placeable(plan, key, root, plan.descs[key], placed):
            run.binding[root] = target
            placed.add(root)
            placed.add(name)
            if isinstance(value, PinnedTensor):      # a host output with no read
                run.host_outputs[name] = (value.array, plan.descs[key], False)
    # then copies from where the others lie: one device-side copy, or one read
    for name, key in plan.outputs:
        if name in placed:
            continue
        value, root, desc = user.get(name), plan.root(key), plan.descs[key]
        if desc.count == 0:                 # no element: no read (OpenCL copies no 0 bytes)
            if not isinstance(value, DeviceTensor):
                run.host_outputs[name] = (value.array if isinstance(value, PinnedTensor) else
                                          value if isinstance(value, np.ndarray) else
                                          np.empty(desc.shape, desc.np_dtype), desc, False)
            continue
        src = None if plan.slice_at(key) is not None else run.binding.get(root)
        if src is None:
            src = own_buffer(key)
        if isinstance(value, DeviceTensor):
            run.post.append(Copy("device", value.base, src, frozenset({root}),
                                  frozenset({("user", name)}), desc.nbytes, value.offset))
            continue
        if isinstance(value, PinnedTensor):
            host, fresh = value.array, False
        elif isinstance(value, np.ndarray):
            host, fresh = value, False
        else:
            host, fresh = np.empty(desc.buffer_count, desc.np_dtype), True
        run.post.append(Copy("read", host, src, frozenset({root}), frozenset()))
        run.host_outputs[name] = (host, desc, fresh)
    order = [name for name, _ in plan.outputs]
    run.host_outputs = {n: run.host_outputs[n] for n in order if n in run.host_outputs}

def _placeable(plan, key, root, desc, placed) -> bool:
    """Whether the output's tensor can live in the user's buffer: a tensor the network
    computes (not an input or a constant), dense as the output, not already placed, and
    neither a Concat's output written in place nor a slice of one (kernels are bound to
    sub-buffers of those for good)."""
    rdesc = plan.descs[root]
    return (root in plan.memory.slot_of and root not in placed and rdesc.is_plain and
            rdesc.nbytes == desc.nbytes and root not in plan.sliced_roots and
            plan.slice_at(key) is None)


# -- ordering on an out-of-order queue -------------------------------------------------------
# Which earlier commands each command of an inference must wait for, when the queue does not
# order them (the user's out-of-order queue).
#
# The memory planner reuses buffers (planner.py), so data flow alone is not enough: a command that
# overwrites a buffer must also wait for the earlier readers of that buffer (write after read) and
# for its earlier writer (write after write), besides the writers of what it reads (read after
# write). Pure data: memory is any hashable name of a buffer, commands are listed in program order.


def command_dependencies(accesses: Sequence[tuple[frozenset, frozenset]]) -> list[tuple[int, ...]]:
    """accesses: per command, (memory it reads, memory it writes). Returns per command the
    indices of the earlier commands it must wait for, ascending, none redundant by repetition
    (a command that both wrote and read a buffer is listed once)."""
    last_writer: dict[Hashable, int] = {}
    readers: dict[Hashable, list[int]] = {}       # readers since the last write
    deps: list[tuple[int, ...]] = []
    for i, (reads, writes) in enumerate(accesses):
        wait: set[int] = set()
        for m in reads:
            if m in last_writer:
                wait.add(last_writer[m])
        for m in writes:
            if m in last_writer:
                wait.add(last_writer[m])
            wait.update(readers.get(m, ()))
        wait.discard(i)
        deps.append(tuple(sorted(wait)))
        for m in reads:
            readers.setdefault(m, []).append(i)
        for m in writes:
            last_writer[m] = i
            readers[m] = []
    return deps


def sinks(deps: Sequence[tuple[int, ...]]) -> list[int]:
    """The commands no later command waits for: when they are done, all are."""
    waited = {d for ds in deps for d in ds}
    return [i for i in range(len(deps)) if i not in waited]
