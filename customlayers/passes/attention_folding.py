"""Scaled dot-product attention as one layer: exporters write it as MatMul(Q, K^T), a Multiply
or Divide by the scale, an Add of the mask, Softmax over the keys and MatMul(., V) (torch's
MultiheadAttention and its scaled_dot_product_attention at opset 14-18, BERT-style
`scores / sqrt(d) + mask`). The five layers become ops/attention/fused.py's FusedAttention,
which never writes the scores: on an H100, ViT-B/16 at batch 32 spent 3.7 ms a run in the three
kernels, most of it writing and reading 197 x 197 scores per head.

Runs after view_folding.py, so the head split before the MatMuls and the merge after are
already views the MatMuls read and write through (OperandViews); the fused layer takes them
over (AttentionViews) and reads Q, K and V where the projections wrote them.

Matched: Softmax over the last axis of f32 scores of rank 3 or 4 (known shape, nothing empty),
whose only reader is a built-in MatMul's A; before it an optional Add whose other input
broadcasts to the scores (the mask, any f32 tensor), before that any Multiplys or Divides by
one finite constant, and first a built-in MatMul whose output it alone reads. Every link is
read by the next alone; head sizes at most fused.MAX_HEAD. Within float rounding: the kernel
computes the same sums with the scale applied to q, and the softmax online (a running max).
"""
from __future__ import annotations

import numpy as np

from ..errors import CustomLayersError, ModelError
from ..graph.graph import Graph, Node
from ..ops import get_op
from ..ops._program import LinearView
from ..ops.attention.fused import MAX_HEAD, AttentionViews, four_d, mask_view
from ..ops.view_steps import OperandViews
from .graph_edit import rebuilt_graph, sole_layer_reading_only_output
from .view_folding import data_port, scale_factor

_F32_MAX = float(np.finfo(np.float32).max)


def fold_attention(graph: Graph, is_builtin) -> tuple[Graph, list[str]]:
    """(the rewritten graph, one note per attention); the graph itself when nothing folds."""
    changed, drop, redirect, extra, notes = {}, set(), {}, [], []
    for softmax in list(graph):
        if softmax.type != "SoftMax" or not is_builtin(softmax) or softmax.id in drop:
            continue
        try:
            found = _match(graph, softmax, is_builtin)
        except (CustomLayersError, ModelError):
            found = None                # an unconnected or malformed layer reports itself
        if found is None:
            continue
        node, absorbed, sources, mask_source = found
        if any(n.id in drop or n.id in changed for n in absorbed) or node.id in drop:
            # chains that share a layer (one attention's P V is the next one's scores): the
            # first folds, the other stays as layers reading its result
            continue
        changed[node.id] = node
        q_src, k_src, v_src = sources
        redirect[(node.id, 0)] = q_src
        redirect[(node.id, 1)] = k_src
        extra.append((*v_src, node.id, 2))
        if mask_source is not None:
            extra.append((*mask_source, node.id, 3))
        drop.update(n.id for n in absorbed)
        names = ", ".join(f"{n.type} '{n.name}'" for n in reversed(absorbed))
        notes.append(f"folded {names} and MatMul '{node.name}' into one FusedAttention layer")
    if not changed:
        return graph, []
    return rebuilt_graph(graph, changed, drop, redirect, extra_edges=tuple(extra)), notes


def _match(graph: Graph, softmax: Node, is_builtin):
    """(the FusedAttention node replacing the second MatMul, the layers it absorbs, the
    (producer, port) of Q, K and V, the mask's or None) where `softmax` ends an attention;
    else None."""
    scores = _known(softmax.outputs[0]) if len(softmax.outputs) == 1 else None
    if scores is None or len(scores) not in (3, 4) or 0 in scores or \
            len(softmax.inputs) != 1 or \
            get_op("SoftMax").parse_attributes(softmax.attrs, softmax.name)["axis"] \
            not in (-1, len(scores) - 1):
        return None
    values = sole_layer_reading_only_output(graph, softmax)
    if values is None or graph.consumers(softmax.id, 0)[0][1] != 0 or \
            not _plain_matmul(values, is_builtin):
        return None
    for mask, chain in _score_chains(graph, softmax, scores, is_builtin):
        found = _fused(graph, values, scores, mask, chain)
        if found is not None:
            return found
    return None


def _score_chains(graph: Graph, softmax: Node, scores: tuple, is_builtin):
    """The ways back from the Softmax to a first MatMul: (the mask Add's port of the mask or
    None, the layers in order from the Softmax to the MatMul) for each reading of an Add
    before it as scores + mask (both inputs may have the scores' shape)."""
    node = graph.nodes[graph.producer(softmax.id, 0)[0]]
    starts = [(None, [softmax], node)]
    if node.type == "Add" and is_builtin(node) and len(node.inputs) == 2 and \
            node.attrs.get("auto_broadcast", "numpy") == "numpy" and \
            _read_only_by(graph, node, softmax):
        starts = [(port, [softmax, node], graph.nodes[graph.producer(node.id, 1 - port)[0]])
                  for port in (1, 0) if _is_mask(node, port, scores)]
    for mask, chain, node in starts:
        chain = list(chain)
        while node.type in ("Multiply", "Divide") and is_builtin(node):
            step = _scale_step(graph, node)
            if step is None or not _read_only_by(graph, node, chain[-1]):
                break
            chain.append(node)
            node = graph.nodes[graph.producer(node.id, step[0])[0]]
        if _plain_matmul(node, is_builtin) and _read_only_by(graph, node, chain[-1]):
            yield mask, chain + [node]


