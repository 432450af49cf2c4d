"""A channel shuffle that only feeds a depthwise convolution becomes the order in which that
convolution reads its input channels: one launch and one full copy of the tensor fewer per
ShuffleNet unit (on PoCL, 15 launches of about 0.1 ms each in ShuffleNet v1).

A shuffle is either a ShuffleChannels of axis 1 (OpenVINO IR) or the pattern ONNX exporters
write for it: Reshape [N, C, H, W] -> [N, g, C/g, H, W], Transpose (0, 2, 1, 3, 4), Reshape back
to [N, C, H, W]. It folds when each of its nodes is a built-in and the sole consumer of the one
before, and its last node's sole consumer is a built-in (Group)Convolution that says it takes
a shuffled input (ops/nn/conv.py's takes_shuffled_input: the kernels that run it read input
channel c from plane IN_CHANNEL(c)); the convolution receives the fact conv.InputShuffle.
The rewrite is exact: the same values reach the same
multiply-adds; only where they are read from changes.
"""
from __future__ import annotations

from ..graph.graph import Graph, Node
from ..ops.nn.conv import InputShuffle, takes_shuffled_input
from .graph_edit import const_input, rebuilt_graph, sole_consumer, with_fact


def fold_channel_shuffles(graph: Graph, is_builtin) -> tuple[Graph, list[str]]:
    """(the rewritten graph, one note per fold); the graph itself when nothing folds.
    `is_builtin(node)`: the node runs its type's built-in."""
    convs: dict[str, Node] = {}
    drop: set[str] = set()
    redirect: dict[tuple[str, int], tuple[str, int]] = {}
    notes: list[str] = []
    for node in list(graph):
        found = _shuffle_chain(graph, node, is_builtin)
        if found is None:
            continue
        chain, group = found
        conv = sole_consumer(graph, chain[-1], port=0)
        if conv is None or conv.id in convs or len(conv.inputs) < 2 or \
                not takes_shuffled_input(conv.type, conv.inputs[0].shape, conv.inputs[1].shape,
                                         group) or \
                not is_builtin(conv) or graph.producer(conv.id, 0) != (chain[-1].id, 0):
            continue
        convs[conv.id] = with_fact(conv, InputShuffle(group))
        drop.update(n.id for n in chain)
        redirect[(conv.id, 0)] = graph.producer(chain[0].id, 0)
        names = "', '".join(n.name for n in chain)
        notes.append(f"folded the channel shuffle '{names}' into the input of '{conv.name}'")
    if not drop:
        return graph, []
    return rebuilt_graph(graph, convs, drop, redirect), notes


def _shuffle_chain(graph: Graph, node: Node, is_builtin) -> tuple[list[Node], int] | None:
    """([the shuffle's nodes], its group) when a channel shuffle of a 4-D tensor starts at
    `node`; else None."""
    if not is_builtin(node) or not node.inputs or len(node.inputs[0].shape or ()) != 4:
        return None
    shape = tuple(node.inputs[0].shape)
    if any(not isinstance(d, int) for d in shape):
        return None
    if node.type == "ShuffleChannels":
        axis, group = int(node.attrs.get("axis", "1")), int(node.attrs.get("group", "1"))
        if axis not in (1, -3) or group < 2 or shape[1] % group:
            return None
        return [node], group
    if node.type != "Reshape":
        return None
    split = tuple(node.outputs[0].shape or ())
    if len(split) != 5 or split[:1] + split[3:] != shape[:1] + shape[2:] or \
            not all(isinstance(d, int) for d in split) or split[1] * split[2] != shape[1] or \
            split[1] < 2:
        return None
    transpose = sole_consumer(graph, node, port=0)
    if transpose is None or transpose.type != "Transpose" or not is_builtin(transpose) or \
            graph.producer(transpose.id, 0) != (node.id, 0) or \
            _order(graph, transpose) != (0, 2, 1, 3, 4):
        return None
    merge = sole_consumer(graph, transpose, port=0)
    if merge is None or merge.type != "Reshape" or not is_builtin(merge) or \
            graph.producer(merge.id, 0) != (transpose.id, 0) or \
            tuple(merge.outputs[0].shape or ()) != shape:
        return None
    return [node, transpose, merge], split[1]


def _order(graph: Graph, transpose: Node) -> tuple[int, ...] | None:
    value = const_input(graph, transpose, 1)
    if value is not None:
        return tuple(int(v) for v in value.reshape(-1))
    text = transpose.attrs.get("perm") or transpose.attrs.get("order")
    return tuple(int(v) for v in text.split(",")) if text else None
