"""--check-bounds and --sanitize for the custom layers of a whole model (run).

Each custom step is checked on the inputs it really receives in the model: the network runs up
to that step (a prefix of its plan, whose outputs are the step's input tensors), then the
step's kernels run alone with guard zones (bounds.py, in a child process: bounds_process.py)
and/or on Oclgrind (sanitize.py). Custom
steps are checked in model order and the check stops at the first with problems, so a native run
only ever includes custom kernels already found sound. Debugging mode: it waits on the host
around every custom step.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from .bounds_process import run_guarded_in_child
from ..compile.compiler import plan_prefix
from ..execute.request import InferRequest
from .sanitize import sanitize_launch
from ..execute.unwritten import layer_output


def check_custom_layers(net, arrays: Mapping[str, np.ndarray], *, bounds: bool,
                        sanitize: bool) -> list:
    """Every problem found in the model's custom steps (BoundsProblem, SanitizeFinding); []
    when every custom kernel kept to its tensors."""
    shapes = {name: tuple(np.asarray(a).shape) for name, a in arrays.items()}
    values = {n: arrays[n] for n in net.value_inputs if n in arrays}
    plan = net.plan_for(shapes, values)
    for index, step in enumerate(plan.steps):
        if step.impl != "custom":          # built-ins and reorders are the project's own
            continue
        captured = [(f"input {i}", key) for i, key in enumerate(step.inputs)
                    if plan.root(key) not in plan.consts]
        prefix = plan_prefix(plan, index, captured, net.engine.device.max_mem_alloc_size)
        seen = InferRequest(net, prefix).infer({n: arrays[n] for n, _ in plan.inputs})
        packed = []
        for i, (key, desc) in enumerate(zip(step.inputs, step.input_descs)):
            root = plan.root(key)
            value = plan.consts[root] if root in plan.consts else seen[f"input {i}"]
            packed.append(desc.pack(np.asarray(value).reshape(desc.shape)))
        problems: list = []
        for launch, program in zip(step.launches, plan.programs[index]):
            if sanitize:
                problems += sanitize_launch(launch, step.name, packed,
                                            [d.nbytes for d in step.output_descs])
            if bounds and not problems:
                problems += run_guarded_in_child(net.engine, program, launch, step.name,
                                                 packed, step.input_descs,
                                                 step.output_descs,
                                                 _unwritten_checked(plan, index))[1]
        if problems:
            return problems
    return []


def _unwritten_checked(plan, index: int) -> list[bool]:
    """Per output of step `index`, whether elements it leaves unwritten are a finding: a layer
    output that no later step writes (an MVCL layer's stages may share one), not an MVCL
    layer's own byte buffer (unwritten.layer_output)."""
    step = plan.steps[index]
    later = {plan.root(k) for s in plan.steps[index + 1:] for k in s.outputs}
    return [layer_output(k) and plan.root(k) not in later for k in step.outputs]
