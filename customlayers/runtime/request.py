"""InferRequest: the buffers and bound kernels of one in-flight inference.

Everything that can be decided before running is decided here, once: buffers are allocated
from the memory plan, kernels get their arguments set, and the launch list becomes a flat list of
(kernel, global, local). Running is then a loop of enqueues on an in-order queue with no host
wait between layers; the host waits once, for the outputs.
"""
from __future__ import annotations

import numpy as np
import pyopencl as cl

from ..errors import ExecutionError, ModelError
from .host_step import HostStep, HostSteps


class InferRequest:
    def __init__(self, network, plan):
        self.network = network
        self.plan = plan
        eng = network.engine
        self.context = eng.context
        self.device = eng.device
        props = cl.command_queue_properties.PROFILING_ENABLE if network.profiling else 0
        self.queue = cl.CommandQueue(eng.context, eng.device, properties=props)
        mf = cl.mem_flags
        self._const_buffers = _shared_consts(eng.context, plan)
        self._slots = [cl.Buffer(eng.context, mf.READ_WRITE, size) for size in plan.memory.slot_sizes]
        self._inputs = {}
        for name, key in plan.inputs:
            desc = plan.descs[key]
            self._inputs[name] = (cl.Buffer(eng.context, mf.READ_ONLY, max(desc.nbytes, 1)), desc)
        self._launches: list[tuple] = []    # (kernel, global, local, step index)
        # Buffers only a kernel refers to must stay referenced here: pyopencl's set_args does not
        # keep them alive, and a freed buffer is INVALID_MEM_OBJECT on NVIDIA (PoCL stays silent).
        self._scratch: list[cl.Buffer] = []
        self._bind_all()
        # Python layers: host steps between the kernels, run by a worker (host_step.py)
        self._host = HostSteps(eng.context) if any(s.host is not None for s in plan.steps) \
            else None
        self.busy = False
        self._pending = None
        self.events: list = []              # per launch, when profiling

    # -- setup -----------------------------------------------------------------------------
    def buffer(self, key):
        plan = self.plan
        root = plan.root(key)
        if root in self._const_buffers:
            return self._const_buffers[root]
        for name, k in plan.inputs:
            if k == root:
                return self._inputs[name][0]
        try:
            return self._slots[plan.memory.slot_of[root]]
        except KeyError:
            raise ModelError(f"tensor {key} has no buffer (nothing computes it)") from None

    def _bind_all(self) -> None:
        plan = self.plan
        ctx = self.context
        for index, (step, programs) in enumerate(zip(plan.steps, plan.programs)):
            scratch: dict[int, cl.Buffer] = {}
            for launch, program in zip(step.launches, programs):
                kernel = cl.Kernel(program, launch.entry)
                args = []
                for a in launch.args:
                    if a.kind == "input":
                        args.append(self.buffer(step.inputs[a.index]))
                    elif a.kind == "output":
                        args.append(self.buffer(step.outputs[a.index]))
                    elif a.kind == "const":
                        args.append(_const_arg(self.context, plan, a))
                    elif a.kind == "scratch":
                        if a.index not in scratch:
                            scratch[a.index] = cl.Buffer(ctx, cl.mem_flags.READ_WRITE,
                                                         max(a.nbytes, 1))
                            self._scratch.append(scratch[a.index])
                        args.append(scratch[a.index])
                    elif a.kind == "scalar":
                        args.append(a.value)
                    elif a.kind == "local":
                        args.append(cl.LocalMemory(a.nbytes))
                    else:
                        raise ModelError(f"layer '{step.name}': unknown argument kind {a.kind!r}")
                try:
                    kernel.set_args(*args)
                except cl.Error as e:
                    raise ExecutionError(
                        f"layer '{step.name}' (type {step.type}, {step.impl}): cannot set the "
                        f"arguments of kernel '{launch.entry}': {e}") from e
                self._launches.append((kernel, launch.global_size, launch.local_size, index))
            if step.host is not None:
                self._launches.append((HostStep(step, map(self.buffer, step.inputs),
                                                map(self.buffer, step.outputs)), None, None, index))

    # -- running ---------------------------------------------------------------------------
    def start(self, arrays: dict) -> None:
        """Enqueue uploads, every kernel and the output reads; return without waiting."""
        if self.busy:
            raise ExecutionError("this request is still running; wait for it first")
        q = self.queue
        self._host_inputs = []
        for name, (buf, desc) in self._inputs.items():
            arr = arrays[name]
            if np.asarray(arr).dtype.kind not in "biuf":   # complex, object, text: no silent cast
                raise ModelError(f"input '{name}' holds {np.asarray(arr).dtype} values; the "
                                 f"network takes {desc.np_dtype} (numbers)")
            host = np.ascontiguousarray(arr, dtype=desc.np_dtype)
            if host.shape != desc.shape:
                raise ModelError(f"input '{name}' has shape {list(arr.shape)}; the network was "
                                 f"compiled for {list(desc.shape)}")
            self._host_inputs.append(host)      # keep alive until the copy is done
            cl.enqueue_copy(q, buf, host, is_blocking=False)
        steps = self.plan.steps
        try:
            if self._host is not None:
                self.events = self._host.enqueue_launches(q, self._launches, steps,
                                                          self.network.profiling)
            elif self.network.profiling:
                self.events = [(steps[i], cl.enqueue_nd_range_kernel(q, k, g, l))
                               for k, g, l, i in self._launches]
            else:
                for k, g, l, _ in self._launches:
                    cl.enqueue_nd_range_kernel(q, k, g, l)
        except cl.Error as e:
            raise ExecutionError(f"enqueue failed: {e}") from e
        outs = {}
        for name, key in self.plan.outputs:
            desc = self.plan.descs[key]
            if self._host is not None:      # read by a map: see host_step.py
                outs[name] = (self._host.read_output(q, self.buffer(key), desc), desc)
                continue
            host = np.empty(desc.buffer_count, desc.np_dtype)
            cl.enqueue_copy(q, host, self.buffer(key), is_blocking=False)
            outs[name] = (host, desc)
        self._pending = outs
        self.busy = True

    def wait(self) -> dict[str, np.ndarray]:
        """Wait for the outputs (the one host wait of an inference) and return them."""
        if not self.busy:
            raise ExecutionError("this request was not started")
        pending = self._pending
        try:
            self.queue.finish()
            if self._host is not None:      # the outputs out of their maps; a host step's error
                pending = self._host.finish(pending)
            # network outputs are dense (the compiler reorders custom layers' back): the array
            # read back is the result itself, no second copy
            return {name: host.reshape(desc.shape) if desc.is_plain else desc.unpack(host)
                    for name, (host, desc) in pending.items()}
        except cl.Error as e:
            raise ExecutionError(f"the device failed while running the network: {e}") from e
        finally:
            # last: once idle, another thread's infer may pick this request and start it
            self._pending = None
            self._host_inputs = []
            self.busy = False

    def infer(self, arrays: dict) -> dict[str, np.ndarray]:
        self.start(arrays)
        return self.wait()


