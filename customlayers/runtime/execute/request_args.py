"""What an InferRequest (request.py) binds each argument of its launches to, through the one
walk of launch_args.bind_args: its tensors' buffers, the plan's shared constant uploads, the
scratch buffers private to a step."""
from __future__ import annotations

import pyopencl as cl

from ..device.host_memory import constant_buffer
from ..device.launch_args import ArgumentSource


class RequestArgs(ArgumentSource):
    """What a request binds one launch of `step` (the plan's step `index`) to: tensors to their
    buffers (recorded in the request's `_uses`, so that set_tensor can rebind them to the user's),
    constants to the plan's shared uploads, scratch to buffers private to the step's launch chain
    (`scratch`: index -> buffer, shared by its launches). It records the roots the launch reads and writes."""

    def __init__(self, request, step, index: int, kernel, scratch: dict):
        self.request, self.step, self.index = request, step, index
        self.kernel, self.buffers = kernel, scratch
        self.reads: set = set()
        self.writes: set = set()

    def input(self, arg, position):
        return self._tensor(self.step.inputs[arg.index], position, self.reads)

    def output(self, arg, position):
        return self._tensor(self.step.outputs[arg.index], position, self.writes)

    def _tensor(self, key, position, access: set):
        request = self.request
        plan = request.plan
        root = plan.root(key)
        access.add(root)
        if plan.slice_at(key) is not None:
            # a slice of a Concat's output: its sub-buffer for good (the compiler keeps such
            # outputs out of the user's buffers: no rebind)
            return request._own_buffer(key)
        request._uses.setdefault(root, []).append((self.kernel, position))
        return request._default_buffer(root)

    def const(self, arg, position):
        request = self.request
        return _const_arg(request.context, request.plan, arg, request.engine.unified_memory,
                          request.upload_queue)

    def scratch(self, arg, position):
        if arg.index not in self.buffers:
            self.buffers[arg.index] = cl.Buffer(self.request.context, cl.mem_flags.READ_WRITE,
                                                max(arg.nbytes, 1))
            self.request._scratch.append(self.buffers[arg.index])
        self.reads.add(("scratch", self.index, arg.index))
        self.writes.add(("scratch", self.index, arg.index))
        return self.buffers[arg.index]

    def local(self, arg, position):
        return cl.LocalMemory(arg.nbytes)

    def state_flag(self, arg, position):
        return self.request._states.flag_use(arg.value, self.kernel, position)


def _const_arg(context, plan, arg, unified: bool, queue=None) -> cl.Buffer:
    """The buffer of an Arg.const, uploaded once per plan and shared by its requests. Keyed
    by the Arg's identity (its array is not hashable); the entry keeps the Arg alive, so the id
    cannot be reused by another object."""
    entry = plan.arg_buffers.get(id(arg))
    if entry is None:
        # setdefault: requests made at once on several threads bind the one buffer kept
        entry = plan.arg_buffers.setdefault(
            id(arg), (constant_buffer(context, arg.value, unified, queue), arg))
    return entry[0]
