"""TCN temporal blocks as one layer: each block

    x -> causal Conv1d (+ bias) -> ReLU -> causal Conv1d (+ bias) -> ReLU -> Add -> ReLU
    x -------------- (identity, or a 1x1 Convolution (+ bias): the downsample) ---^

is five to nine layers and, once fused, two or three convolution launches; on a GPU (about
10 us a launch) the seed's 8-block TCN spent more time launching than computing at batch 1.
Consecutive blocks become one TemporalBlocks layer (ops/nn/temporal_block.py): one launch for
the run. A block is found after window_folding.py made both causal forms (padding (k-1)*d on
both sides and the "chomp" Slice, or a Pad/padding before only) the same: a stride-1 1-D
convolution with pads_begin (k-1)*d and pads_end 0. Any channel counts, kernel sizes and
dilations; weights must be constants (weight norm's arithmetic is folded into them by the
shape folding before).

A run grows while the next block reads only the run's output (nothing else reads it), the
halo of the run, in positions of its dilations' gcd, stays within MAX_RUN_HALO (the recomputed
part of each tile), and the smallest useful tile of the run fits the local memory every OpenCL
device has (fits_every_device: 32 KB): the op then chooses the tile from the device's own. A
block that does not fit even alone stays as it was. Every layer of a block must be a built-in
and read by the block only; tensors float32.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...graph.graph import Graph, Node, Port
from ...jit.launch import DeviceTraits
from ...ops.nn.temporal_block import (BlockShape, fits_every_device, halos, launch_bound,
                                      pack_block, run_dilation)
from ..graph_edit import rebuilt_graph, sole_layer_reading_only_output
# the host evaluation of constant layers (weight norm's g * v / ||v||) the stream conversion
# reads its weights with: the same arithmetic, in the constants' own float type
from ..stream.stream_constants import EVALUATED, evaluate

# the most positions (of the run's dilations' gcd) a run's tile reads before its first one:
# the seed's pairs of dilations (d, 2d) with kernel 7 need 36; three blocks would need 84
MAX_RUN_HALO = 40


@dataclass
class _Block:
    x: tuple[str, int]            # the producer (node id, port) of the block's input
    conv1: Node
    end: Node                     # the last ReLU: its output is the block's
    shape: BlockShape
    weights: tuple                # w1, b1, w2, b2, wd, bd (numpy; biases and wd may be None)
    nodes: set = field(default_factory=set)   # every layer of the block
    # the layers that compute its constants (weight norm): gone with it where only it reads them
    computed: set = field(default_factory=set)


def fuse_temporal_blocks(graph: Graph, is_builtin, *,
                         launch_bound_on: DeviceTraits | None = None) -> tuple[Graph, list[str]]:
    """(the rewritten graph, one note per run); the graph itself when nothing fuses.
    `launch_bound_on`: only the runs whose convolutions are launch-bound on that device
    (ops/nn/temporal_block.py's launch_bound: a GPU, the batch and length known), Network's
    default; None: every run."""
    runs = _runs(graph, _blocks(graph, is_builtin))
    if launch_bound_on is not None:
        runs = [run for run in runs if _launch_bound(run, launch_bound_on)]
    changed, drop, redirect, notes, added = {}, set(), {}, [], []
    for run in runs:
        first, last = run[0], run[-1]
        shapes = [b.shape for b in run]
        packed = np.concatenate([pack_block(*b.weights) for b in run])
        const = Node(id=_new_id(graph, f"{first.conv1.id}/blocks"),
                     name=f"{first.conv1.name}/blocks", type="Const",
                     attrs={"element_type": "f32", "shape": str(packed.size)},
                     outputs=[Port((packed.size,), "f32")], value=packed,
                     location=first.conv1.location)
        added.append(const)
        changed[first.conv1.id] = Node(
            id=first.conv1.id, name=last.end.name, type="TemporalBlocks",
            attrs=_attrs(shapes), inputs=[first.conv1.inputs[0], const.outputs[0]],
            outputs=list(last.end.outputs), location=first.conv1.location)
        redirect[(first.conv1.id, 1)] = (const.id, 0)
        members = set().union(*(b.nodes for b in run))
        drop.update(members - {first.conv1.id})
        drop.update(_only_read_by(graph, set().union(*(b.computed for b in run)) |
                                  {graph.producer(first.conv1.id, 1)[0]}, members))
        for dst, dst_port in graph.consumers(last.end.id, 0):
            redirect[(dst, dst_port)] = (first.conv1.id, 0)
        notes.append(f"fused the temporal block(s) from '{first.conv1.name}' to "
                     f"'{last.end.name}' ({len(run)} block(s)) into one TemporalBlocks layer")
    if not notes:
        return graph, []
    return rebuilt_graph(graph, changed, drop, redirect, tuple(added)), notes


def _new_id(graph: Graph, wanted: str) -> str:
    nid, n = wanted, 1
    while nid in graph.nodes:
        n += 1
        nid = f"{wanted}{n}"
    return nid


def _only_read_by(graph: Graph, candidates: set, readers: set) -> set:
    """The candidates (the layers computing a block's weights, the first weights' source) that
    only `readers` and candidates read so, through any chain of them: what goes with them."""
    gone: set = set()
    while True:
        more = {nid for nid in candidates - gone
                if all(dst in readers or dst in gone for dst, _ in graph.consumers(nid, 0))
                and len(graph.nodes[nid].outputs) == 1}
        if not more:
            return gone
        gone |= more


def _attrs(shapes: list[BlockShape]) -> dict[str, str]:
    text = lambda values: ",".join(str(int(v)) for v in values)  # noqa: E731
    return {"channels": text([shapes[0].cin] + [s.cout for s in shapes]),
            "kernels": text(k for s in shapes for k in (s.k1, s.k2)),
            "dilations": text(d for s in shapes for d in (s.d1, s.d2)),
            "downsample": text(int(s.down) for s in shapes)}


def _runs(graph: Graph, blocks: list[_Block]) -> list[list[_Block]]:
    """The blocks in runs of consecutive ones, each run within the limits above."""
    runs: list[list[_Block]] = []
    for block in blocks:
        run = runs[-1] if runs else None          # [] after a block that stays as it was
        if run and _follows(graph, run[-1], block) and \
                _fits(run + [block], joined=True):
            run.append(block)
        elif _fits([block], joined=False):
            runs.append([block])
        else:
            runs.append([])           # a block that stays as it was ends any run before it
    return [run for run in runs if run]


def _blocks(graph: Graph, is_builtin) -> list[_Block]:
    return [b for b in (_block_at(graph, n, is_builtin) for n in list(graph)
                        if n.type == "Convolution") if b is not None]


def _launch_bound(run: list[_Block], device: DeviceTraits) -> bool:
    """Whether the run's convolutions are launch-bound on `device`; never where the graph
    leaves its batch or length open (Network then runs the rewrites on a plan's shapes)."""
    batch, _, length = run[0].conv1.inputs[0].shape
    return isinstance(batch, int) and isinstance(length, int) and \
        launch_bound([b.shape for b in run], batch, length, device)


def _follows(graph: Graph, before: _Block, block: _Block) -> bool:
    """`block` reads `before`'s output, and nothing else does."""
    return block.x == (before.end.id, 0) and \
        all(dst in block.nodes for dst, _ in graph.consumers(before.end.id, 0))


def _fits(shapes_of: list[_Block], joined: bool) -> bool:
    shapes = [b.shape for b in shapes_of]
    length = shapes_of[0].conv1.inputs[0].shape[2]
    if joined and halos(shapes, run_dilation(shapes))[0][0] > MAX_RUN_HALO:
        return False
    return fits_every_device(shapes, length)


def _block_at(graph: Graph, conv1: Node, is_builtin) -> _Block | None:
    """The temporal block whose first convolution is `conv1`, else None."""
    computed: set = set()
    first = _causal_conv(graph, conv1, is_builtin, computed)
    if first is None:
        return None
    w1, d1 = first
    x = graph.producer(conv1.id, 0)
    cout, cin = w1.shape[:2]
    nodes = {conv1.id}
    found = _bias_relu(graph, conv1, cout, is_builtin, nodes, computed)
    if found is None:
        return None
    b1, relu1 = found
    conv2 = sole_layer_reading_only_output(graph, relu1)
    second = _causal_conv(graph, conv2, is_builtin, computed) if conv2 is not None else None
    if second is None or second[0].shape[:2] != (cout, cout):
        return None
    w2, d2 = second
    nodes.add(conv2.id)
    found = _bias_relu(graph, conv2, cout, is_builtin, nodes, computed)
    if found is None:
        return None
    b2, relu2 = found
    add = sole_layer_reading_only_output(graph, relu2)
    if add is None or add.type != "Add" or not is_builtin(add) or len(add.inputs) != 2 or \
            (add.attrs.get("auto_broadcast") or "numpy") != "numpy" or \
            any(tuple(p.shape or ()) != tuple(add.outputs[0].shape or ()) for p in add.inputs):
        return None
    nodes.add(add.id)
    other = [graph.producer(add.id, p) for p in range(2) if graph.producer(add.id, p) !=
             (relu2.id, 0)]
    if len(other) != 1:
        return None
    wd = bd = None
    if other[0] != x:
        found = _downsample(graph, graph.nodes[other[0][0]], add, x, cin, cout, is_builtin,
                            nodes, computed)
        if found is None:
            return None
        wd, bd = found
    elif cin != cout:
        return None
    end = sole_layer_reading_only_output(graph, add)
    if end is None or not _plain_relu(end, is_builtin):
        return None
    nodes.add(end.id)
    shape = BlockShape(int(cin), int(cout), int(w1.shape[2]), d1, int(w2.shape[2]), d2,
                       wd is not None)
    return _Block(x, conv1, end, shape, (w1, b1, w2, b2, wd, bd), nodes, computed)


def _constant(graph: Graph, src: tuple[str, int], computed: set):
    """The value of output `src` when constants alone compute it (the layers that do are
    added to `computed`); else None."""
    node = graph.nodes[src[0]]
    if node.type == "Const":
        return None if node.value is None else np.asarray(node.value)
    if src[1] != 0 or node.type not in EVALUATED:
        return None
    values = [_constant(graph, graph.producer(node.id, i), computed)
              for i in range(len(node.inputs))]
    if any(v is None for v in values):
        return None
    value = evaluate(node, values)
    if value is not None:
        computed.add(node.id)
    return value


def _causal_conv(graph: Graph, conv: Node, is_builtin, computed: set):
    """(weights (C_out, C_in, k), dilation) of a built-in float32 1-D convolution of stride 1
    with pads_begin (k-1)*d and pads_end 0 and constant weights; else None."""
    if conv.type != "Convolution" or not is_builtin(conv) or len(conv.inputs) != 2 or \
            len(conv.outputs) != 1:
        return None
    w = _constant(graph, graph.producer(conv.id, 1), computed)
    x = conv.inputs[0].shape
    if w is None or w.ndim != 3 or w.dtype != np.float32 or not x or len(x) != 3 or \
            conv.inputs[0].dtype != "f32" or conv.outputs[0].dtype != "f32":
        return None
    try:
        attrs = {a: [int(v) for v in (conv.attrs.get(a) or default).split(",")]
                 for a, default in (("strides", "1"), ("dilations", "1"), ("pads_begin", "0"),
                                    ("pads_end", "0"))}
    except ValueError:
        return None
    if (conv.attrs.get("auto_pad") or "explicit").lower() not in ("explicit", "notset"):
        return None
    d = attrs["dilations"][0]
    k = w.shape[2]
    if any(len(v) != 1 for v in attrs.values()) or attrs["strides"] != [1] or d < 1 or \
            attrs["pads_begin"] != [(k - 1) * d] or attrs["pads_end"] != [0] or \
            w.shape[1] != x[1] or tuple(conv.outputs[0].shape or ()) != tuple(x[:1]) + (
                w.shape[0], x[2]):
        return None
    return w, d


def _channel_bias(graph: Graph, add: Node, data: tuple[str, int], channels: int,
                  computed: set):
    """The values of a bias Add's constant input when it adds one value per channel (shape
    (1, C, 1), or one value for all); else None."""
    ports = [p for p in range(2) if graph.producer(add.id, p) != data]
    if len(ports) != 1 or len(add.inputs) != 2:
        return None
    value = _constant(graph, graph.producer(add.id, ports[0]), computed)
    if value is None or value.dtype != np.float32 or value.ndim > 3:
        return None
    padded = (1,) * (3 - value.ndim) + value.shape
    if padded == (1, channels, 1) or value.size == 1:
        return np.broadcast_to(value.reshape(-1), (channels,)).astype(np.float32)
    return None


def _bias_relu(graph: Graph, conv: Node, channels: int, is_builtin, nodes: set,
               computed: set):
    """(bias or None, the ReLU) after a convolution: an optional per-channel constant Add,
    then a plain ReLU, each the sole reader of the one before."""
    nxt = sole_layer_reading_only_output(graph, conv)
    bias = None
    if nxt is not None and nxt.type == "Add" and is_builtin(nxt):
        bias = _channel_bias(graph, nxt, (conv.id, 0), channels, computed)
        if bias is None:
            return None
        nodes.add(nxt.id)
        nxt = sole_layer_reading_only_output(graph, nxt)
    if nxt is None or not _plain_relu(nxt, is_builtin):
        return None
    nodes.add(nxt.id)
    return bias, nxt


def _downsample(graph: Graph, node: Node, add: Node, x, cin: int, cout: int, is_builtin,
                nodes: set, computed: set):
    """(weights (C_out, C_in, 1), bias or None) when the residual is a built-in 1x1
    convolution of x (then optionally a per-channel bias Add) read only by the block's Add."""
    bias, reader = None, add
    if node.type == "Add" and is_builtin(node) and \
            sole_layer_reading_only_output(graph, node) is add:
        conv_src = [graph.producer(node.id, p) for p in range(len(node.inputs))
                    if graph.nodes[graph.producer(node.id, p)[0]].type == "Convolution"]
        if len(conv_src) != 1:
            return None
        bias = _channel_bias(graph, node, conv_src[0], cout, computed)
        if bias is None:
            return None
        nodes.add(node.id)
        node, reader = graph.nodes[conv_src[0][0]], node
    if graph.producer(node.id, 0) != x or sole_layer_reading_only_output(graph, node) is not reader:
        return None
    found = _causal_conv(graph, node, is_builtin, computed)
    if found is None or found[0].shape != (cout, cin, 1):
        return None
    nodes.add(node.id)
    return found[0], bias


def _plain_relu(node: Node, is_builtin) -> bool:
    return node.type == "ReLU" and is_builtin(node) and not node.attrs.get("negative_slope") \
        and node.outputs[0].dtype == "f32"
