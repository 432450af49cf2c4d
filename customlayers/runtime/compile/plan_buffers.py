"""What a compiled plan allocates, as (bytes, name) for device_memory.py's checks: its tensors'
slots, what each request allocates of its own, and what its first request uploads for all.
The launches' arguments are walked as a request binds them (launch_args.bind_args), so the
count and the binding cannot disagree about a kind of argument."""
from __future__ import annotations

import numpy as np

from ..device.device_memory import Need, check_fits
from ..device.launch_args import ArgumentSource, bind_args
from ..execute.unwritten import guard_bytes, guarded
from .plan import alias_root
from .planner import MemoryPlan, TensorLife, plan_memory


def plan_buffers(steps, descs, consts, alias, inputs, outputs, memory: MemoryPlan, states=()
                 ) -> tuple[list[Need], list[Need], list[Need]]:
    """What a plan allocates, as (bytes, name): (its tensors in the memory plan's slots, what
    else each request allocates: inputs and scratch buffers, what its first request uploads
    for all: the constants a kernel, a host step or an output reads (request.py) and the
    layers' constant arguments, packed weights and Data blobs). `states`: the plan's states
    (key -> TensorDesc), one buffer each of every request's own."""
    def root(key):
        return alias_root(alias, key)

    producer = {k: s for s in steps for k in s.outputs}
    tensors: list[Need] = []
    for key in memory.slot_of:
        step = producer.get(key)
        what = (f"output {step.outputs.index(key)} of layer '{step.name}' ({step.type})"
                if step is not None else f"tensor {key}")
        tensors.append((descs[key].nbytes, what))
    own: list[Need] = [(descs[key].nbytes, f"input '{name}'") for name, key in inputs]
    own += [(max(descs[key].nbytes, 1), f"state '{key[1]}'") for key in states]
    shared: list[Need] = []
    read = {root(k) for _, k in outputs}
    needs = _LaunchNeeds(root, read, own, shared)
    for s in steps:
        if s.host is not None:
            read.update(root(k) for k in s.inputs)
        needs.step = s
        for launch in s.launches:
            bind_args(launch.args, needs, s.name)
    shared += [(np.asarray(v).nbytes, f"constant {key[0] if isinstance(key, tuple) else key}")
               for key, v in consts.items() if key in read]
    return tensors, own, shared


def check_device_memory(device, steps, descs, consts, alias, inputs, outputs,
                        memory: MemoryPlan, states=()) -> tuple[int, int]:
    """DeviceError naming the tensor when a buffer is over the device's largest allocation, or
    what a request allocates at once over its memory (device_memory.py): checked before
    anything is allocated. Returns (bytes each request allocates, bytes its plan's constants
    take once), which requests then reserve (device_memory.reserve)."""
    tensors, own, shared = plan_buffers(steps, descs, consts, alias, inputs, outputs, memory,
                                        states)
    check_fits(device, tensors + own + shared, "the network, for these input shapes,",
               total=memory.planned_bytes + sum(n for n, _ in own + shared))
    return memory.planned_bytes + sum(n for n, _ in own), sum(n for n, _ in shared)


def plan_memory_of(steps, descs, alias, consts, inputs, outputs, states=(),
                   largest: int | None = None) -> MemoryPlan:
    """One life per buffer: a tensor written in place into a Concat's output (an alias) makes
    that output live from the first such write. States are the request's own, not planned.
    `largest`: the device's largest buffer, which no guard zone pushes a slot past."""
    def root(key):
        return alias_root(alias, key)

    first: dict = {}
    last: dict = {}
    end = len(steps)
    for i, s in enumerate(steps):
        for k in s.outputs:
            r = root(k)
            first.setdefault(r, i)
            last[r] = max(last.get(r, i), i)
        for k in s.inputs:
            r = root(k)
            last[r] = max(last.get(r, i), i)
    for _, k in outputs:
        last[root(k)] = end
    input_keys = {k for _, k in inputs}
    # a custom kernel's output has a guard zone after it in its slot (unwritten.guarded),
    # within the device's largest buffer (the slot's 256-byte rounding included)
    guards = {}
    for s in steps:
        for k, d in zip(s.outputs, s.output_descs):
            if root(k) == k and guarded(s, k, d):
                room = None if largest is None else largest - d.nbytes - 255
                guards[k] = guard_bytes(d.nbytes, room)
    guards = {k: g for k, g in guards.items() if g > 0}
    lives = [TensorLife(k, descs[k].nbytes + guards.get(k, 0), first[k], last[k]) for k in first
             if k not in consts and k not in input_keys and k not in states]
    memory = plan_memory(lives)
    memory.guards = {k: g for k, g in guards.items() if k in memory.slot_of}
    memory.total_tensor_bytes -= sum(memory.guards.values())
    # a step's output that is an alias was placed in a Concat's output (views write nothing)
    in_place = {k for s in steps for k in s.outputs if k in alias}
    memory.total_tensor_bytes += sum(descs[k].nbytes for k in in_place)
    memory.in_place_tensors = len(in_place)
    return memory


class _LaunchNeeds(ArgumentSource):
    """What a step's launches need beyond the memory plan, walked like a request binds them:
    the roots they read, each request's scratch buffers (`own`), the constant arguments the
    plan uploads once (`shared`; one Arg object, one upload: request.py keys them by id)."""

    def __init__(self, root, read: set, own: list, shared: list):
        self.root, self.read, self.own, self.shared = root, read, own, shared
        self.step = None                    # the step whose launches are walked
        self.counted: set = set()           # ids of the Arg.consts counted (the steps hold them)

    def input(self, arg, position):
        self.read.add(self.root(self.step.inputs[arg.index]))

    def scratch(self, arg, position):
        self.own.append((arg.nbytes, f"a scratch buffer of layer '{self.step.name}'"))

    def const(self, arg, position):
        if id(arg) not in self.counted:
            self.counted.add(id(arg))
            self.shared.append((np.asarray(arg.value).nbytes,
                                f"a constant argument of layer '{self.step.name}'"))

    def output(self, arg, position):    # in the memory plan's slots
        pass

    def local(self, arg, position):     # no buffer
        pass
