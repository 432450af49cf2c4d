"""One launch fewer at the head of a sequence model: a Gather of one constant index along the
last axis (the TCN's and many RNN classifiers' "last time step", x[:, :, -1]) whose only reader
is a MatMul's A becomes part of that MatMul: the MatMul reads A from the Gather's input, one
element of every run along its last axis (the fact ops/nn/matmul.py's PickLast, matmul.cl's
A_STEP and A_PICK).

Exact: the MatMul reads the very values the Gather would have copied, and sums them in the same
order. Only built-ins are folded, and only a MatMul whose A is not transposed, so that the
picked axis lies outside the (M, K) matrix it reads.
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import CustomLayersError
from ..graph.graph import Graph
from ..ops import get_op
from ..ops.nn.matmul import PickLast
from .graph_edit import const_input, rebuilt_graph, sole_consumer, with_fact


def fold_picks_into_matmuls(graph: Graph, is_builtin) -> tuple[Graph, list[str]]:
    """(the rewritten graph, one note per fold); the graph itself when nothing folds."""
    changed, drop, redirect, notes = {}, set(), {}, []
    for node in list(graph):
        if node.type != "Gather" or not is_builtin(node) or len(node.inputs) != 3:
            continue
        pick = _last_axis_pick(graph, node)
        matmul = sole_consumer(graph, node, port=0)
        if pick is None or matmul is None or matmul.type != "MatMul" or \
                not is_builtin(matmul) or matmul.id in changed or \
                graph.producer(matmul.id, 0) != (node.id, 0) or \
                graph.producer(matmul.id, 1)[0] == node.id or _transposes_a(matmul):
            continue
        inputs = list(matmul.inputs)
        inputs[0] = node.inputs[0]
        changed[matmul.id] = with_fact(replace(matmul, inputs=inputs), PickLast(pick, node.name))
        drop.add(node.id)
        redirect[(matmul.id, 0)] = graph.producer(node.id, 0)
        notes.append(f"folded Gather '{node.name}' (index {pick} of the last axis) into the "
                     f"reads of MatMul '{matmul.name}'")
    if not drop:
        return graph, []
    return rebuilt_graph(graph, changed, drop, redirect), notes


def _transposes_a(matmul) -> bool:
    """The MatMul's transpose_a as the op reads it (a bad value: not folded, the layer says)."""
    try:
        return get_op("MatMul").parse_attributes(matmul.attrs, matmul.name)["transpose_a"]
    except CustomLayersError:
        return True


def _last_axis_pick(graph: Graph, gather) -> int | None:
    """The index as written (-length <= i < length where the length is declared: negative
    counts from the end; MatMul resolves it against the length the input really has, and
    refuses one out of its range at plan time, as the Gather would) when the Gather takes one
    constant scalar integer index along the last axis of an input of rank 3 or more; else None.
    Open dimensions (a dynamic batch, an open length) fold all the same: each request's plan
    reads its own shape."""
    shape = gather.inputs[0].shape
    if gather.attrs.get("batch_dims", "0") not in ("0", 0) or not shape or len(shape) < 3:
        return None
    index, axis = const_input(graph, gather, 1), const_input(graph, gather, 2)
    if index is None or axis is None or index.ndim != 0 or axis.size != 1 or \
            index.dtype.kind != "i" or axis.dtype.kind not in "iu":
        return None
    length = shape[-1]
    if int(axis.reshape(-1)[0]) not in (len(shape) - 1, -1) or \
            (length is not None and not -length <= int(index) < length):
        return None
    return int(index)
