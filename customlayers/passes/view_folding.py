"""Layers that only re-index a MatMul's input become part of the MatMul's reads.

Exporters split a transformer's attention heads with chains of Reshape, Transpose, Squeeze,
Unsqueeze and Gathers of one index (torch's MultiheadAttention: eight of them between the QKV
projection and the two attention MatMuls, plus a Multiply of Q and K by the square root of the
scale each), and each Transpose or Gather is a kernel that copies the tensor once more. The
MatMul can read its operand where the chain's first tensor already holds it: the chain is
composed into one strided view (ops/view_steps.py's ComposedView), the MatMul gets the fact
ops/nn/matmul.py's OperandViews and reads that tensor, and the chain's layers that nobody else
reads are dropped. Multiplys (and Divides) by one constant value on the way become a factor of
the product (MATMUL_ALPHA), where it is a finite float32 (an infinite one is not: x * inf
summed is NaN where the sum times inf is not).

Exact but for the scale: the MatMul reads the values the chain would have copied and sums them
in the same order; a folded factor multiplies the sum once instead of each operand (fp32
rounding of one product). Folded only where the composed view keeps one of the operand's two
matrix axes contiguous (so the GEMM's tile loads stay coalesced), where A's batches still fold
into its rows when B has no batch (a transformer's projections keep their one large GEMM), and
where every shape on the way is known. A constant's chain is left alone (constant folding and
the MatMul's packed weights take it).
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..errors import CustomLayersError, ModelError
from ..graph.graph import Graph, Node
from ..ops import get_op
from ..ops.nn.matmul import PickLast
from ..ops.view_steps import ComposedView, GemmLayout, OperandViews, dense_view
from .graph_edit import const_input, rebuilt_graph, with_fact

_RESHAPES = ("Reshape", "Squeeze", "Unsqueeze")
_SCALES = ("Multiply", "Divide")
_STEPS = _RESHAPES + _SCALES + ("Transpose", "Gather")
_F32_MAX = float(np.finfo(np.float32).max)


def fold_views_into_matmuls(graph: Graph, is_builtin) -> tuple[Graph, list[str]]:
    """(the rewritten graph, one note per folded operand); the graph itself when nothing
    folds."""
    changed: dict[str, Node] = {}
    redirect: dict[tuple[str, int], tuple[str, int]] = {}
    folded: set[str] = set()
    # the layers folded into where a MatMul stores: a reader of their result reads the stored
    # tensor itself (a single head's split keeps the last axis, so the projection stores
    # through it and the attention MatMul after it could also read through it: not both)
    stored: set[str] = set()
    notes: list[str] = []
    for node in list(graph):
        if node.type != "MatMul" or not is_builtin(node) or len(node.inputs) != 2 or \
                not all(_connected(graph, node, p) for p in (0, 1)) or \
                any(isinstance(f, PickLast) for f in node.facts):
            continue                    # a MatMul of the wrong arity reports itself
        attrs = _matmul_attrs(node)
        if attrs is None:
            continue
        fact = next((f for f in node.facts if isinstance(f, OperandViews)), None)
        views = list(fact.views) if fact else [None, None]
        sources = list(fact.sources) if fact else [None, None]
        scale = fact.scale if fact else 1.0
        inputs = list(node.inputs)
        # the operands' shapes as the MatMul reads them: an earlier run's views (Network runs
        # the passes again per set of input shapes), else its inputs'
        read = [tuple(v.shape) if v is not None else
                tuple(p.shape) if p.shape is not None else None
                for v, p in zip(views, node.inputs[:2])]
        for port in (0, 1):
            if views[port] is not None:
                continue
            try:
                found = _composed(graph, node, port, is_builtin, stored)
            except ModelError:          # an unconnected input on the way: its layer says so
                found = None
            if found is None:
                continue
            root, root_shape, chain, view, factor = found
            if not _readable(view, port, attrs, read[1]) or not abs(scale * factor) <= _F32_MAX:
                continue                # (factors whose product overflows float32 stay apart)
            views[port], sources[port] = view, root_shape
            scale *= factor
            inputs[port] = replace(inputs[port], shape=tuple(root_shape))
            redirect[(node.id, port)] = root
            folded.update(n.id for n in chain)
            names = ", ".join(f"{n.type} '{n.name}'" for n in chain)
            notes.append(f"folded {names} into the reads of MatMul '{node.name}' "
                         f"(input {port})")
        out, out_shape = (fact.out, fact.out_shape) if fact else (None, None)
        outputs = list(node.outputs)
        if out is None:
            try:
                found = _output_chain(graph, node, attrs, is_builtin, read)
            except ModelError:
                found = None
            if found is not None and not any(n.id in folded for n in found[0]):
                chain, out, out_shape, bias = found
                outputs[0] = replace(outputs[0], shape=tuple(out_shape))
                last = (node.id, 0)
                if bias is not None:        # the bias Add now reads the folded output
                    changed[bias.id] = replace(
                        bias, inputs=[replace(p, shape=tuple(out_shape)) if p.shape is not None
                                      and len(p.shape) > 1 else p for p in bias.inputs],
                        outputs=[replace(bias.outputs[0], shape=tuple(out_shape))])
                    redirect[(chain[0].id, 0)] = (node.id, 0)
                    last = (bias.id, 0)
                for reader in graph.consumers(chain[-1].id, 0):
                    redirect[reader] = last
                folded.update(n.id for n in chain)
                stored.update(n.id for n in chain)
                names = ", ".join(f"{n.type} '{n.name}'" for n in chain)
                notes.append(f"folded {names} into where MatMul '{node.name}' stores")
        if views != (list(fact.views) if fact else [None, None]) or \
                out is not (fact.out if fact else None):
            new = replace(node, inputs=inputs, outputs=outputs)
            changed[node.id] = with_fact(new, OperandViews(tuple(views), tuple(sources), scale,
                                                           out, out_shape))
    if not changed:
        return graph, []
    return rebuilt_graph(graph, changed, _unread(graph, folded, redirect), redirect), notes


def _connected(graph: Graph, node: Node, port: int) -> bool:
    try:
        graph.producer(node.id, port)
    except ModelError:
        return False
    return True


def _matmul_attrs(node: Node) -> dict | None:
    try:
        return get_op("MatMul").parse_attributes(node.attrs, node.name)
    except CustomLayersError:
        return None                     # the layer reports its own attributes


def _composed(graph: Graph, matmul: Node, port: int, is_builtin, stored=frozenset()):
    """(root (node id, port), its shape, the chain's nodes in order, the operand's view of the
    root, the chain's factor) for the longest foldable chain that ends at input `port`; None
    where there is none, or where the chain reaches into the layers `stored` (folded into
    where a MatMul stores: the input is then that MatMul's result as it stores it, and a view
    composed over the layers would read it as it was before them)."""
    chain: list[Node] = []
    src = graph.producer(matmul.id, port)
    while True:
        node = graph.nodes[src[0]]
        if node.id in stored:
            return None
        if src[1] != 0 or node.type not in _STEPS or not is_builtin(node) or \
                len(node.outputs) != 1:
            break
        data = data_port(graph, node)
        if data is None:
            break
        chain.append(node)
        src = graph.producer(node.id, data)
    chain.reverse()
    if not chain or graph.nodes[src[0]].type == "Const":
        return None
    # the longest tail of the chain whose first input has a known shape and composes
    for start, first in enumerate(chain):
        root = src if start == 0 else (chain[start - 1].id, 0)
        shape = first.inputs[data_port(graph, first)].shape
        if shape is None or any(not isinstance(d, int) or d < 0 for d in shape):
            continue
        composed = _compose(graph, chain[start:], tuple(shape))
        if composed is not None:
            view, factor = composed
            expected = matmul.inputs[port].shape
            if expected is not None and tuple(expected) != tuple(view.shape):
                return None
            return root, tuple(shape), chain[start:], view, factor
    return None


def _output_chain(graph: Graph, matmul: Node, attrs: dict, is_builtin, read: list):
    """(the layers after the MatMul that only re-index its output, the view of its output in
    their result, that result's shape) for the longest such chain with a Transpose whose
    result the MatMul can write directly: its last axis the MatMul's columns, contiguous. None
    where there is none. `read`: the operands' shapes as the MatMul reads them."""
    shape = matmul.outputs[0].shape
    a, b = read
    if shape is None or a is None or b is None or len(a) < 2 or len(b) < 2 or \
            any(not isinstance(d, int) for d in shape):
        return None
    chain, shapes, cur = [], [tuple(shape)], matmul
    bias = _bias_add(graph, matmul, shape[-1], is_builtin)
    if bias is not None:                # a Linear's bias between: it moves after the views
        cur = bias
    while True:
        readers = graph.consumers(cur.id, 0)
        if len(readers) != 1 or readers[0][1] != 0:
            break
        node = graph.nodes[readers[0][0]]
        if node.type not in ("Transpose",) + _RESHAPES or not is_builtin(node) or \
                len(node.outputs) != 1 or data_port(graph, node) != 0:
            break
        after = _stepped_shape(graph, node, shapes[-1])
        if after is None:
            break
        chain.append(node)
        shapes.append(after)
        cur = node
    # one GEMM whose rows may land in two levels: A's batches folded into its rows (MatMul's
    # own rule, which a B of batch 1 meets too), or no batch
    fold_rows = GemmLayout.rows_folded(tuple(a), tuple(b), attrs["transpose_a"]) or \
        (len(a) == 2 and len(b) == 2)
    for end in range(len(chain), 0, -1):
        if not any(n.type == "Transpose" for n in chain[:end]) or len(shapes[end]) < 3 or \
                shapes[end][-1] != shape[-1] or \
                any(graph.nodes[dst].type == "Result" for dst, _ in
                    graph.consumers(chain[end - 1].id, 0)):
            continue
        view = dense_view(shapes[end])
        for node, before in zip(reversed(chain[:end]), reversed(shapes[:end])):
            if node.type == "Transpose":
                order = _order(graph, node, len(before))
                view = view.transpose([order.index(k) for k in range(len(order))])
            else:
                view = view.reshape(before)
                if view is None:
                    break
        if view is None:
            continue
        if fold_rows:
            if GemmLayout.split_rows(view, math.prod(shape[:-1]), shape[-1]) is None:
                continue
        else:
            linear = view.linear()
            if linear is None or len(shape) > 4 or linear.strides[-1] != 1:
                continue
        return chain[:end], view, shapes[end], bias
    return None


def _bias_add(graph: Graph, matmul: Node, columns: int, is_builtin) -> Node | None:
    """The Add of a constant along the MatMul's columns (at most one axis: it broadcasts the
    same way onto any shape whose last axis is that one) that alone reads the MatMul's output;
    else None."""
    readers = graph.consumers(matmul.id, 0)
    if len(readers) != 1:
        return None
    node = graph.nodes[readers[0][0]]
    if node.type != "Add" or not is_builtin(node) or len(node.inputs) != 2:
        return None
    value = const_input(graph, node, 1 - readers[0][1])
    if value is None or value.ndim > 1 or value.size != columns or value.dtype.kind != "f":
        return None
    return node


def _order(graph: Graph, node: Node, rank: int) -> list[int]:
    """A Transpose's order (empty: the axes reversed)."""
    order = [int(v) for v in const_input(graph, node, 1).reshape(-1)]
    return order or list(range(rank - 1, -1, -1))


def _stepped_shape(graph: Graph, node: Node, shape: tuple) -> tuple | None:
    """The shape a Transpose, Reshape, Squeeze or Unsqueeze makes of `shape`; None where it
    cannot (the layer reports it)."""
    if node.type == "Transpose":
        order = _order(graph, node, len(shape))
        return tuple(shape[k] for k in order) if sorted(order) == list(range(len(shape))) \
            else None
    try:
        op = get_op(node.type)
        consts = {1: const_input(graph, node, 1)} if len(node.inputs) > 1 else {}
        return tuple(op.out_shape(op.parse_attributes(node.attrs, node.name), shape, consts))
    except CustomLayersError:
        return None


def data_port(graph: Graph, node: Node) -> int | None:
    """The input a step reads its data from (a Multiply's constant may come first); None where
    the node is not a step: its other inputs are not constants of the kind it needs."""
    if node.type in _SCALES:
        for port in ((1, 0) if node.type == "Multiply" else (1,)):
            value = const_input(graph, node, port)
            if value is not None and value.size == 1 and value.dtype.kind == "f":
                return 1 - port
        return None
    if node.type == "Gather":
        index = const_input(graph, node, 1)
        axis = const_input(graph, node, 2)
        if index is None or axis is None or index.ndim != 0 or index.dtype.kind not in "iu" or \
                axis.size != 1 or str(node.attrs.get("batch_dims", "0")) != "0":
            return None
        return 0
    if node.type == "Squeeze" and len(node.inputs) == 1:
        return 0
    return 0 if const_input(graph, node, 1) is not None else None


def scale_factor(graph: Graph, node: Node, rank: int) -> float | None:
    """What a Multiply or Divide step (data_port says it is one) multiplies its data by, of
    rank `rank`: a finite float32; None where the constant has more axes (it would add axes),
    divides by 0, or is not finite (an infinite factor of each element is not one of the sum:
    inf * a + -inf * b is NaN where (a + b) * inf is not; the layer multiplies itself)."""
    value = const_input(graph, node, 1 - data_port(graph, node))
    if value.ndim > rank:
        return None
    c = float(value.reshape(-1)[0])
    if node.type == "Divide":
        if c == 0.0:
            return None
        c = 1.0 / c
    return c if abs(c) <= _F32_MAX else None     # (false for a NaN too)


def _compose(graph: Graph, chain: list[Node], shape: tuple) -> tuple[ComposedView, float] | None:
    """The chain applied to a dense tensor of `shape`: (the view, the product of its factors),
    or None where a step is not a strided view of the same buffer."""
    view, factor = dense_view(shape), 1.0
    for node in chain:
        try:
            if node.type in _SCALES:
                c = scale_factor(graph, node, len(view.shape))
                if c is None:
                    return None
                factor *= c
                continue
            if node.type == "Transpose":
                order = _order(graph, node, len(view.shape))
                if sorted(order) != list(range(len(view.shape))):
                    return None
                view = view.transpose(order)
                continue
            if node.type == "Gather":
                rank = len(view.shape)
                axis = int(const_input(graph, node, 2).reshape(-1)[0])
                index = int(const_input(graph, node, 1))
                if not -rank <= axis < rank:
                    return None
                axis %= rank
                if not -view.shape[axis] <= index < view.shape[axis]:
                    return None
                view = view.select(axis, index % view.shape[axis])
                continue
            after = _stepped_shape(graph, node, view.shape)
            view = view.reshape(after) if after is not None else None
            if view is None:
                return None
        except CustomLayersError:
            return None                 # the layer reports its own error where it runs
    return view, factor


def _readable(view: ComposedView, port: int, attrs: dict, other: tuple | None) -> bool:
    """Whether the MatMul reads `view` as fast as a dense operand: for A whose batches are rows
    of one GEMM (GemmLayout.rows_folded), rows in at most two levels of even spacing with
    contiguous columns; else one stride per axis, one of the two matrix axes contiguous (a
    size-1 axis is either) and at most two batch axes. `other`: B's shape as the MatMul reads
    it."""
    shape = view.shape
    if port == 0 and other is not None and \
            GemmLayout.rows_folded(tuple(shape), tuple(other), attrs["transpose_a"]):
        return GemmLayout.split_rows(view, math.prod(shape[:-1]), shape[-1]) is not None
    linear = view.linear()
    if linear is None or len(shape) > 4:
        return False
    strides = linear.strides
    if len(shape) == 1:
        return strides[0] == 1 or shape[0] == 1
    return strides[-1] == 1 or shape[-1] == 1 or strides[-2] == 1 or shape[-2] == 1


def _unread(graph: Graph, folded: set[str], redirect) -> set[str]:
    """The folded layers whose outputs nobody reads once the MatMuls read around them (a layer
    a MatMul now reads, the root of a shorter chain, stays)."""
    read = {src for src, _ in redirect.values()}
    dead: set[str] = set()
    grew = True
    while grew:
        grew = False
        for nid in folded - dead - read:
            readers = graph.consumers(nid, 0)
            if all(dst in dead or (dst, dport) in redirect for dst, dport in readers):
                dead.add(nid)
                grew = True
    return dead
