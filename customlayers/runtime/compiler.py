"""Compiling a network's graph for concrete input shapes (clDNN's "program" step): every layer
resolved to steps of KernelLaunch values (custom layers through custom_steps.py, built-ins
through their Op), shapes inferred, epilogues fused (fusion.py), memory planned by tensor
lifetime (planner.py), and every program built through the cache."""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ..errors import BindingError, CustomLayersError, ModelError
from ..graph.graph import Node
from ..jit.tensor import TensorDesc
from .custom_steps import custom_layer_steps
from .plan import CompiledPlan, Step, TensorKey
from .planner import MemoryPlan, TensorLife, plan_memory


def compile_plan(net, input_shapes: Mapping[str, tuple],
                 input_values: Mapping[str, np.ndarray]) -> CompiledPlan:
    """Compile `net`'s graph for concrete input shapes (and values of its value inputs)."""
    from ..ops import OPS
    g = net.graph
    descs: dict = {}
    consts: dict = {}
    alias: dict = {}
    steps: list[Step] = []
    inputs: list[tuple[str, TensorKey]] = []
    outputs: list[tuple[str, TensorKey]] = []
    fusions = _plan_fusions(net)
    absorbed = {nid: owner for owner, ep in fusions.items() for nid in ep.absorbed}
    chains = _plan_affine_chains(net, set(absorbed))
    absorbed.update({nid: head for head, ch in chains.items() for nid in ch.epilogue.absorbed})

    for node in net._order:
        try:
            if node.type == "Parameter":
                dtype = node.outputs[0].dtype if node.outputs else "f32"
                descs[(node.id, 0)] = TensorDesc(input_shapes[node.name], dtype)
                if node.name in input_values:   # compiled in: no input buffer
                    consts[(node.id, 0)] = input_values[node.name]
                else:
                    inputs.append((node.name, (node.id, 0)))
                continue
            if node.type == "Const":
                value = np.asarray(node.value)
                consts[(node.id, 0)] = value
                descs[(node.id, 0)] = TensorDesc(value.shape, value.dtype)
                continue
            if node.id in absorbed:           # computed by the kernel it was fused into
                owner = (absorbed[node.id], 0)
                descs[(node.id, 0)] = descs[owner]
                alias[(node.id, 0)] = owner
                continue
            in_keys = [g.producer(node.id, i) for i in range(len(node.inputs))]
            in_descs = [descs[k] for k in in_keys]
            if node.type == "Result":
                src = in_keys[0]
                sn = g.nodes[src[0]]
                names = sn.outputs[src[1]].names
                outputs.append((names[0] if names else node.name, src))
                continue
            in_consts = {i: consts[k] for i, k in enumerate(in_keys) if k in consts}
            if node.id in chains:               # Multiply/Add/ReLU chain: one kernel
                new_steps = [_affine_step(node, chains[node.id], in_keys, in_descs, consts,
                                          descs)]
            elif net._is_custom(node):
                new_steps = custom_layer_steps(g, net.registry, node, in_keys, in_descs,
                                               in_consts, net.pad_custom_inputs)
            else:
                op = OPS[node.type]
                # what the op may know of the device to choose its kernels
                attrs = dict(op.parse_attributes(node.attrs, node.name), _device=net._traits)
                out_specs = op.infer_shapes(attrs, in_descs, in_consts)
                out_descs = [TensorDesc(shape, dtype) for shape, dtype in out_specs]
                _check_declared_shapes(node, out_descs)
                _check_fp64(net, node, in_descs + out_descs)
                out_keys = [(node.id, j) for j in range(len(out_descs))]
                if op.is_view:
                    descs[out_keys[0]] = out_descs[0]
                    alias[out_keys[0]] = in_keys[0]
                    if in_keys[0] in consts:
                        consts[out_keys[0]] = consts[in_keys[0]].reshape(out_descs[0].shape)
                    continue
                step_type = node.type
                ep = fusions.get(node.id)
                if ep is not None:            # bias and ReLU computed where it stores
                    in_keys, in_descs = _fold_epilogue(node, ep, in_keys, in_descs,
                                                            out_descs[0], consts, descs)
                    attrs = dict(attrs, _bias=bool(ep.steps), _relu=ep.relu)
                    step_type = f"{node.type}+{ep.label}"
                launches = op.launches(attrs, in_descs, out_descs, in_consts)
                new_steps = [Step(node.name, step_type, "built-in",
                                  ",".join(dict.fromkeys(l.entry for l in launches)),
                                  launches, list(in_keys), out_keys, in_descs, out_descs)]
            for st in new_steps:
                for k, d in zip(st.outputs, st.output_descs):
                    descs[k] = d
            steps.extend(new_steps)
        except CustomLayersError as e:
            # say which layer, unless the error already does; its own fields stay as they are
            if e.context is None and f"'{node.name}'" not in str(e):
                e.context = node.describe()
            raise

    memory = _plan_memory(steps, descs, alias, consts, inputs, outputs)
    programs = _build(net.engine, steps)
    plan = CompiledPlan(steps, descs, consts, alias, inputs, outputs, memory, programs)
    net.messages.append(memory.summary())
    return plan


