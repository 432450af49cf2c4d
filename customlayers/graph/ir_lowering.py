"""IR layers that the built-in ops take in another form, rewritten once the IR is read: what
OpenVINO's ONNX converter and its LowLatency2 pass write for an ONNX GRU or LSTM.

- Shape arithmetic of static shapes: a ShapeOf whose input's dims are all declared becomes a
  Const, and a Gather, Concat, Broadcast (numpy mode) or Convert of constants becomes the
  Const of its value (graph/fold_eval.py evaluates them with ONNX's semantics), as the ONNX
  reader folds its own (the Broadcast to a ShapeOf that initializes a ReadValue, the
  sequence lengths of a GRUSequence).
- GRUSequence and LSTMSequence (opset5) become the GRU and LSTM ops of ops/recurrent/rnn.py,
  whose semantics are ONNX's with layout 1 (batch first): the inputs reordered (X, W, R, B,
  sequence_lens, initial_h[, initial_c]), LSTM's gates from OpenVINO's f,i,c,o to ONNX's
  i,o,f,c, the bias from OpenVINO's sum of the input and recurrent biases to ONNX's two halves
  (linear_before_reset's recurrent h bias in its own place), and Y's [N, D, T, H] from ONNX's
  [N, T, D, H] by a Transpose after it. Their W, R and B must be constants.
A form not covered is refused naming the layer; the rest of the graph is as read.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..errors import ModelError
from .fold_eval import MAX_FOLDED_ELEMENTS, evaluate
from .graph import Graph, Node, Port
from .limits import element_count

SEQUENCES = ("GRUSequence", "LSTMSequence")
_FOLDED = ("ShapeOf", "Gather", "Concat", "Broadcast", "Convert")
# LSTM gate blocks: OpenVINO's f,i,c,o -> ONNX's i,o,f,c
_LSTM_GATES = (1, 3, 0, 2)


def lower_ir(graph: Graph) -> Graph:
    """The graph with its static shape arithmetic folded and its GRUSequence/LSTMSequence
    made GRU/LSTM, the nodes in the model's order; the graph itself when nothing changes."""
    if not any(n.type in _FOLDED + SEQUENCES for n in graph):
        return graph
    values: dict[tuple[str, int], np.ndarray] = {}
    made: dict[str, list[tuple[Node, list]]] = {}   # node id -> what replaces it, its inputs
    redirect: dict[tuple[str, int], tuple[str, int]] = {}   # (dst, port) -> new source
    for node in graph.topological_order():
        folded = _fold(graph, node, values)
        if folded is not None:
            values[(node.id, 0)] = folded
            made[node.id] = [(replace(node, type="Const", attrs={}, inputs=[], value=folded,
                                      outputs=[replace(node.outputs[0],
                                                       shape=tuple(folded.shape))]), [])]
        elif node.type in SEQUENCES:
            readers = graph.consumers(node.id, 0)
            made[node.id] = _sequence(graph, node, values, bool(readers))
            if readers:                     # Y's readers read it in OpenVINO's layout
                redirect.update({dst: (f"{node.id}/Y", 0) for dst in readers})
    if not made:
        return graph
    new = Graph(graph.name)
    new.value_shapes = graph.value_shapes
    for nid, node in graph.nodes.items():
        for replacement, _ in made.get(nid, [(node, None)]):
            new.add_node(replacement)
    for e in graph.edges:
        if e.dst not in made:
            src = redirect.get((e.dst, e.dst_port), (e.src, e.src_port))
            new.connect(src[0], src[1], e.dst, e.dst_port)
    for replacements in made.values():
        for node, inputs in replacements:
            for port, src in enumerate(inputs):
                new.connect(src[0], src[1], node.id, port)
    return new


def _fold(graph: Graph, node: Node, values) -> np.ndarray | None:
    """The value of a ShapeOf of a static shape, or of shape arithmetic on constants; None."""
    if node.type == "Const":
        values[(node.id, 0)] = np.asarray(node.value)
        return None
    if node.type not in _FOLDED or len(node.outputs) != 1:
        return None
    if node.type == "ShapeOf":
        if len(node.inputs) != 1:
            return None
        src, port = graph.producer(node.id, 0)
        shape = graph.nodes[src].outputs[port].shape     # static where the producer says so
        if shape is None or None in shape or node.inputs[0].shape != shape:
            return None
        dtype = np.int32 if node.attrs.get("output_type", "i64").strip() == "i32" else np.int64
        return np.asarray(shape, dtype)
    inputs = [values.get(graph.producer(node.id, i)) for i in range(len(node.inputs))]
    if not inputs or any(v is None for v in inputs):
        return None            # no input (a malformed layer): the layers' checks say so
    try:
        if node.type == "Gather":
            if int(node.attrs.get("batch_dims", "0") or 0) != 0 or len(inputs) != 3:
                return None
            return evaluate("Gather", {"axis": str(int(inputs[2].reshape(-1)[0]))},
                            inputs[:2])[0]
        if node.type == "Concat":
            return evaluate("Concat", {"axis": node.attrs.get("axis", "0")}, inputs)[0]
        if node.type == "Broadcast":
            if node.attrs.get("mode", "numpy") != "numpy" or len(inputs) != 2:
                return None
            target = tuple(int(d) for d in inputs[1].reshape(-1))
            if element_count(target) > MAX_FOLDED_ELEMENTS:
                return None     # a tensor, not shape arithmetic: the layer computes it
            return np.broadcast_to(inputs[0], target).copy()
        dtype = node.outputs[0].dtype
        return inputs[0].astype({"i64": np.int64, "i32": np.int32, "f32": np.float32}[dtype]) \
            if dtype in ("i64", "i32", "f32") else None
    except (ValueError, KeyError, IndexError):
        return None            # left to the layers, which say what is wrong


