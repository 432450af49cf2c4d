"""Epilogue fusion: a built-in layer whose output goes only to a per-channel bias Add, and then
possibly to a ReLU, computes all three in one kernel (clDNN fuses the same way).

In OpenVINO IR a convolution's bias is a separate Add of a (1, C, 1, 1) constant, usually
followed by ReLU; run apart, the three layers launch three kernels and stream the activation
through memory three times. Fused, the Add and the ReLU become a few instructions where the
convolution stores its result. A layer overridden by a custom layer is never fused: the user's
kernel must run as written.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..graph.graph import Graph, Node


@dataclass
class Epilogue:
    bias: tuple | None = None          # (const node id, port) of the per-channel bias
    relu: bool = False
    absorbed: list[str] = field(default_factory=list)   # ids of the Add / ReLU folded in

    @property
    def label(self) -> str:
        return "+".join((["bias"] if self.bias else []) + (["relu"] if self.relu else []))


def _sole_consumer(graph: Graph, node: Node) -> Node | None:
    users = graph.consumers(node.id, 0)
    if len(users) != 1 or len(node.outputs) != 1:
        return None
    consumer = graph.nodes[users[0][0]]
    return None if consumer.type == "Result" else consumer


def _per_channel_bias(graph: Graph, add: Node, producer_id: str, channels: int):
    """The Add's other input, if it is a constant of `channels` values along axis 1."""
    for port in range(2):
        src, src_port = graph.producer(add.id, port)
        if src == producer_id:
            continue
        const = graph.nodes[src]
        if const.type != "Const" or const.value is None:
            return None
        shape = tuple(np.asarray(const.value).shape)
        out_rank = len(add.outputs[0].shape or ())
        # broadcast to (N, C, ...) with C == channels and every other axis 1
        padded = (1,) * (out_rank - len(shape)) + shape
        if out_rank >= 2 and len(padded) == out_rank and padded[1] == channels and \
                all(d == 1 for i, d in enumerate(padded) if i != 1):
            return (src, src_port)
        return None
    return None


def plan_fusions(graph: Graph, order: list[Node], fusable: set[str], is_custom) -> dict[str, Epilogue]:
    """node id -> Epilogue for every built-in node of a type in `fusable` that can absorb its
    bias Add and/or ReLU."""
    plans: dict[str, Epilogue] = {}
    for node in order:
        if node.type not in fusable or is_custom(node) or not node.outputs:
            continue
        shape = node.outputs[0].shape
        if not shape or len(shape) < 2 or shape[1] is None:
            continue
        ep = Epilogue()
        last = node
        nxt = _sole_consumer(graph, last)
        if nxt is not None and nxt.type == "Add" and not is_custom(nxt) and \
                nxt.attrs.get("auto_broadcast", "numpy") == "numpy":
            bias = _per_channel_bias(graph, nxt, last.id, shape[1])
            if bias is not None:
                ep.bias = bias
                ep.absorbed.append(nxt.id)
                last = nxt
                nxt = _sole_consumer(graph, last)
        if nxt is not None and nxt.type == "ReLU" and not is_custom(nxt) and \
                not nxt.attrs.get("negative_slope"):
            ep.relu = True
            ep.absorbed.append(nxt.id)
        if ep.absorbed:
            plans[node.id] = ep
    return plans
