"""A whole-window causal model as its step (issue 21, "Automatic streaming"): `stream_program`
turns a Graph whose input is [N, C, T] (time last) into the StreamProgram
(ops/stream/program.py) that computes, from the input frame of step t and the histories its
causal convolutions keep, what the model gives for the window of steps 0..t: its per-step
outputs [N, C, T] at step t, and its head (a Gather or Slice of the last step, then dense
layers and a softmax) on that window.

Exact by construction: a causal convolution (padding (k-1)*d at the start, 0 at the end)
reads at output step t only the input steps t-(k-1)*d..t, zeros before step 0, which are the
frames its history keeps; every other layer streamed works per step (pointwise, per channel,
residual Adds) or on the last step only. Anything else is refused with a ModelError naming the
layer (name, type, file:line) and why: non-causal padding, strides, pooling, softmax,
reductions, transposes or concatenations over time, reading another step than the last,
custom layers, a second input with a time axis, a model with no causal convolution.

Pure Python over the graph: the shape-folding and window-folding passes run first (a
convolution with symmetric padding and a Slice chomping its end, or a zero Pad of the start
before it, arrive as one convolution padded at the start), then one walk in topological order
over the layers the outputs need (stream_layers.py has the handler per layer type).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...errors import ModelError, shape_text
from ...graph.graph import Graph, Node
from ...ops.stream.program import Binary, CausalConv, StreamOutput, StreamProgram
from .. import FOLDING
from . import stream_head, stream_layers
from .stream_constants import EVALUATED, evaluate
from .stream_layers import KEEP_EXTRA, TIME_MIXING, Head, Sequence, not_causal
from ..window_folding import fold_into_convolutions


LAYERS = {**stream_layers.LAYERS, **stream_head.LAYERS}    # IR type -> its handler


def stream_program(graph: Graph, axis: int = -1, is_builtin=None) -> StreamProgram:
    """The step of `graph` along `axis` of its input (the last: -1 or 2). `is_builtin(node)`:
    the node runs its type's built-in (False: a custom layer, which cannot stream); None:
    every node does. ModelError naming the layer and why for a model that cannot stream."""
    builtin = is_builtin or (lambda node: True)
    notes: list[str] = []
    for rewrite in FOLDING + (fold_into_convolutions,):
        graph, done = rewrite(graph, builtin)
        notes += done
    walk = _Walk(graph, builtin)
    source = walk.start(axis)
    for node in graph.topological_order():
        if node.id in walk.needed and node.type not in ("Parameter", "Result"):
            walk.visit(node)
    outputs = walk.outputs()
    ops, frames = _fold_affine_into_convolutions(walk.ops, walk.frames, outputs, notes)
    program = StreamProgram(input=source.name, input_channels=walk.input_channels,
                            frames=frames, ops=tuple(ops), outputs=tuple(outputs),
                            notes=tuple(notes))
    if not program.convolutions:
        raise ModelError(f"cannot stream the model '{graph.name}': no causal convolution reads "
                         f"past steps of its input {source.describe()}, so it has no causal "
                         f"structure to stream (each output step is the window's own)")
    try:
        program.check()
    except ValueError as e:        # a bug of the conversion, said as one
        raise ModelError(f"the stream conversion of '{graph.name}' made an inconsistent step "
                         f"({e}); please report it") from e
    return program


class _Walk:
    """The values the step knows ((node id, port) -> Sequence, Head or constant), the frames
    and ops made so far; what the handlers in stream_layers.py read and write through."""

    def __init__(self, graph: Graph, is_builtin):
        self.graph = graph
        self.is_builtin = is_builtin
        self.values: dict[tuple[str, int], object] = {}
        self.frames: dict[str, int] = {}
        self.ops: list = []
        self.input_channels = 0
        self.batch = None           # the batch the model declares (None: symbolic)
        self.needed = _needed(graph)

    # -- the input and the outputs -----------------------------------------------------------
    def start(self, axis: int) -> Node:
        params = [p for p in self.graph.parameters if p.id in self.needed] or \
            self.graph.parameters
        if not params:
            raise ModelError(f"cannot stream the model '{self.graph.name}': it has no input")
        source = params[0]
        shape = tuple(source.outputs[0].shape or ())
        if axis not in (-1, 2) or len(shape) != 3:
            raise ModelError(
                f"cannot stream {source.describe()} of shape {shape_text(shape)} along axis "
                f"{axis}: a stream steps an input [N, C, T] along its last axis (axis -1 or 2)")
        if not isinstance(shape[1], int):
            raise ModelError(f"cannot stream {source.describe()} of shape {shape_text(shape)}: "
                             f"its channels (axis 1) need a known size")
        for other in params[1:]:
            has_time = len(other.outputs[0].shape or ()) >= 3
            raise ModelError(
                f"cannot stream {other.describe()}: a second model input"
                f"{' with a time axis' if has_time else ''}; a stream steps one input [N, C, T]")
        self.input_channels = int(shape[1])
        self.batch = shape[0] if isinstance(shape[0], int) else None
        name = self._frame_name(source.name)
        self.frames[name] = self.input_channels
        self.values[(source.id, 0)] = Sequence(name, self.input_channels)
        return source

    def outputs(self) -> list[StreamOutput]:
        outs, taken = [], {}
        for result in self.graph.results:
            src = self.graph.producer(result.id, 0)
            value = self.values.get(src)
            node = self.graph.nodes[src[0]]
            if isinstance(value, np.ndarray) or value is None:
                self.refuse(result, f"the output is a constant of {node.describe()}, not "
                                    f"computed from the input")
            self.settled(value)
            name = _output_name(self.graph, result, src, taken)
            if name is None:
                continue
            taken[name] = src
            if isinstance(value, Sequence):
                outs.append(StreamOutput(name, value.frame, (value.channels,), True))
            else:
                outs.append(StreamOutput(name, value.frame, tuple(value.shape)))
        return outs

    # -- one layer ---------------------------------------------------------------------------
    def visit(self, node: Node) -> None:
        if node.type == "Const":
            self.values[(node.id, 0)] = np.asarray(node.value)
            return
        if not self.is_builtin(node):
            self.refuse(node, "a custom layer: its kernel computes whole windows, and a step "
                              "runs built-in layers only")
        inputs = [self.values.get(self.graph.producer(node.id, i))
                  for i in range(len(node.inputs))]
        if inputs and all(isinstance(v, np.ndarray) for v in inputs):
            value = evaluate(node, inputs) if node.type in EVALUATED else None
            if value is None:
                self.refuse(node, f"computes a constant that the stream conversion cannot "
                                  f"evaluate ({node.type} of constants; it evaluates "
                                  f"{', '.join(EVALUATED)})")
            self.values[(node.id, 0)] = value
            return
        handler = LAYERS.get(node.type)
        if handler is None or handler.__name__ not in KEEP_EXTRA:
            for value in inputs:
                self.settled(value)
        if handler is None:
            why = TIME_MIXING.get(node.type) or _why_not(node, self)
            self.refuse(node, why)
        self.values[(node.id, 0)] = handler(self, node)

    def settled(self, value) -> None:
        """Refuses a sequence with extra steps at its end, naming the convolution that
        padded them."""
        if isinstance(value, Sequence) and value.extra:
            self.refuse(value.padded, not_causal(value.extra, value.padded_history))

    def refuse(self, node: Node, why: str):
        raise ModelError(f"cannot stream {node.describe()}: {why}")

    # -- what handlers read --------------------------------------------------------------------
    def input(self, node: Node, port: int):
        if port >= len(node.inputs):
            self.refuse(node, f"input {port} is missing")
        src = self.graph.producer(node.id, port)
        value = self.values.get(src)
        if value is None:
            self.refuse(node, f"input {port} is output {src[1]} of "
                              f"{self.graph.nodes[src[0]].describe()}, which a step does not "
                              f"compute")
        return value

    def const(self, node: Node, port: int, what: str) -> np.ndarray:
        value = self.input(node, port)
        if not isinstance(value, np.ndarray):
            self.refuse(node, f"{what} (input {port}) must be a constant; here it is computed "
                              f"from the input")
        return value

    def integers(self, node: Node, port: int, what: str) -> np.ndarray:
        """A constant input of integers (indices, axes, a shape), as int64."""
        value = self.const(node, port, what)
        if value.dtype.kind not in "iu" or value.size == 0:
            self.refuse(node, f"{what} (input {port}) must be integers, found "
                              f"{value.dtype.name} of shape {list(value.shape)}")
        return value.astype(np.int64)

    def attr(self, node: Node, key: str, default=None, kind=float):
        """Attribute `key` as a float (or `kind`), or the layer refused saying why."""
        text = node.attrs.get(key, default)
        try:
            return kind(text)
        except (TypeError, ValueError):
            what = "an integer" if kind is int else "a number"
            self.refuse(node, f"{key}='{text}' is not {what}")

    def scalar(self, node: Node, port: int, what: str) -> float:
        value = self.const(node, port, what)
        if value.size != 1:
            self.refuse(node, f"{what} (input {port}) must be one number, found shape "
                              f"{list(value.shape)}")
        return float(value.reshape(-1)[0])

    def frame_input(self, node: Node, port: int):
        value = self.input(node, port)
        if not isinstance(value, (Sequence, Head)):
            self.refuse(node, f"input {port} is a constant where a computed tensor was expected")
        return value

    def sequence(self, node: Node, port: int, verb: str) -> Sequence:
        value = self.frame_input(node, port)
        if not isinstance(value, Sequence):
            self.refuse(node, f"{verb} a tensor of the last step "
                              f"{shape_text((None,) + value.shape)} as if it had a time axis; "
                              f"a stream runs it on sequences [N, C, T]")
        return value

    # -- what handlers write -------------------------------------------------------------------
    def emit(self, op, node: Node, size: int, part: str = "") -> str:
        """Adds `op` writing a new frame of `size` values named after the layer (and `part`,
        for the intermediates of a layer that takes several ops); returns the frame's name."""
        dst = self._frame_name(node.name + (f"/{part}" if part else ""))
        self.frames[dst] = int(size)
        if isinstance(op, CausalConv):
            op = replace(op, weight=np.ascontiguousarray(op.weight, np.float32),
                         bias=None if op.bias is None else
                         np.ascontiguousarray(op.bias, np.float32))
        if isinstance(op, Binary) and op.constant is not None:
            op = replace(op, constant=np.ascontiguousarray(op.constant, np.float32))
        self.ops.append(replace(op, dst=dst))
        return dst

    def _frame_name(self, base: str) -> str:
        name, k = base, 1
        while name in self.frames:
            k += 1
            name = f"{base}#{k}"
        return name


