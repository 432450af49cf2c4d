"""Layers that compute the same thing from the same inputs run once (common subexpression
elimination).

Exporters repeat work per block: torch's TransformerEncoderLayer expands the padding mask to
the heads in every layer, from the same tensor, with its own copies of the same shape
constants (BERT-base: twelve Reshape-Expand-Reshape chains, twelve launches that write the same
values). Two built-in nodes of the same type, attributes and facts whose inputs come from the
same outputs (or from constants of equal type, shape and value) give the same outputs; the
later one is dropped and its readers read the first. Constants of equal value merge first, so
that the chains that read them can merge.

Never merged: graph inputs and outputs (nor a layer a network output reads: it names that
output), a request's state (ReadValue, Assign), nodes a custom layer implements (their kernels
may do anything), and nodes with no outputs.
"""
from __future__ import annotations

import numpy as np

from ..errors import ModelError
from ..graph.graph import Graph, Node
from .graph_edit import rebuilt_graph

_NEVER = ("Parameter", "Result", "ReadValue", "Assign")


def merge_common_nodes(graph: Graph, is_builtin) -> tuple[Graph, list[str]]:
    """(the rewritten graph, one note per layer type with the count merged); the graph itself
    when nothing merges."""
    first: dict[tuple, str] = {}
    same: dict[str, str] = {}                 # merged node id -> the node it is the same as
    constants: dict[tuple, list[str]] = {}    # _constant_key -> the constants seen under it
    for node in graph:                        # model order: producers come first
        if node.type == "Const":
            _merge_constant(graph, node, constants, same)
            continue
        key = _key(graph, node, same, is_builtin)
        if key is None:
            continue
        if key in first:
            same[node.id] = first[key]
        else:
            first[key] = node.id
    if all(graph.nodes[nid].type == "Const" for nid in same):
        return graph, []                # equal constants alone: nothing runs less
    redirect = {}
    for edge in graph.edges:
        if edge.src in same and edge.dst not in same:
            redirect[(edge.dst, edge.dst_port)] = (same[edge.src], edge.src_port)
    counts: dict[str, int] = {}
    for nid in same:
        kind = graph.nodes[nid].type
        if kind != "Const":
            counts[kind] = counts.get(kind, 0) + 1
    notes = [f"merged {n} {kind} layer(s) that repeat an earlier one's work"
             for kind, n in sorted(counts.items())]
    return rebuilt_graph(graph, {}, set(same), redirect), notes


def _key(graph: Graph, node: Node, same: dict, is_builtin) -> tuple | None:
    """What makes `node`'s outputs what they are, or None where it must stay itself."""
    if node.type in _NEVER or not node.outputs:
        return None
    if not is_builtin(node) or any(graph.nodes[dst].type == "Result"
                                   for port in range(len(node.outputs))
                                   for dst, _ in graph.consumers(node.id, port)):
        return None                     # a network output keeps the layer that names it
    try:
        hash(node.facts)
    except TypeError:
        return None                     # a fact that cannot be compared
    sources = []
    for port in range(len(node.inputs)):
        try:
            src, src_port = graph.producer(node.id, port)
        except ModelError:
            return None                 # an unconnected input: the layer reports it
        sources.append((same.get(src, src), src_port))
    attrs = tuple(sorted((k, str(v)) for k, v in node.attrs.items()))
    return (node.type, node.domain, node.version, attrs, tuple(sources), node.facts,
            tuple((p.dtype, None if p.shape is None else tuple(p.shape)) for p in node.outputs))


# values of a constant read for its key: the whole value is compared only between constants
# whose keys match. Keying every constant by all its bytes copied a model's weights once per
# load (ResNet-50: 100 MB, 0.09 s of a 0.72 s first load on the GPU machine, stop 26)
_SAMPLE = 64


def _merge_constant(graph: Graph, node: Node, constants: dict, same: dict) -> None:
    """`node` (a Const) noted as the same as an earlier constant of equal type, shape and bytes
    (-0.0 is not 0.0, and a NaN equals the same NaN), else as a constant of its own."""
    if node.value is None or not node.outputs:
        return
    raw = np.asarray(node.value)
    if raw.dtype.hasobject:
        return                          # strings: no bytes to compare; kept as they are
    value = np.ascontiguousarray(raw)   # (at least 1-D: the key keeps the shape it had)
    flat = value.reshape(-1)
    sample = flat[::max(1, flat.size // _SAMPLE)][:_SAMPLE].tobytes()
    key = (str(raw.dtype), raw.shape, sample, tuple(p.dtype for p in node.outputs))
    seen = constants.setdefault(key, [])
    for other in seen:
        earlier = np.ascontiguousarray(graph.nodes[other].value)
        if np.array_equal(earlier.view(np.uint8), value.view(np.uint8)):
            same[node.id] = other
            return
    seen.append(node.id)