def _fused(graph: Graph, values: Node, scores: tuple, mask, chain):
    """_match's result for one chain of score layers; None where it does not fit."""
    absorbed, first = chain, chain[-1]
    factor = 1.0
    for node in chain[1:-1]:
        if node.type != "Add":
            factor *= _scale_step(graph, node)[1]
    f1, f2 = _views(first), _views(values)
    if f1.out is not None or f2.views[0] is not None:
        return None
    q = _operand(f1.views[0], first.inputs[0], transposed=_attr(first, "transpose_a"))
    kt = _operand(f1.views[1], first.inputs[1], transposed=_attr(first, "transpose_b"))
    v = _operand(f2.views[1], values.inputs[1], transposed=_attr(values, "transpose_b"))
    if q is None or kt is None or v is None or _attr(values, "transpose_a"):
        return None
    k = kt.transpose((0, 1, 3, 2))
    b1, b2, s, d = q.shape
    t, dv = k.shape[2], v.shape[3]
    if k.shape[3] != d or v.shape[2] != t or not (0 < d <= MAX_HEAD and 0 < dv <= MAX_HEAD) or \
            (b1, b2, s, t) != _four_shape(scores):
        return None
    batch = (b1, b2)
    if any(view.shape[:2] != batch for view in (k, v)):
        return None                     # (a broadcast batch: the MatMuls keep it)
    out_shape = _known(values.outputs[0])
    out = f2.out.linear() if f2.out is not None else \
        LinearView.dense(out_shape) if out_shape is not None else None
    if out is None or len(out.shape) > 4:
        return None
    out = four_d(out)
    if out.shape != (b1, b2, s, dv):
        return None
    scale = f1.scale * factor
    if not abs(scale) <= _F32_MAX or not abs(f2.scale) <= _F32_MAX:
        return None
    inputs = [first.inputs[0], first.inputs[1], values.inputs[1]]
    if any(p.dtype not in (None, "f32") for p in inputs):
        return None
    sources = [graph.producer(first.id, 0), graph.producer(first.id, 1),
               graph.producer(values.id, 1)]
    mask_source = None
    if mask is not None:
        add = chain[1]
        inputs.append(add.inputs[mask])
        mask_source = graph.producer(add.id, mask)
    views = AttentionViews(q, k, v, out, tuple(out_shape),
                           tuple(tuple(p.shape) for p in inputs[:3]))
    node = Node(id=values.id, name=values.name, type="FusedAttention",
                attrs={"scale": repr(float(scale)), "out_scale": repr(float(f2.scale)),
                       "has_mask": "true" if mask is not None else "false"},
                inputs=list(inputs), outputs=list(values.outputs), location=values.location,
                facts=(views,))
    return node, absorbed, sources, mask_source


def _known(port) -> tuple | None:
    shape = port.shape
    if shape is None or any(not isinstance(x, int) or x < 0 for x in shape) or \
            port.dtype not in (None, "f32"):
        return None
    return tuple(shape)


def _plain_matmul(node: Node, is_builtin) -> bool:
    return node.type == "MatMul" and is_builtin(node) and len(node.inputs) == 2 and \
        len(node.outputs) == 1 and not any(not isinstance(f, OperandViews) for f in node.facts)


def _attr(node: Node, name: str) -> bool:
    return bool(get_op("MatMul").parse_attributes(node.attrs, node.name)[name])


def _views(node: Node) -> OperandViews:
    fact = next((f for f in node.facts if isinstance(f, OperandViews)), None)
    return fact if fact is not None else OperandViews()


def _read_only_by(graph: Graph, node: Node, reader: Node) -> bool:
    nxt = sole_layer_reading_only_output(graph, node)
    return nxt is not None and nxt.id == reader.id


def _operand(view, port, transposed: bool) -> LinearView | None:
    """The operand as the MatMul multiplies it, 4-D: its folded view or its input, dense."""
    if view is not None:
        linear = view.linear()
    else:
        shape = _known(port)
        linear = LinearView.dense(shape) if shape is not None else None
    if linear is None or not 2 <= len(linear.shape) <= 4:
        return None
    linear = four_d(linear)
    return linear.transpose((0, 1, 3, 2)) if transposed else linear


def _four_shape(shape: tuple) -> tuple:
    return (1,) * (4 - len(shape)) + tuple(shape)


def _is_mask(add: Node, port: int, scores: tuple) -> bool:
    """Whether input `port` of the Add can be the mask: f32, broadcasting to the scores, which
    the other input is."""
    mask, other = _known(add.inputs[port]), _known(add.inputs[1 - port])
    if mask is None or other != scores or add.inputs[port].dtype != "f32" or \
            len(mask) > len(scores):
        return False
    return mask_view(mask, _four_shape(scores)) is not None


def _scale_step(graph: Graph, node: Node) -> tuple[int, float] | None:
    """(the data input's port, the factor) of a Multiply or Divide by one finite, nonzero f32
    constant of no more axes than the data (view_folding's scale steps); None otherwise."""
    data = data_port(graph, node) if len(node.inputs) == 2 else None
    if data is None or node.inputs[data].shape is None:
        return None
    c = scale_factor(graph, node, len(node.inputs[data].shape))
    return None if c is None or c == 0.0 else (data, c)
