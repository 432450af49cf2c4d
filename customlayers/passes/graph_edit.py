"""What every graph pass reads and writes a Graph with: who reads a node's output, the value of
a constant input, a node with a fact for its implementation, and a new graph from a few changed
nodes, dropped nodes and rewired edges.

A pass never edits the model's own Graph: it collects its changes and calls `rebuilt_graph`.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..graph.graph import Graph, Node

CONVOLUTIONS = ("Convolution", "GroupConvolution")


def sole_consumer(graph: Graph, node: Node, port: int) -> Node | None:
    """The one node that reads output `port` of `node`, whatever it is (a Result included) and
    however many other outputs `node` has; None when no node or several read it."""
    users = graph.consumers(node.id, port)
    return graph.nodes[users[0][0]] if len(users) == 1 else None


def sole_layer_reading_only_output(graph: Graph, node: Node) -> Node | None:
    """Stricter than `sole_consumer`, for fusing a layer into `node`: `node` has exactly one
    output, one node reads it, and that node is a layer, not a network output (Result), whose
    tensor must still be written. Else None."""
    if len(node.outputs) != 1:
        return None
    consumer = sole_consumer(graph, node, port=0)
    return None if consumer is None or consumer.type == "Result" else consumer


def with_fact(node: Node, fact) -> Node:
    """A copy of `node` that hands its implementation `fact` (Node.facts), in place of a fact of
    the same class it had."""
    kept = tuple(f for f in node.facts if type(f) is not type(fact))
    return replace(node, facts=kept + (fact,))


def const_input(graph: Graph, node: Node, port: int):
    """The value (a numpy array) of input `port` when a Const with a value feeds it; else None."""
    if port >= len(node.inputs):
        return None
    src = graph.nodes[graph.producer(node.id, port)[0]]
    return np.asarray(src.value) if src.type == "Const" and src.value is not None else None


def rebuilt_graph(graph: Graph, changed: dict[str, Node], drop: set[str], redirect,
                  added: tuple[Node, ...] = (), extra_edges: tuple = ()) -> Graph:
    """A new graph: nodes in model order without `drop` and with `changed` replacing theirs,
    then the `added` nodes (new constants a redirect points to), edges rewired by `redirect`
    ((dst, dst_port) -> (src, src_port)), the `extra_edges` ((src, src_port, dst, dst_port):
    inputs a changed node has that the node it replaces had not) added, and the constants that
    nothing reads any more (only dropped nodes, or only edges redirected away) removed too."""
    # what the new graph reads, its edges as rewired: a Const a redirect now points to (a
    # fused layer reading a constant Q) is read though the node it fed is dropped
    used = {redirect.get((e.dst, e.dst_port), (e.src, e.src_port))[0] for e in graph.edges
            if e.dst not in drop} | {e[0] for e in extra_edges}
    dead_consts = {nid for nid, n in graph.nodes.items()
                   if n.type == "Const" and nid not in used}
    new = Graph(graph.name)
    new.value_shapes = graph.value_shapes
    for nid, node in graph.nodes.items():
        if nid not in drop and nid not in dead_consts:
            new.add_node(changed.get(nid, node))
    for node in added:
        new.add_node(node)
    for e in graph.edges:
        if e.dst in drop or e.dst in dead_consts:
            continue
        src = redirect.get((e.dst, e.dst_port), (e.src, e.src_port))
        new.connect(src[0], src[1], e.dst, e.dst_port)
    for src, src_port, dst, dst_port in extra_edges:
        new.connect(src, src_port, dst, dst_port)
    return new
