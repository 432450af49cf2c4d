"""Epilogue fusion: a built-in layer whose output goes only through per-channel constant
Multiply/Add layers and then possibly a ReLU computes all of them in one kernel (clDNN fuses the
same way).

In OpenVINO IR a convolution's bias is a separate Add of a (1, C, 1, 1) constant, usually
followed by ReLU; an ONNX BatchNormalization reads as a per-channel Multiply and Add. Run apart,
each is a kernel that streams the activation through memory once more. Fused, the chain
collapses at compile time into one scale and one bias per channel: the scale is folded into the
layer's constant weights, and the bias and the ReLU are applied where the layer stores its
result. A layer overridden by a custom layer is never fused: the user's kernel runs as written.

Where no such layer precedes the chain (DenseNet normalizes after each Concat), the chain of
two or more of them (Multiply, Add, ReLU) still runs as one per-channel affine kernel
(ops/tensor/affine.py): `plan_affine_chains`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import CustomLayersError
from ..graph.graph import Graph, Node
from ..jit.launch import FusedEpilogue
from ..jit.layer import LayerImpl
from ..ops import get_op
from ..ops._program import broadcasts_to
from ..ops.view_steps import OperandViews
from ..ops.tensor.affine import ChannelAffine
from ..ops.nn.matmul import ROW_SOFTMAX_MAX, ROW_SOFTMAX_MAX_ROWS, ROW_SOFTMAX_MAX_WEIGHTS
from .graph_edit import sole_layer_reading_only_output

_ELTWISE = {"Add": "add", "Multiply": "mul"}


@dataclass
class Epilogue:
    steps: list[tuple[str, np.ndarray]] = field(default_factory=list)  # ("add"|"mul", values)
    relu: bool = False
    absorbed: list[str] = field(default_factory=list)   # ids of the layers folded in
    # the other input of a residual Add folded in after the per-channel steps: (producer node
    # id, port), computed before the layer runs
    residual: tuple[str, int] | None = None
    pre_relu: bool = False       # a ReLU between the per-channel steps and the residual Add
    # "softmax" | "logsoftmax": the SoftMax/LogSoftmax of the last axis that ends the chain
    row_softmax: str = ""
    gelu: str = ""               # "erf" | "tanh": a Gelu that ends the chain (instead of a ReLU)

    @property
    def has_scale(self) -> bool:
        return any(kind == "mul" for kind, _ in self.steps)

    @property
    def label(self) -> str:
        parts = (["scale"] if self.has_scale else []) + (["bias"] if self.steps else []) + \
            (["relu"] if self.pre_relu else []) + (["residual"] if self.residual else []) + \
            (["relu"] if self.relu else []) + (["gelu"] if self.gelu else []) + \
            ([self.row_softmax] if self.row_softmax else [])
        return "+".join(parts)

    def fused(self) -> FusedEpilogue:
        """What the layer that absorbs the chain is told (its bias is folded to one input)."""
        return FusedEpilogue(bias=bool(self.steps), relu=self.relu,
                             residual=self.residual is not None, pre_relu=self.pre_relu,
                             row_softmax=self.row_softmax, label=self.label, gelu=self.gelu)

    def scale_and_bias(self, channels: int) -> tuple[np.ndarray, np.ndarray]:
        """The chain as out = v * scale + bias per channel (float64 while folding)."""
        scale = np.ones(channels)
        bias = np.zeros(channels)
        for kind, values in self.steps:
            value = np.asarray(values, np.float64).reshape(-1)
            if kind == "add":
                bias = bias + value
            else:
                scale, bias = scale * value, bias * value
        return scale, bias


# layers that only give a constant another shape (ONNX models unsqueeze BatchNorm parameters)
_VIEWS = ("Reshape", "Squeeze", "Unsqueeze", "Flatten")


def _constant_value(graph: Graph, node_id: str, port: int):
    """(value, shape) of a Const, seen through shape-only layers; None if not constant."""
    node = graph.nodes[node_id]
    if node.type == "Const" and node.value is not None:
        return np.asarray(node.value), tuple(np.asarray(node.value).shape)
    if node.type in _VIEWS and node.inputs:
        inner = _constant_value(graph, *graph.producer(node_id, 0))
        shape = node.outputs[port].shape
        if inner is not None and shape is not None and None not in shape and \
                int(np.prod(shape)) == inner[0].size:
            return inner[0], tuple(shape)
    return None


def _per_channel_const(graph: Graph, node: Node, producer_id: str, channels: int,
                       axis: int = 1):
    """The values of the other input of `node`, if it is a constant of `channels` values
    along `axis` (1, or -1: the last)."""
    for port in range(2):
        src, src_port = graph.producer(node.id, port)
        if src == producer_id:
            continue
        found = _constant_value(graph, src, src_port)
        if found is None:
            return None
        value, shape = found
        out_rank = len(node.outputs[0].shape or ())
        if len(node.inputs[1 - port].shape or ()) != out_rank:
            return None     # the constant broadcasts the layer's output up to more axes
        # broadcast to (N, C, ...) with C == channels and every other axis 1
        padded = (1,) * (out_rank - len(shape)) + shape
        at = axis % out_rank if out_rank else 0
        if out_rank >= 2 and len(padded) == out_rank and padded[at] == channels and \
                all(d == 1 for i, d in enumerate(padded) if i != at):
            return value
        return None
    return None


def plan_fusions(graph: Graph, order: list[Node], fusable: set[str], is_custom,
                 scale_folding: set[str] | None = None,
                 row_softmax: set[str] = frozenset(),
                 channels_last: set[str] = frozenset(),
                 broadcast_residual: set[str] = frozenset()) -> dict[str, Epilogue]:
    """node id -> Epilogue for every built-in node of a type in `fusable` that can absorb the
    per-channel Multiply/Add layers, a residual Add and the ReLU after it. A Multiply is folded
    only for types in `scale_folding` whose weights (input 1) are a constant, since the scale is
    folded into them (None: every type in `fusable`). Types in `row_softmax` also take the
    SoftMax or LogSoftmax of the last axis that ends the chain (a classifier's head). Types in
    `channels_last` take their per-channel constants along the last axis of an output of rank 3
    or more (a transformer's Linear layers), the others along axis 1. Types in
    `broadcast_residual` take a residual that broadcasts to their output (an attention mask),
    unless a fact moves where their output goes (a folded Transpose: view_folding.py)."""
    scale_folding = fusable if scale_folding is None else scale_folding
    plans: dict[str, Epilogue] = {}
    position = {n.id: i for i, n in enumerate(order)}
    for node in order:
        if node.type not in fusable or is_custom(node) or not node.outputs:
            continue
        shape = node.outputs[0].shape
        axis = -1 if node.type in channels_last and shape and len(shape) >= 3 else 1
        if not shape or len(shape) < 2 or shape[axis] is None:
            continue
        if node.outputs[0].dtype not in ("f32", "", None):
            # a half (or double) model rounds each layer's output to its type: a fused chain
            # would add the bias before rounding, another result than the model's own
            continue
        weights_const = node.type in scale_folding and len(node.inputs) > 1 and \
            graph.nodes[graph.producer(node.id, 1)[0]].type == "Const"
        ep = Epilogue()
        _extend_chain(graph, node, shape[axis], ep, is_custom, allow_scale=weights_const,
                      residual_before=position[node.id], position=position, axis=axis,
                      allow_gelu=True,
                      broadcast=node.type in broadcast_residual and
                      _broadcast_residual_fits(node))
        if node.type in row_softmax and _small_matrix(node):
            last = graph.nodes[ep.absorbed[-1]] if ep.absorbed else node
            kind = _last_axis_softmax(graph, last, is_custom)
            if kind:
                ep.row_softmax = kind
                ep.absorbed.append(sole_layer_reading_only_output(graph, last).id)
        if ep.absorbed:
            plans[node.id] = ep
    return plans


def _extend_chain(graph: Graph, last: Node, channels: int, ep: Epilogue, is_custom,
                  allow_scale: bool = True, residual_before: int | None = None,
                  position: dict | None = None, axis: int = 1,
                  allow_gelu: bool = False, broadcast: bool = False) -> None:
    """Append to `ep` the per-channel constant Multiply/Add layers, then (with
    `residual_before`) a residual Add, then the ReLU (or with `allow_gelu` the Gelu: the layers'
    own epilogue has it, the affine chain's kernel does not) that follow `last`, each the sole
    consumer of the one before. A residual Add's other input must be of the output's own shape and
    produced before order position `residual_before` (the layer reads it as it stores)."""
    nxt = sole_layer_reading_only_output(graph, last)
    while nxt is not None and _is_eltwise(nxt, is_custom):
        kind = _ELTWISE[nxt.type]
        if kind == "mul" and not allow_scale:
            break
        value = _per_channel_const(graph, nxt, last.id, channels, axis)
        if value is None:
            break
        ep.steps.append((kind, value))
        ep.absorbed.append(nxt.id)
        last = nxt
        nxt = sole_layer_reading_only_output(graph, last)
    relu_first = nxt is not None and _is_plain_relu(nxt, is_custom)
    add = sole_layer_reading_only_output(graph, nxt) if relu_first else nxt
    if residual_before is not None and add is not None and add.type == "Add" and \
            _is_eltwise(add, is_custom) and len(add.inputs) == 2:
        other = _residual_input(graph, add, (nxt if relu_first else last).id, position,
                                residual_before, broadcast)
        if other is not None:         # (a ReLU, then) the residual Add: both in the epilogue
            if relu_first:
                ep.pre_relu = True
                ep.absorbed.append(nxt.id)
            ep.residual = other
            ep.absorbed.append(add.id)
            last = add
            nxt = sole_layer_reading_only_output(graph, last)
    if nxt is not None and _is_plain_relu(nxt, is_custom):
        ep.relu = True
        ep.absorbed.append(nxt.id)
    elif allow_gelu and nxt is not None:
        mode = _gelu_mode(nxt, is_custom)
        if mode:
            ep.gelu = mode
            ep.absorbed.append(nxt.id)


def _gelu_mode(node: Node, is_custom) -> str:
    """"erf" or "tanh" for a built-in float32 Gelu; else ""."""
    if node.type != "Gelu" or is_custom(node) or \
            (node.outputs and node.outputs[0].dtype not in (None, "f32")):
        return ""
    try:                                # the op's own reading of its mode
        return get_op("Gelu").parse_attributes(node.attrs, node.name)["approximation_mode"]
    except CustomLayersError:
        return ""                       # a bad attribute: the layer itself will say so


def _small_matrix(node: Node) -> bool:
    """The layer's second input (a MatMul's B) is a matrix (a 1-D B makes M the output's last
    axis) of at most ROW_SOFTMAX_MAX_WEIGHTS values in its last two axes, and the output has at
    most ROW_SOFTMAX_MAX_ROWS rows: a work-group per row is the faster way to compute it."""
    weights = node.inputs[1].shape if len(node.inputs) > 1 else None
    out = node.outputs[0].shape if node.outputs else None
    if not weights or len(weights) < 2 or None in weights or not out or None in out:
        return False
    return int(np.prod(weights[-2:])) <= ROW_SOFTMAX_MAX_WEIGHTS and \
        int(np.prod(out[:-1])) <= ROW_SOFTMAX_MAX_ROWS


def _last_axis_softmax(graph: Graph, last: Node, is_custom) -> str:
    """"softmax" or "logsoftmax" when the sole consumer of `last` is a built-in SoftMax or
    LogSoftmax of the last axis of an f32 tensor of rank 2 or more whose rows have at most
    ROW_SOFTMAX_MAX values; else ""."""
    nxt = sole_layer_reading_only_output(graph, last)
    if nxt is None or nxt.type not in ("SoftMax", "LogSoftmax") or is_custom(nxt):
        return ""
    shape = nxt.outputs[0].shape if nxt.outputs else None
    if not shape or len(shape) < 2 or None in shape or shape[-1] > ROW_SOFTMAX_MAX or \
            nxt.outputs[0].dtype not in (None, "f32"):
        return ""
    try:                                # the op's own reading of its axis (default, opset)
        axis = get_op(nxt.type).parse_attributes(nxt.attrs, nxt.name)["axis"]
    except CustomLayersError:
        return ""                       # a bad attribute: the layer itself will say so
    if axis not in (len(shape) - 1, -1):
        return ""
    return nxt.type.lower()


def _is_plain_relu(node: Node, is_custom) -> bool:
    return node.type == "ReLU" and not is_custom(node) and not node.attrs.get("negative_slope")


def _residual_input(graph: Graph, add: Node, from_id: str, position: dict,
                    before: int, broadcast: bool = False) -> tuple[str, int] | None:
    """The Add's other input as (producer, port) when it is a tensor of the Add's own shape
    (with `broadcast`: one that broadcasts to it) computed before position `before`; else
    None."""
    shape = add.outputs[0].shape if add.outputs else None
    if not shape or None in shape or add.outputs[0].dtype not in (None, "f32"):
        return None
    ports = [p for p in range(2) if graph.producer(add.id, p)[0] != from_id]
    if len(ports) != 1 or tuple(add.inputs[1 - ports[0]].shape or ()) != tuple(shape):
        return None
    other = tuple(add.inputs[ports[0]].shape or ())
    if other != tuple(shape) and not (broadcast and broadcasts_to(other, shape)):
        return None
    src = graph.producer(add.id, ports[0])
    producer = graph.nodes[src[0]]
    if producer.type == "Const" or position.get(src[0], before) >= before:
        return None
    return src


def _broadcast_residual_fits(node: Node) -> bool:
    """A MatMul-like layer can add a broadcast residual: its output dense (no fact moves it:
    view_folding.py), of rank 2 to 4 (at most two batch axes), both operands matrices (as the
    layer reads them: a folded view's shape where there is one)."""
    fact = next((f for f in node.facts if isinstance(f, OperandViews)), None)
    if fact is not None and fact.out is not None:
        return False
    views = fact.views if fact is not None else (None, None)
    ranks = [len(v.shape) if v is not None else len(p.shape or ()) for v, p in
             zip(views, node.inputs[:2])]
    out = node.outputs[0].shape or ()
    return len(ranks) == 2 and min(ranks) >= 2 and 2 <= len(out) <= 4


def _is_eltwise(node: Node, is_custom) -> bool:
    return node.type in _ELTWISE and not is_custom(node) and \
        node.attrs.get("auto_broadcast", "numpy") == "numpy"


@dataclass
class AffineChain:
    """A chain of per-channel constant Multiply/Add layers (and a ReLU) run as one kernel:
    `head` is the first layer, `data_port` its input that carries the tensor."""
    epilogue: Epilogue
    data_port: int


def plan_affine_chains(graph: Graph, order: list[Node], is_custom,
                       taken: set[str]) -> dict[str, AffineChain]:
    """head node id -> AffineChain, for chains of two or more layers not already fused into a
    producer (`taken`: ids absorbed by plan_fusions). Only float32 tensors of rank >= 2."""
    chains: dict[str, AffineChain] = {}
    claimed = set(taken)
    for node in order:
        if node.id in claimed or not _is_eltwise(node, is_custom) or len(node.inputs) != 2:
            continue
        shape = node.outputs[0].shape if node.outputs else None
        if not shape or len(shape) < 2 or None in shape or node.outputs[0].dtype != "f32":
            continue
        for port in range(2):
            src, _ = graph.producer(node.id, port)
            value = _per_channel_const(graph, node, src, shape[1])
            if value is None:
                continue
            if tuple(node.inputs[port].shape or ()) != tuple(shape):
                continue                  # the tensor side must not be broadcast itself
            ep = Epilogue(steps=[(_ELTWISE[node.type], value)])
            _extend_chain(graph, node, shape[1], ep, is_custom)
            if ep.absorbed:               # two layers or more: one kernel instead of several
                chains[node.id] = AffineChain(ep, port)
                claimed.update(ep.absorbed)
            break
    return chains


@dataclass
class FusionPlan:
    """What fusion changes in a network, decided once per graph: layers that absorb an epilogue,
    chain heads whose implementation becomes a ChannelAffine, and every absorbed layer with the
    layer that now computes its output."""
    epilogues: dict[str, Epilogue] = field(default_factory=dict)
    replaced: dict[str, LayerImpl] = field(default_factory=dict)
    absorbed: dict[str, str] = field(default_factory=dict)


def plan_network_fusion(graph: Graph, order: list[Node], impls: dict[str, LayerImpl],
                        is_custom) -> FusionPlan:
    """Epilogues for the nodes whose implementation `accepts_epilogue`, then affine chains
    among what is left. `is_custom(node)`: the node does not run its type's built-in."""
    fusable = {impls[n.id].type for n in order
               if n.id in impls and impls[n.id].accepts_epilogue and not is_custom(n)}
    scale_folding = {impls[n.id].type for n in order
                     if n.id in impls and impls[n.id].folds_scale and not is_custom(n)}
    row_softmax = {impls[n.id].type for n in order
                   if n.id in impls and impls[n.id].accepts_row_softmax and not is_custom(n)}
    channels_last = {impls[n.id].type for n in order
                     if n.id in impls and impls[n.id].epilogue_channels_last and not is_custom(n)}
    broadcast = {impls[n.id].type for n in order
                 if n.id in impls and impls[n.id].accepts_broadcast_residual and not is_custom(n)}
    epilogues = plan_fusions(graph, order, fusable, is_custom, scale_folding, row_softmax,
                             channels_last, broadcast)
    absorbed = {nid: owner for owner, ep in epilogues.items() for nid in ep.absorbed}
    chains = plan_affine_chains(graph, order, is_custom, set(absorbed))
    absorbed.update({nid: head for head, ch in chains.items() for nid in ch.epilogue.absorbed})
    replaced = {head: ChannelAffine(ch.epilogue, ch.data_port) for head, ch in chains.items()}
    return FusionPlan(epilogues, replaced, absorbed)
