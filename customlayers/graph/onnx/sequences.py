"""Sequences, optionals and values known at load, for the control-flow rewrite (control.py).

KnownValues: the constants (folded from constants and static shapes by the onnx package's
reference evaluator) and static shapes that decide what is inlined and how often.

SequenceOps: a sequence whose length is known here is held as a list of tensor value names, an
optional as its tensor's name or None; each op becomes plain nodes (Identity, Concat, Split,
Constant) or none.

Both are parts of the rewriter (control.py): their methods use its state (self.out, self.seqs,
self.opts, self.consts, self.shapes) and helpers (add, constant, alias, inline, refuse).
"""
from __future__ import annotations

import numpy as np

# the most iterations a Loop, Scan or SequenceMap is unrolled to (each is a copy of its body)
MAX_ITERATIONS = 1024

SEQUENCE_OPS = ("SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase",
                "SequenceAt", "SequenceLength", "ConcatFromSequence", "SplitToSequence",
                "SequenceMap", "Optional", "OptionalHasElement", "OptionalGetElement")


class KnownValues:
    """What the rewriter knows of values before they run."""

    def shape(self, name: str) -> tuple | None:
        """The static shape of a value of the rewritten nodes so far (ONNX inference)."""
        if self.shapes is None:
            m = self.onnx.ModelProto()
            m.CopyFrom(self.model)
            del m.graph.node[:]
            m.graph.node.extend(self.out)
            del m.graph.value_info[:]
            del m.graph.output[:]              # some may not be produced yet
            try:
                m = self.onnx.shape_inference.infer_shapes(m)
            except Exception:          # noqa: BLE001 - unknown shapes are refused where needed
                pass
            self.shapes = {}
            for vi in list(m.graph.input) + list(m.graph.value_info) + list(m.graph.output):
                t = vi.type.tensor_type
                if t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim):
                    self.shapes[vi.name] = tuple(d.dim_value for d in t.shape.dim)
            for t in m.graph.initializer:
                self.shapes[t.name] = tuple(t.dims)
        return self.shapes.get(name)

    def fold(self, node) -> None:
        """Know the outputs of a plain node whose inputs are known small constants (or, for
        Shape and Size, of static shape): what an If condition, a trip count or a sequence
        position is computed from. The node stays; this only decides what to inline."""
        if node.domain not in ("", "ai.onnx") or any(
                a.type in (self.onnx.AttributeProto.GRAPH, self.onnx.AttributeProto.GRAPHS)
                for a in node.attribute):
            return
        if node.op_type in ("Shape", "Size") and node.input[0] not in self.consts:
            shape = self.shape(node.input[0])
            if shape is not None:
                value = np.array(shape, np.int64)
                a = self.attrs(node)
                value = value[a.get("start", 0):a.get("end", len(shape))] \
                    if node.op_type == "Shape" else np.array(np.prod(value), np.int64)
                self.consts[node.output[0]] = value
            return
        if not node.input or not all(i in self.consts for i in node.input if i):
            return
        try:
            from onnx.reference import ReferenceEvaluator
            graph = self.helper.make_graph(
                [node], "fold", [],
                [self.helper.make_value_info(o, self.onnx.TypeProto()) for o in node.output
                 if o],
                initializer=[self.onnx.numpy_helper.from_array(np.asarray(self.consts[i]), i)
                             for i in dict.fromkeys(node.input) if i])
            model = self.helper.make_model(graph, opset_imports=list(self.model.opset_import))
            values = ReferenceEvaluator(model).run(None, {})
        except Exception:              # noqa: BLE001 - not known here: its value stays a layer's
            return
        for out, value in zip([o for o in node.output if o], values):
            if value is not None and np.asarray(value).size <= 64:
                self.consts[out] = np.asarray(value)


