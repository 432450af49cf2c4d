"""GELU as one layer: exporters write x * 0.5 * (1 + erf(x / sqrt(2))) as five elementwise
layers (torch.onnx at opset 17: Div, Erf, Add, Mul, Mul), each a launch and a pass over the
tensor; a transformer has one per block. The chain becomes the built-in Gelu (erf mode), which
computes the same expression in one kernel.

Matched: Divide by sqrt(2) (or Multiply by 1/sqrt(2)) -> Erf -> Add 1 -> Multiply by x ->
Multiply by 0.5, or x * 0.5 first and then the product with (1 + erf), or (the dynamo
exporter's) Add 1 -> Multiply by 0.5 -> Multiply by x. Each link must be the
only reader of the one before (else its value is needed elsewhere), the constants must be those
values to float precision (of no more axes than x: they must not broadcast it), every layer a
built-in, and the chain's end read by layers only (a graph output keeps its own name and
layers), on float32 tensors. Within float rounding of the five layers: Gelu evaluates the same
expression in float.
"""
from __future__ import annotations

import math

from ..graph.graph import Graph, Node
from .graph_edit import const_input, rebuilt_graph, sole_layer_reading_only_output

_SQRT2 = math.sqrt(2.0)


def fold_gelu_chains(graph: Graph, is_builtin) -> tuple[Graph, list[str]]:
    """(the rewritten graph, one note per chain); the graph itself when nothing folds."""
    changed, drop, redirect, notes = {}, set(), {}, []
    for erf in list(graph):
        if erf.type != "Erf" or not is_builtin(erf) or erf.id in drop:
            continue
        found = _chain(graph, erf, is_builtin)
        if found is None:
            continue
        x, end, absorbed = found
        if not _same_rank(x[2], end.outputs[0]):
            continue
        consumers = [graph.nodes[d] for d, _ in graph.consumers(end.id, 0)]
        if not consumers or any(c.type == "Result" for c in consumers):
            continue
        changed[erf.id] = Node(id=erf.id, name=end.name, type="Gelu",
                               attrs={"approximation_mode": "erf"}, inputs=[x[2]],
                               outputs=list(end.outputs), version="opset7",
                               location=end.location)
        redirect[(erf.id, 0)] = (x[0], x[1])
        for dst, port in graph.consumers(end.id, 0):
            redirect[(dst, port)] = (erf.id, 0)
        drop.update(absorbed)
        notes.append(f"folded the erf GELU chain ending at '{end.name}' into one Gelu layer")
    if not drop:
        return graph, []
    return rebuilt_graph(graph, changed, drop, redirect), notes


def _same_rank(x, out) -> bool:
    """Whether the chain's output has x's rank: a constant of one value but more axes (a
    [1, 1] sqrt(2)) broadcasts x up to its rank, which the one Gelu layer would not."""
    return x.shape is not None and out.shape is not None and len(x.shape) == len(out.shape)


def _is_const(graph: Graph, node: Node, port: int, value: float) -> bool:
    found = const_input(graph, node, port)
    return found is not None and found.size == 1 and found.dtype.kind == "f" and \
        abs(float(found.reshape(-1)[0]) - value) <= 1e-6 * abs(value)


def _other_port(graph: Graph, node: Node, src_id: str) -> int | None:
    """The input port of a two-input `node` not fed by `src_id` (None: both or neither are)."""
    ports = [p for p in range(2) if graph.producer(node.id, p)[0] == src_id]
    return 1 - ports[0] if len(node.inputs) == 2 and len(ports) == 1 else None


def _chain(graph: Graph, erf: Node, is_builtin):
    """((x's producer, port, Port), the chain's last node, the ids of every node of it but the
    Erf) for a GELU chain through `erf`; None when the layers around it are not one."""
    scale = graph.nodes[graph.producer(erf.id, 0)[0]]
    if not is_builtin(scale) or sole_layer_reading_only_output(graph, scale) != erf:
        return None
    if scale.type == "Divide" and _is_const(graph, scale, 1, _SQRT2):
        x_port = 0
    elif scale.type == "Multiply" and _is_const(graph, scale, 1, 1 / _SQRT2):
        x_port = 0
    elif scale.type == "Multiply" and _is_const(graph, scale, 0, 1 / _SQRT2):
        x_port = 1
    else:
        return None
    x_src = graph.producer(scale.id, x_port)
    x = (x_src[0], x_src[1], scale.inputs[x_port])
    if x[2].dtype != "f32":           # a half chain rounds after each layer: not one Gelu
        return None
    add = sole_layer_reading_only_output(graph, erf)
    if add is None or add.type != "Add" or not is_builtin(add):
        return None
    port = _other_port(graph, add, erf.id)
    if port is None or not _is_const(graph, add, port, 1.0):
        return None
    mul = sole_layer_reading_only_output(graph, add)
    if mul is None or mul.type != "Multiply" or not is_builtin(mul):
        return None
    port = _other_port(graph, mul, add.id)
    if port is None:
        return None
    other = graph.producer(mul.id, port)
    absorbed = {scale.id, add.id, mul.id}
    if _is_const(graph, mul, port, 0.5):             # 0.5 * (1 + erf), then * x (dynamo)
        end = sole_layer_reading_only_output(graph, mul)
        if end is None or end.type != "Multiply" or not is_builtin(end):
            return None
        port = _other_port(graph, end, mul.id)
        if port is None or graph.producer(end.id, port) != x_src:
            return None
        absorbed.add(end.id)
        return x, end, absorbed
    if other == x_src:                               # x * (1 + erf), then * 0.5
        end = sole_layer_reading_only_output(graph, mul)
        if end is None or end.type != "Multiply" or not is_builtin(end):
            return None
        half = _other_port(graph, end, mul.id)
        if half is None or not _is_const(graph, end, half, 0.5):
            return None
        absorbed.add(end.id)
        return x, end, absorbed
    half = graph.nodes[other[0]]                      # (x * 0.5) * (1 + erf)
    if half.type != "Multiply" or not is_builtin(half) or \
            sole_layer_reading_only_output(graph, half) != mul:
        return None
    port = _other_port(graph, half, x_src[0])
    if port is None or graph.producer(half.id, 1 - port) != x_src or \
            not _is_const(graph, half, port, 0.5):
        return None
    absorbed.add(half.id)
    return x, mul, absorbed