def _needed(graph: Graph) -> set[str]:
    """The nodes some output reads (directly or through others): only those are streamed."""
    seen: set[str] = set()
    todo = [r.id for r in graph.results]
    while todo:
        nid = todo.pop()
        if nid in seen:
            continue
        seen.add(nid)
        todo += [graph.producer(nid, port)[0] for port in range(len(graph.nodes[nid].inputs))]
    return seen


def _fold_affine_into_convolutions(ops: list, frames: dict, outputs: list, notes: list):
    """A convolution's bias Add, and a per-channel Multiply, Add or Subtract of a constant
    after it (a BatchNorm, a Gemm's alpha and bias), become its weights and bias when nothing
    else reads the convolution's frame: one op where there were several. Exact for the
    Add/Subtract (float32 biases summed in float64, rounded once); a scale multiplies the
    float32 weights, rounded once (a relative 6e-8)."""
    ops, frames = list(ops), dict(frames)
    reads: dict[str, int] = {}
    for op in ops:
        for frame in (op.a, op.b) if isinstance(op, Binary) else (op.src,):
            if frame is not None:
                reads[frame] = reads.get(frame, 0) + 1
    for out in outputs:
        reads[out.frame] = reads.get(out.frame, 0) + 1
    writer = {op.dst: i for i, op in enumerate(ops)}
    k = 0
    while k < len(ops):
        op = ops[k]
        i = writer.get(op.a) if isinstance(op, Binary) else None
        if i is None or op.b is not None or op.constant is None or reads.get(op.a) != 1 or \
                not isinstance(ops[i], CausalConv) or op.kind not in ("add", "sub", "mul") or \
                op.constant_first and op.kind == "sub" or \
                op.constant.size not in (1, ops[i].weight.shape[0]):
            k += 1
            continue
        conv = ops[i]
        cout = conv.weight.shape[0]
        c = np.broadcast_to(op.constant.astype(np.float64).reshape(-1), (cout,))
        bias = np.zeros(cout) if conv.bias is None else conv.bias.astype(np.float64)
        weight = conv.weight
        if op.kind == "mul":
            weight = (weight.astype(np.float64) * c[:, None, None]).astype(np.float32)
            bias = bias * c
        else:
            bias = bias + c if op.kind == "add" else bias - c
        ops[i] = replace(conv, dst=op.dst, weight=np.ascontiguousarray(weight),
                         bias=np.ascontiguousarray(bias, np.float32))
        del frames[conv.dst]
        del ops[k]
        writer = {o.dst: j for j, o in enumerate(ops)}
        verb = {"add": "added to", "sub": "subtracted from", "mul": "multiplied into"}[op.kind]
        notes.append(f"the constant of '{op.name}' {verb} the convolution '{conv.name}'")
    return ops, frames