def _sequence(graph: Graph, node: Node, values, y_read: bool) -> list[tuple[Node, list]]:
    """The nodes that replace a GRUSequence/LSTMSequence, each with its inputs' sources: the
    GRU/LSTM node (the sequence's id, so its other outputs keep their readers), its
    constants, and where `y_read`, the Transpose that gives Y in OpenVINO's layout."""
    lstm = node.type == "LSTMSequence"
    src = [graph.producer(node.id, i) for i in range(len(node.inputs))]
    want = 7 if lstm else 6
    if len(src) != want:
        raise ModelError(f"{node.describe()}: a {node.type} has {want} inputs, found {len(src)}")
    x, h0 = src[0], src[1]
    lens, w, r, b = src[3:] if lstm else src[2:]
    consts = {what: values.get(s) for what, s in (("W", w), ("R", r), ("B", b),
                                                   ("sequence_lengths", lens))}
    missing = [what for what, v in consts.items() if v is None]
    if missing:
        raise ModelError(f"{node.describe()}: its {', '.join(missing)} must be constants "
                         f"(known when the model is read) to run as the built-in "
                         f"{node.type[:-8]}")
    if any(node.attrs.get(k, "").strip() for k in ("activations_alpha", "activations_beta")):
        raise ModelError(f"{node.describe()}: activations with alpha/beta are not supported")
    lbr = node.attrs.get("linear_before_reset", "false").strip().lower() in ("true", "1")
    hidden = int(node.attrs.get("hidden_size", "0"))
    wv, rv, bv = (np.asarray(consts[k], np.float32) for k in ("W", "R", "B"))
    if lstm:
        wv, rv, bv = (_reorder(v, hidden) for v in (wv, rv, bv))
    if lbr and not lstm:        # [bz, br, bwh, brh] -> Wb [bz, br, bwh], Rb [0, 0, brh]
        zeros = np.zeros_like(bv[:, :hidden])
        onnx_b = np.concatenate([bv[:, :3 * hidden], zeros, zeros, bv[:, 3 * hidden:]], 1)
    else:                       # the sum of both biases: all of it on the input side
        onnx_b = np.concatenate([bv, np.zeros_like(bv)], 1)
    made = [_const(node, "W", wv), _const(node, "R", rv), _const(node, "B", onnx_b),
            _const(node, "sequence_lens", np.asarray(consts["sequence_lengths"], np.int32))]
    names = ["B", "sequence_lens", "initial_h"] + ["initial_c"] * lstm
    inputs = [x] + [(c.id, 0) for c in made] + [h0] + [src[2]] * lstm
    ports = [node.inputs[0]] + [c.outputs[0] for c in made] + [node.inputs[1]] + \
        [node.inputs[2]] * lstm
    attrs = {"hidden_size": str(hidden), "direction": node.attrs.get("direction", "forward"),
             "layout": "1", "clip": node.attrs.get("clip", "0") or "0",
             "activations": node.attrs.get("activations", ""), "inputs": ",".join(names),
             "outputs": ",".join(("Y", "Y_h", "Y_c")[:len(node.outputs)])}
    if not lstm:
        attrs["linear_before_reset"] = str(int(lbr))
    y = node.outputs[0]
    ours = replace(y, names=(), shape=tuple(y.shape[i] for i in (0, 2, 1, 3))
                   if y.shape is not None and len(y.shape) == 4 else None)
    cell = replace(node, type=node.type[:-8], attrs=attrs, inputs=ports,
                   outputs=[ours] + list(node.outputs[1:]))
    out = [(cell, inputs)] + [(c, []) for c in made]
    if y_read:
        perm = _const(node, "Y_perm", np.asarray([0, 2, 1, 3], np.int64))
        fix = Node(id=f"{node.id}/Y", name=f"{node.name}/Y", type="Transpose",
                   inputs=[ours, perm.outputs[0]], outputs=[y], location=node.location)
        out += [(perm, []), (fix, [(node.id, 0), (perm.id, 0)])]
    return out


def _reorder(value: np.ndarray, hidden: int) -> np.ndarray:
    blocks = [value[:, k * hidden:(k + 1) * hidden] for k in range(4)]
    return np.concatenate([blocks[k] for k in _LSTM_GATES], 1)


def _const(owner: Node, what: str, value: np.ndarray) -> Node:
    value = np.ascontiguousarray(value)
    value.flags.writeable = False
    dtype = {np.dtype(np.float32): "f32", np.dtype(np.int32): "i32",
             np.dtype(np.int64): "i64"}[value.dtype]
    return Node(id=f"{owner.id}/{what}", name=f"{owner.name}/{what}", type="Const",
                outputs=[Port(tuple(value.shape), dtype)], value=value,
                location=owner.location)
