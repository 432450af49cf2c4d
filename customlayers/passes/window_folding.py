"""Fewer launches around convolutions, by changing only the convolution's padding:

- a zero Pad of the spatial axes whose only consumer is a convolution becomes part of the
  convolution's pads_begin/pads_end (the convolution reads the Pad's input);
- a causal slice after a 1-D convolution (the TCN's "chomp": padding (k-1)*d on both sides, then
  the extra right part cut off with a Slice of axis 2 from 0) becomes a smaller pads_end, so the
  convolution writes only what the slice kept.

Both are exact: the same multiply-adds in the same order, only the windows' zero padding and the
output extent change. The graph is rewritten before anything is compiled (a new Graph; the
model's own is left as it is). Only built-ins are folded: a node that a custom layer implements
runs as written.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..graph.graph import Graph, Node
from .graph_edit import CONVOLUTIONS, const_input, rebuilt_graph, sole_consumer


def fold_into_convolutions(graph: Graph, is_builtin) -> tuple[Graph, list[str]]:
    """(the rewritten graph, one note per fold); the graph itself when nothing folds.
    `is_builtin(node)`: the node runs its type's built-in."""
    convs: dict[str, Node] = {}           # rewritten convolutions by id
    drop: set[str] = set()
    redirect: dict[tuple[str, int], tuple[str, int]] = {}
    notes: list[str] = []
    for node in list(graph):
        if node.type != "Pad" or not is_builtin(node):
            continue
        conv = sole_consumer(graph, node, port=0)
        if conv is None or conv.type not in CONVOLUTIONS or not is_builtin(conv) or \
                graph.producer(conv.id, 0)[0] != node.id:
            continue
        pads = _spatial_pads(graph, node)
        current = convs.get(conv.id, conv)
        if pads is None or _auto_pad(current) not in ("explicit", "notset"):
            continue
        begin, end = pads
        attrs = dict(current.attrs, auto_pad="explicit",
                     pads_begin=_add(current.attrs.get("pads_begin"), begin),
                     pads_end=_add(current.attrs.get("pads_end"), end))
        convs[conv.id] = replace(current, attrs=attrs,
                                 inputs=[node.inputs[0]] + current.inputs[1:])
        drop.add(node.id)
        redirect[(conv.id, 0)] = graph.producer(node.id, 0)
        notes.append(f"folded Pad '{node.name}' into the padding of '{conv.name}'")
    for node in list(graph):
        if node.type != "Slice" or not is_builtin(node):
            continue
        found = _conv_before(graph, node, is_builtin)
        if found is None:
            continue
        conv, chain = found
        current = convs.get(conv.id, conv)
        cut = _causal_cut(graph, node, current)
        if cut is None:
            continue
        pads_end = [int(v) for v in current.attrs["pads_end"].split(",")]
        pads_end[-1] -= cut
        kept = node.outputs[0].shape
        convs[conv.id] = replace(current, attrs=dict(current.attrs, pads_end=_text(pads_end)),
                                 outputs=[replace(current.outputs[0], shape=kept)])
        # the per-channel layers between keep working on the shorter tensor
        for member, data_port in chain:
            inputs = list(member.inputs)
            inputs[data_port] = replace(inputs[data_port], shape=kept)
            convs[member.id] = replace(member, inputs=inputs,
                                       outputs=[replace(member.outputs[0], shape=kept)])
        last = chain[-1][0] if chain else conv
        named = convs[last.id]
        convs[last.id] = replace(named, outputs=[replace(
            named.outputs[0],
            names=tuple(dict.fromkeys(node.outputs[0].names + named.outputs[0].names)))])
        drop.add(node.id)
        for dst, dst_port in graph.consumers(node.id, 0):
            redirect[(dst, dst_port)] = (last.id, 0)
        notes.append(f"folded the causal Slice '{node.name}' into the padding of '{conv.name}'")
    if not drop:
        return graph, []
    return rebuilt_graph(graph, convs, drop, redirect), notes


