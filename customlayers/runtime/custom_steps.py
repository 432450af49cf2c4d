"""A custom layer in a network: its steps (reorders in, the bound kernel, reorders out) and its
output shapes. Real inputs bind by port; Data blobs by the names of the layer's Const inputs."""
from __future__ import annotations

import numpy as np

from ..errors import BindingError, ModelError
from ..graph.graph import Graph, Node
from ..jit.bindings import in_format, output_shape_from_formula
from ..jit.tensor import CUSTOM_LAYER_DTYPES, TensorDesc
from .plan import Step, TensorKey
from .reorder import reorder_launch


def custom_layer_steps(graph: Graph, registry, node: Node, in_keys, in_descs, in_consts,
                       pad_inputs=None) -> list[Step]:
    """Bind a custom layer: real inputs by port, Data blobs from Const inputs by name.
    Returns its steps in order: reorders of its inputs, the layer, reorders of its outputs
    back to dense BFYX (what the rest of the graph reads)."""
    for i, d in enumerate(in_descs):
        if d.dtype not in CUSTOM_LAYER_DTYPES:   # the contract's <T>_TYPE list has no double
            raise BindingError(f"{node.describe()}: input {i} is {d.dtype}; a custom layer "
                               f"takes {', '.join(CUSTOM_LAYER_DTYPES)}")
    spec = registry.spec(node.type)
    data_names = {d.name for d in spec.data}
    g = graph
    real_ports: list[int] = []
    data: dict[str, np.ndarray] = {}
    for i, k in enumerate(in_keys):
        producer = g.nodes[k[0]]
        pnames = {producer.name, producer.name.rsplit("/", 1)[-1],
                  *producer.outputs[k[1]].names, *node.inputs[i].names}
        match = data_names & pnames
        if i in in_consts and match:
            data[match.pop()] = in_consts[i]
        else:
            real_ports.append(i)
    missing = data_names - set(data)
    if missing:
        raise BindingError(f"the descriptor binds Data {', '.join(sorted(missing))}, but the "
                           f"layer has no constant input of that name")
    bound_ports = {t.port_index for t in spec.inputs}
    if bound_ports and max(bound_ports) >= len(real_ports):
        raise BindingError(f"the descriptor binds input port {max(bound_ports)}, but the layer "
                           f"has {len(real_ports)} input(s)")
    steps: list[Step] = []
    kernel_inputs: list[TensorKey] = []
    kernel_descs: list[TensorDesc] = []
    by_port = {t.port_index: t for t in spec.inputs}
    for port, i in enumerate(real_ports):
        key, desc = in_keys[i], in_descs[i]
        want = in_format(desc, by_port.get(port))
        if pad_inputs is not None:
            lower, upper = pad_inputs
            want = want.with_padding(lower, upper)
        if want != desc:
            rkey = ("in", node.id, port)
            steps.append(Step(f"{node.name}/reorder_in{port}", "Reorder", "reorder", "reorder",
                              [reorder_launch(desc, want)], [key], [rkey], [desc], [want]))
            key, desc = rkey, want
        kernel_inputs.append(key)
        kernel_descs.append(desc)

    # output shapes: declared in the model, else the descriptor's shape formula, else input 0
    out_descs = []
    for binding in spec.outputs:
        port = node.outputs[binding.port_index] if binding.port_index < len(node.outputs) else None
        shape = output_shape(node, spec, binding, port, kernel_descs)
        fmt = binding.format if binding.format != "ANY" else kernel_descs[0].format
        dtype = port.dtype if port is not None and port.dtype else kernel_descs[0].dtype
        out_descs.append(TensorDesc(shape, dtype, fmt))
    bound = registry.bind(node.type, kernel_descs, out_descs, params=node.attrs, data=data)
    out_keys, after = [], []
    for j, d in enumerate(out_descs):
        if d.is_plain:
            out_keys.append((node.id, j))
        else:
            raw = ("out", node.id, j)
            out_keys.append(raw)
            after.append(Step(f"{node.name}/reorder_out{j}", "Reorder", "reorder", "reorder",
                              [reorder_launch(d, d.plain())], [raw], [(node.id, j)], [d],
                              [d.plain()]))
    steps.append(Step(node.name, node.type, "custom", spec.entry, [bound.launch()],
                      kernel_inputs, out_keys, kernel_descs, out_descs))
    return steps + after


def output_shape(node: Node, spec, binding, port, input_descs) -> tuple[int, ...]:
    """A custom layer's output shape (ONNX shape inference cannot know it), in this order:
    the model's declared shape when fully known (IR port dims, ONNX value_info); else the
    descriptor's `shape` formula over the dim tensor; else input 0's shape. The declared dims
    that are known still count: a formula must agree with them, and without a formula a partly
    declared shape (value_info ["N",16,3,4] with a dynamic batch) takes only its open dims from
    input 0."""
    declared = tuple(port.shape) if port is not None and port.shape is not None else None
    if binding.shape:
        computed = output_shape_from_formula(spec, binding.shape, input_descs)
        source = f"the descriptor's shape formula '{binding.shape}'"
    elif declared is not None and all(d is not None for d in declared):
        return declared
    else:
        computed, source = tuple(input_descs[0].shape), "input 0"
        if declared is not None and len(declared) == len(computed):
            computed = tuple(c if d is None else d for d, c in zip(declared, computed))
    if declared is not None and (len(declared) != len(computed) or any(
            d is not None and d != c for d, c in zip(declared, computed))):
        # a wrong output shape is memory the kernel writes past: refuse the disagreement
        shown = ["?" if d is None else d for d in declared]
        raise ModelError(f"{node.describe()}: output port {binding.port_index} is declared as "
                         f"{shown} in the model, but {source} gives {list(computed)}"
                         f"{'' if binding.shape else '; give its output Tensor a shape formula'}")
    return computed