def _shared_consts(context, plan) -> dict:
    """Constant buffers are uploaded once per plan and shared by all its requests."""
    cache = plan.constant_buffers
    if cache:
        return cache
    used = set()
    for step in plan.steps:
        for k in step.inputs:
            used.add(plan.root(k))
    mf = cl.mem_flags
    for key in used:
        if key in plan.consts:
            # in the element type the plan gave the tensor (a Const's own, unless folded)
            desc = plan.descs.get(key)
            value = np.ascontiguousarray(plan.consts[key],
                                         dtype=desc.np_dtype if desc is not None else None)
            cache[key] = cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR,
                                   hostbuf=value if value.nbytes else np.zeros(1, np.uint8))
    return cache


def _const_arg(context, plan, arg) -> cl.Buffer:
    """The buffer of an Arg.const, uploaded once per plan and shared by its requests. Keyed
    by the Arg's identity (its array is not hashable); the entry keeps the Arg alive, so the id
    cannot be reused by another object."""
    entry = plan.arg_buffers.get(id(arg))
    if entry is None:
        value = np.ascontiguousarray(arg.value)
        buf = cl.Buffer(context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR,
                        hostbuf=value if value.nbytes else np.zeros(1, np.uint8))
        entry = plan.arg_buffers[id(arg)] = (buf, arg)
    return entry[0]
