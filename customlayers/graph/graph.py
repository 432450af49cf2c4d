"""Graph: a model as read from a file (OpenVINO IR or ONNX), before it is compiled.

Readers produce this; the network compiler (runtime/compile/network.py) consumes it. Op types use
OpenVINO IR's spelling (Convolution, ReLU, SoftMax, ...) so that a CustomLayer named after an IR
type overrides it. A node's attributes are kept as the text written in the model: they feed
Define params, which must see the text exactly (SPEC §3).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from ..errors import ModelError

Shape = tuple  # of int (a static dim) or None (unknown / symbolic)


@dataclass
class Port:
    shape: Shape                  # as declared in the model; None entries = unknown
    dtype: str                    # short name, see dtypes.py ("f32", "i64", ...)
    names: tuple[str, ...] = ()   # tensor names (IR port names / ONNX value names)


@dataclass
class Node:
    id: str                       # unique within the graph (IR layer id, ONNX node index/name)
    name: str                     # the layer's name, for messages
    type: str                     # op type, IR spelling
    attrs: dict[str, str] = field(default_factory=dict)   # attribute text as written
    inputs: list[Port] = field(default_factory=list)      # by input port index
    outputs: list[Port] = field(default_factory=list)     # by output port index
    version: str = ""             # opset ("opset1") or ONNX domain:version
    domain: str = ""              # ONNX domain ("" = standard); "" for IR
    value: np.ndarray | None = None   # Const nodes: the constant's value
    location: str = ""            # "model.xml:123" for messages
    # typed facts graph passes (passes/) learned about the node for its implementation (frozen
    # dataclasses the op defines, such as ops/nn/conv.py's InputShuffle): never attribute text,
    # which is the model's; the compiler hands them over in CompileContext.facts
    facts: tuple = ()

    def describe(self) -> str:
        where = f" at {self.location}" if self.location else ""
        return f"layer '{self.name}' (type {self.type}){where}"


@dataclass(frozen=True)
class Edge:
    src: str          # producer node id
    src_port: int     # producer output port index
    dst: str          # consumer node id
    dst_port: int     # consumer input port index


class Graph:
    """Nodes in model order plus edges. Parameter nodes are the inputs, Result nodes the outputs
    (a Result has one input and no outputs)."""

    def __init__(self, name: str = "model"):
        self.name = name
        self.nodes: dict[str, Node] = {}
        self.edges: list[Edge] = []
        self._producer: dict[tuple[str, int], tuple[str, int]] = {}
        # (node id, output port) -> its consumers in edge order: the rewrites before compiling
        # ask for every node's consumers (a scan of the edges each took 40 ms of ResNet-50's load)
        self._consumers: dict[tuple[str, int], list[tuple[str, int]]] = {}
        # input shapes -> {value name: its dims} for the values of the model the graph was read
        # from (graph/onnx/deferred.py: ONNX shape inference again), or None: what the
        # shape-folding pass asks where a symbolic dim of the model has no name
        self.value_shapes = None

    # -- building --------------------------------------------------------------------------
    def add_node(self, node: Node) -> Node:
        if node.id in self.nodes:
            raise ModelError(f"two layers have the id '{node.id}' ({self.nodes[node.id].name} and "
                             f"{node.name})")
        self.nodes[node.id] = node
        return node

    def connect(self, src: str, src_port: int, dst: str, dst_port: int) -> None:
        for nid in (src, dst):
            if nid not in self.nodes:
                raise ModelError(f"an edge refers to layer id '{nid}', which does not exist")
        s, d = self.nodes[src], self.nodes[dst]
        if not 0 <= src_port < len(s.outputs):
            raise ModelError(f"an edge leaves output port {src_port} of {s.describe()}, which has "
                             f"{len(s.outputs)} output port(s)")
        if not 0 <= dst_port < len(d.inputs):
            raise ModelError(f"an edge enters input port {dst_port} of {d.describe()}, which has "
                             f"{len(d.inputs)} input port(s)")
        if (dst, dst_port) in self._producer:
            raise ModelError(f"input port {dst_port} of {d.describe()} has two producers")
        self.edges.append(Edge(src, src_port, dst, dst_port))
        self._producer[(dst, dst_port)] = (src, src_port)
        self._consumers.setdefault((src, src_port), []).append((dst, dst_port))

    # -- queries ---------------------------------------------------------------------------
    def producer(self, node_id: str, port: int) -> tuple[str, int]:
        """(node id, output port) feeding input `port` of `node_id`."""
        try:
            return self._producer[(node_id, port)]
        except KeyError:
            raise ModelError(f"input port {port} of {self.nodes[node_id].describe()} is not "
                             f"connected") from None

    def consumers(self, node_id: str, port: int) -> list[tuple[str, int]]:
        return list(self._consumers.get((node_id, port), ()))

    @property
    def parameters(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.type == "Parameter"]

    @property
    def results(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.type == "Result"]

    def topological_order(self) -> list[Node]:
        """Nodes so that each comes after its producers; ModelError naming a layer on a cycle."""
        indegree = {nid: 0 for nid in self.nodes}
        succ: dict[str, list[str]] = {nid: [] for nid in self.nodes}
        for e in self.edges:
            indegree[e.dst] += 1
            succ[e.src].append(e.dst)
        ready = [nid for nid, d in indegree.items() if d == 0]
        order: list[str] = []
        while ready:
            nid = ready.pop(0)
            order.append(nid)
            for nxt in succ[nid]:
                indegree[nxt] -= 1
                if indegree[nxt] == 0:
                    ready.append(nxt)
        if len(order) != len(self.nodes):
            stuck = [self.nodes[n] for n, d in indegree.items() if d > 0]
            names = ", ".join(f"'{n.name}'" for n in stuck[:5])
            raise ModelError(f"the model has a cycle through {names}"
                             f"{' and others' if len(stuck) > 5 else ''}")
        return [self.nodes[n] for n in order]

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes.values())

    def __len__(self) -> int:
        return len(self.nodes)