def _conv_before(graph: Graph, sl: Node, is_builtin):
    """(convolution, [(layer, data port)...]) when the Slice reads a convolution through only
    per-channel layers (a bias Add or Multiply of a constant, a ReLU), each the sole consumer of
    the one before: slicing along the length commutes with them."""
    chain: list[tuple[Node, int]] = []
    node, data_port = sl, 0
    while True:
        src, port = graph.producer(node.id, data_port)
        prev = graph.nodes[src]
        if port != 0 or sole_consumer(graph, prev, port=0) is not node or not is_builtin(prev):
            return None
        if prev.type in CONVOLUTIONS:
            return prev, chain
        if prev.type == "ReLU":
            data_port = 0
        elif prev.type in ("Add", "Multiply") and len(prev.inputs) == 2:
            data = [p for p in range(2) if _length_free_const(graph, prev, 1 - p)]
            if not data:
                return None
            data_port = data[0]
        else:
            return None
        chain.insert(0, (prev, data_port))
        node = prev


def _length_free_const(graph: Graph, node: Node, port: int) -> bool:
    """Input `port` is a constant that is the same all along the last axis."""
    value = const_input(graph, node, port)
    return value is not None and (value.ndim < 1 or value.shape[-1] == 1)


def _auto_pad(node: Node) -> str:
    return (node.attrs.get("auto_pad") or "explicit").lower()


def _spatial_pads(graph: Graph, pad: Node):
    """(begin, end) spatial pads of a zero constant Pad of axes 2.. only; else None."""
    if (pad.attrs.get("pad_mode") or "constant").lower() != "constant":
        return None
    begin, end = const_input(graph, pad, 1), const_input(graph, pad, 2)
    if begin is None or end is None or begin.size != end.size or begin.size < 3:
        return None
    if len(pad.inputs) > 3:
        value = const_input(graph, pad, 3)
        if value is None or value.size != 1 or float(value.reshape(-1)[0]) != 0.0:
            return None
    begin, end = [int(v) for v in begin.reshape(-1)], [int(v) for v in end.reshape(-1)]
    if any(begin[:2]) or any(end[:2]) or min(begin + end) < 0:
        return None
    return begin[2:], end[2:]


def _causal_cut(graph: Graph, sl: Node, conv: Node) -> int | None:
    """How many elements a Slice keeps off the end of a 1-D stride-1 convolution's output when
    it keeps [0, L - cut) of axis 2 and nothing else changes, and pads_end covers the cut."""
    out = conv.outputs[0].shape
    if not out or len(out) != 3 or _auto_pad(conv) not in ("explicit", "notset"):
        return None
    if (conv.attrs.get("strides") or "1").replace(" ", "") != "1":
        return None
    values = [const_input(graph, sl, i) for i in range(1, 5)]
    if any(v is None for v in values) or len(sl.inputs) != 5:
        return None
    start, stop, step, axes = (v.reshape(-1).astype(np.int64) for v in values)
    if len(axes) != 1 or int(axes[0]) not in (2, -1) or int(start[0]) != 0 or int(step[0]) != 1:
        return None
    length = out[2]
    stop = int(stop[0])
    if stop >= 0:        # counted from the start: the cut would depend on the length the model
        return None      # declares, which Network(input_shapes=...) may change
    cut = -stop
    pads_end = [int(v) for v in (conv.attrs.get("pads_end") or "0").split(",")]
    # a length the model leaves open (torch's export with a dynamic T): the cut is the same
    # for every length, as the convolution with the smaller padding computes it
    if not 0 < cut <= pads_end[-1] or (length is not None and length + stop < 1):
        return None
    return cut


def _add(text: str | None, extra: list[int]) -> str:
    values = [int(v) for v in (text or "").split(",") if v.strip()] or [0] * len(extra)
    return _text([a + b for a, b in zip(values, extra)])


def _text(values) -> str:
    return ",".join(str(int(v)) for v in values)
