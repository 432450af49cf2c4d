"""Outputs nobody reads are not computed: a MaxPool-8 whose index output (port 1) has no
consumer becomes a MaxPool with one output. Every MaxPool of an IR converted by OpenVINO has
that second output, and the models read it rarely; writing a 64-bit index per output costs
more than the pooling itself on a CPU, and keeps pool_cpu.cl from pooling 8 outputs at a time.
Only built-ins are rewritten, and only outputs with no consumer at all (a network output has
one: its Result).
"""
from __future__ import annotations

from dataclasses import replace

from ..graph.graph import Graph
from .graph_edit import rebuilt_graph


def drop_unused_pool_indices(graph: Graph, is_builtin) -> tuple[Graph, list[str]]:
    """(the rewritten graph, one note per MaxPool changed); the graph itself when none is."""
    changed = {}
    for node in graph:
        if node.type != "MaxPool" or len(node.outputs) != 2 or not is_builtin(node) or \
                graph.consumers(node.id, 1):
            continue
        attrs = {k: v for k, v in node.attrs.items() if k != "index_element_type"}
        changed[node.id] = replace(node, attrs=attrs, outputs=node.outputs[:1])
    if not changed:
        return graph, []
    return rebuilt_graph(graph, changed, set(), {}), [
        f"MaxPool '{graph.nodes[nid].name}': its index output is read by no layer and is not "
        f"computed" for nid in changed]