def _why_not(node: Node, walk: _Walk) -> str:
    """Why a layer of a type the step does not run cannot stream, from what it reads."""
    reads = [walk.values.get(walk.graph.producer(node.id, i)) for i in range(len(node.inputs))]
    if node.type.startswith("Reduce"):
        axes = next((v for v in reads[1:] if isinstance(v, np.ndarray)), None)
        rank = 3 if isinstance(reads[0], Sequence) else None
        if rank and axes is not None and axes.dtype.kind in "iu" and \
                2 in {int(a) % rank for a in axes.reshape(-1)}:
            return "reduces over the time axis: its output reads every step of the window " \
                   "(mixes steps)"
    if node.type == "Transpose" and isinstance(reads[0], Sequence):
        return "moves the time axis of the sequence [N, C, T] (a step keeps it last)"
    if node.type == "Concat" and any(isinstance(v, Sequence) for v in reads):
        axis = walk.attr(node, "axis", 1, int) % 3
        return ("concatenates along the time axis: mixes steps" if axis == 2 else
                f"concatenates along axis {axis}; the stream's frame ops have no concatenation")
    return (f"{node.type} is not a layer a step runs (causal convolutions, pointwise and "
            f"per-channel layers, residual Adds, and a head on the last step: Gather or "
            f"Slice of it, MatMul/Gemm, softmax); it may mix time steps")


def _output_name(graph: Graph, result: Node, src, taken: dict) -> str | None:
    """The name the model gives an output (as the runtime's compiler names it: the graph
    output's own name, else the tensor's, else the Result's); None for a tensor listed
    twice."""
    own = result.inputs[0].names if result.inputs else ()
    names = own or graph.nodes[src[0]].outputs[src[1]].names
    name = names[0] if names else result.name
    if name in taken:
        return None if taken[name] == src else result.name
    return name
