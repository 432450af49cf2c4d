"""What a compiled plan allocates, as (bytes, name) for device_memory.py's checks: its tensors'
slots, what each request allocates of its own, and what its first request uploads for all.
The launches' arguments are walked as a request binds them (launch_args.bind_args), so the
count and the binding cannot disagree about a kind of argument."""
from __future__ import annotations

import numpy as np

from ..device.device_memory import Need
from ..device.launch_args import ArgumentSource, bind_args
from .plan import alias_root
from .planner import MemoryPlan


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