def _fold_epilogue(node, ep, in_keys, in_descs, out_desc, consts, descs):
    """Collapse the fused chain into one bias input (and weights scaled per channel)."""
    channels = out_desc.shape[1]
    scale, bias = ep.scale_and_bias(channels)
    if ep.has_scale:
        w = np.asarray(consts[in_keys[1]], np.float64)
        # output channel o is w's axis 0 (OIYX) or axes 0,1 together (GOIYX)
        lead = 2 if node.type == "GroupConvolution" else 1
        folded = (w.reshape(w.shape[:lead] + (-1,)) *
                  scale.reshape(w.shape[:lead] + (1,))).reshape(w.shape)
        wkey = ("folded_weights", node.id)
        consts[wkey] = folded.astype(np.float32)
        descs[wkey] = in_descs[1]
        in_keys = [in_keys[0], wkey] + in_keys[2:]
    bkey = ("fused_bias", node.id)
    consts[bkey] = bias.astype(np.float32)
    descs[bkey] = TensorDesc((channels,))
    return in_keys + [bkey], in_descs + [descs[bkey]]


def _affine_step(node: Node, chain, in_keys, in_descs, consts, descs) -> Step:
    """The chain headed by `node` as one channel_affine launch (ops/affine.py)."""
    from ..ops.affine import channel_affine_launch
    x_key, x = in_keys[chain.data_port], in_descs[chain.data_port]
    ep = chain.epilogue
    scale, bias = ep.scale_and_bias(x.shape[1])
    keys = [x_key]
    for name, values in (("affine_scale", scale), ("affine_bias", bias)):
        key = (name, node.id)
        consts[key] = values.astype(np.float32)
        descs[key] = TensorDesc((x.shape[1],))
        keys.append(key)
    launch = channel_affine_launch(x, ep.relu)
    label = "+".join(["scale"] * ep.has_scale + ["bias"] * any(k == "add" for k, _ in ep.steps)
                     + ["relu"] * ep.relu)
    return Step(node.name, f"ChannelAffine({label})", "built-in", launch.entry, [launch], keys,
                [(node.id, 0)], [x, descs[keys[1]], descs[keys[2]]], [x.plain()])


def _plan_affine_chains(net, taken: set) -> dict:
    if not net.fuse:
        return {}
    from .fusion import plan_affine_chains
    return plan_affine_chains(net.graph, net._order, net._is_custom, taken)


def _plan_fusions(net) -> dict:
    if not net.fuse:
        return {}
    from ..ops import OPS
    from .fusion import plan_fusions
    fusable = {t for t, op in OPS.items() if getattr(op, "fusable_epilogue", False)}
    return plan_fusions(net.graph, net._order, fusable, net._is_custom)


def _check_declared_shapes(node: Node, out_descs: list[TensorDesc]) -> None:
    for j, (port, desc) in enumerate(zip(node.outputs, out_descs)):
        declared = port.shape
        if declared is None or any(d is None for d in declared):
            continue
        if tuple(declared) != tuple(desc.shape):
            raise ModelError(f"{node.describe()}: output port {j} is declared as "
                             f"{list(declared)} but the inputs give {list(desc.shape)}")


def _check_fp64(net, node: Node, descs: Sequence[TensorDesc]) -> None:
    if not net._fp64 and any(d.dtype == "f64" for d in descs):
        raise BindingError(f"{node.describe()}: f64 (double) tensors need a device with "
                           f"cl_khr_fp64; {net.engine.device.name.strip()} has none (convert "
                           f"the model to float32)")


def _plan_memory(steps, descs, alias, consts, inputs, outputs) -> MemoryPlan:
    first: dict = {}
    last: dict = {}
    end = len(steps)
    for i, s in enumerate(steps):
        for k in s.outputs:
            first.setdefault(k, i)
            last[k] = max(last.get(k, i), i)
        for k in s.inputs:
            r = k
            while r in alias:
                r = alias[r]
            last[r] = max(last.get(r, i), i)
    for _, k in outputs:
        r = k
        while r in alias:
            r = alias[r]
        last[r] = end
    input_keys = {k for _, k in inputs}
    lives = [TensorLife(k, descs[k].nbytes, first[k], last[k]) for k in first
             if k not in consts and k not in input_keys]
    return plan_memory(lives)


def _build(eng, steps: list[Step]) -> list:
    programs = []
    for s in steps:
        progs = []
        for launch in s.launches:
            try:
                progs.append(eng.cache.build(eng.context, eng.device, launch.source,
                                             launch.options, line_map=launch.line_map,
                                             label=launch.label or s.name))
            except CustomLayersError as e:
                if hasattr(e, "layer") and not getattr(e, "layer", None):
                    e.layer = s.name
                raise
        programs.append(progs)
    return programs