class SequenceOps:
    """The sequence and optional ops, held as lists at load."""

    def unsqueeze(self, x: str, axis: int) -> str:
        out = self.fresh(x + "/unsqueezed")
        if self.opset >= 13:
            self.add("Unsqueeze", [x, self.constant("axes", np.array([axis], np.int64))], [out])
        else:
            self.add("Unsqueeze", [x], [out], axes=[axis])
        return out

    def stack(self, out: str, values: list[str], axis: int) -> None:
        """`out` = the `values` stacked along a new `axis`."""
        if not values:
            self.refuse(f"output '{out}' stacks no iteration: an empty tensor of unknown shape")
        if any(v in self.seqs for v in values):
            self.refuse(f"output '{out}' stacks sequences, which is not supported")
        self.add("Concat", [self.unsqueeze(v, axis) for v in values], [out], axis=axis)

    def position(self, node, k: int, length: int, default: int, insert: bool = False) -> int:
        if len(node.input) <= k or not node.input[k]:
            return default
        p = int(self.known(node.input[k], f"position (input {k})").ravel()[0])
        high = length if insert else length - 1
        if not -length <= p <= high:
            self.refuse(f"position {p} is out of range for a sequence of {length}")
        return p + length if p < 0 else p

    def op_SequenceEmpty(self, node) -> None:
        self.seqs[node.output[0]] = []

    def op_SequenceConstruct(self, node) -> None:
        self.seqs[node.output[0]] = list(node.input)

    def op_SequenceInsert(self, node) -> None:
        seq = list(self.sequence(node.input[0]))
        p = self.position(node, 2, len(seq), len(seq), insert=True)
        seq.insert(p, node.input[1])
        self.seqs[node.output[0]] = seq

    def op_SequenceErase(self, node) -> None:
        seq = list(self.sequence(node.input[0]))
        if not seq:
            self.refuse("erases from an empty sequence")
        del seq[self.position(node, 1, len(seq), len(seq) - 1)]
        self.seqs[node.output[0]] = seq

    def op_SequenceAt(self, node) -> None:
        seq = self.sequence(node.input[0])
        if not seq:
            self.refuse("reads from an empty sequence")
        self.alias(node.output[0], seq[self.position(node, 1, len(seq), 0)])

    def op_SequenceLength(self, node) -> None:
        length = len(self.sequence(node.input[0]))
        self.consts[node.output[0]] = np.array(length, np.int64)
        self.add("Constant", [], [node.output[0]], value=self.onnx.numpy_helper.from_array(
            np.array(length, np.int64), node.output[0]))

    def op_ConcatFromSequence(self, node) -> None:
        seq = self.sequence(node.input[0])
        a = self.attrs(node)
        axis = int(a["axis"])
        if not seq:
            self.refuse("concatenates an empty sequence")
        if a.get("new_axis", 0):
            self.stack(node.output[0], seq, axis)
        else:
            self.add("Concat", list(seq), [node.output[0]], axis=axis)

    def op_SplitToSequence(self, node) -> None:
        a = self.attrs(node)
        x = node.input[0]
        axis, keep = int(a.get("axis", 0)), int(a.get("keepdims", 1))
        shape = self.shape(x)
        if shape is None:
            self.refuse(f"the shape of '{x}' is not known at load: the sequence's length must be")
        axis = axis + len(shape) if axis < 0 else axis
        dim = shape[axis]
        if len(node.input) > 1 and node.input[1]:
            split = np.asarray(self.known(node.input[1], "split (input 1)")).astype(np.int64)
            if split.ndim == 0:
                step = int(split)
                if step <= 0:
                    self.refuse(f"split {step} must be positive")
                sizes = [step] * (dim // step) + ([dim % step] if dim % step else [])
            else:
                sizes = [int(s) for s in split]
            squeeze = False
        else:
            sizes, squeeze = [1] * dim, not keep
        if sum(sizes) != dim or any(s < 0 for s in sizes):
            self.refuse(f"split sizes {sizes} do not add up to the axis's {dim}")
        parts = [self.fresh(f"{x}/part{k}") for k in range(len(sizes))]
        if self.opset >= 13:
            self.add("Split", [x, self.constant("split", np.array(sizes, np.int64))], parts,
                     axis=axis)
        else:
            self.add("Split", [x], parts, axis=axis, split=sizes)
        if squeeze:
            squeezed = []
            for p in parts:
                s = self.fresh(p + "/squeezed")
                if self.opset >= 13:
                    self.add("Squeeze", [p, self.constant("axes", np.array([axis], np.int64))],
                             [s])
                else:
                    self.add("Squeeze", [p], [s], axes=[axis])
                squeezed.append(s)
            parts = squeezed
        self.seqs[node.output[0]] = parts

    def op_SequenceMap(self, node) -> None:
        body = self.attrs(node)["body"]
        length = len(self.sequence(node.input[0]))
        if length > MAX_ITERATIONS:
            self.refuse(f"{length} elements; at most {MAX_ITERATIONS} are unrolled")
        results: list[list[str]] = [[] for _ in node.output]
        tag = node.name or node.output[0]
        for i in range(length):
            bindings = {}
            for vi, x in zip(body.input, node.input):
                if x in self.seqs:
                    if len(self.seqs[x]) != length:
                        self.refuse("the input sequences have different lengths")
                    bindings[vi.name] = self.seqs[x][i]
                else:
                    bindings[vi.name] = x
            for k, value in enumerate(self.inline(body, bindings, f"{tag}/iter{i}")):
                results[k].append(value)
        for out, values in zip(node.output, results):
            self.seqs[out] = values

    def op_Optional(self, node) -> None:
        self.opts[node.output[0]] = node.input[0] if node.input and node.input[0] else None

    def optional(self, name: str) -> str | None:
        if name in self.opts:
            return self.opts[name]
        if name in self.seqs or any(name in n.output for n in self.out) or name in self.consts:
            return name                       # a tensor or sequence: holds a value
        fed = next((vi for vi in self.model.graph.input if vi.name == name), None)
        if fed is not None and fed.type.HasField("tensor_type"):
            return name                       # a tensor graph input always holds one
        self.refuse(f"input '{name}' is an optional whose content is not known at load")

    def op_OptionalHasElement(self, node) -> None:
        held = bool(node.input) and bool(node.input[0]) and \
            self.optional(node.input[0]) is not None
        self.consts[node.output[0]] = np.array(held)
        self.add("Constant", [], [node.output[0]],
                 value=self.onnx.numpy_helper.from_array(np.array(held), node.output[0]))

    def op_OptionalGetElement(self, node) -> None:
        value = self.optional(node.input[0])
        if value is None:
            self.refuse(f"'{node.input[0]}' holds no value")
        self.alias(node.output[0], value)
