"""Control flow and sequences, rewritten away before the model is read.

The executor runs a static graph per set of input shapes, with no runtime sequence type, so an
ONNX model's If, Loop, Scan and sequence ops are turned into plain nodes here, on the
ModelProto, before shape inference and translation (reader.py):

- If whose condition is a constant: its chosen branch's nodes, inlined. Otherwise, where both
  branches give outputs of the same static shape: both branches inlined and a Where choosing
  between them per run (the condition may then be a graph input or computed); else refused.
- Loop with a constant trip count and a condition that stays constant true (the body passes
  its condition through, or makes it one), and Scan (its axes and directions; opset 8's
  batch axis without sequence_lens): unrolled, one renamed copy of the body per iteration,
  at most MAX_ITERATIONS.
- Sequences whose length is known here (SequenceEmpty, SequenceConstruct, SequenceInsert,
  SequenceErase, SequenceAt, SequenceLength, ConcatFromSequence, SplitToSequence,
  SequenceMap) are held as lists of tensor value names; Optional, OptionalHasElement and
  OptionalGetElement likewise, where whether it holds a value is known here.

A body's own values get names made unique per copy; the names it reads from outer scopes are
kept (ONNX names are unique across scopes). What cannot be rewritten is refused with a
ModelError naming the node, the op and why.
"""
from __future__ import annotations

import numpy as np

from ...errors import ModelError
from .checks import check_attribute_types, check_node
from .sequences import MAX_ITERATIONS, SEQUENCE_OPS, KnownValues, SequenceOps
from .translate import translates

CONTROL_OPS = ("If", "Loop", "Scan") + SEQUENCE_OPS


@translates(*CONTROL_OPS)
def _rewritten_before(r, node, name, attrs):
    """Registered so that the table lists these ops as taken; the rewrite above removes each
    (or refuses it) before any node is translated, so this is reached only by a bug."""
    r.refuse(f"{node.op_type} should have been rewritten at load (control.py)")


def needs_rewrite(model) -> bool:
    return any(n.op_type in CONTROL_OPS and n.domain in ("", "ai.onnx")
               for n in model.graph.node)


def rewrite_control_flow(onnx, model, file: str):
    """The model with its control flow and sequences rewritten into plain nodes (the model
    itself when it has none)."""
    if not needs_rewrite(model):
        return model
    return _Rewriter(onnx, model, file).run()


class _Rewriter(KnownValues, SequenceOps):
    def __init__(self, onnx, model, file: str):
        self.onnx, self.model, self.file = onnx, model, file
        self.helper = onnx.helper
        self.opset = next((o.version for o in model.opset_import
                           if o.domain in ("", "ai.onnx")), 1)
        self.out: list = []                       # the rewritten nodes, in order
        self.consts: dict[str, np.ndarray] = {}   # known constant values
        self.seqs: dict[str, list[str]] = {}      # sequence value -> its tensors' names
        self.opts: dict[str, str | None] = {}     # optional value -> its tensor, None if empty
        self.used: set[str] = set()               # every value name given out
        self.count = 0
        self.shapes: dict[str, tuple] | None = None
        g = model.graph
        for t in g.initializer:
            self.used.add(t.name)
            if int(np.prod(t.dims, dtype=np.int64)) <= 64:
                self.consts[t.name] = onnx.numpy_helper.to_array(t)
        for vi in list(g.input) + list(g.output) + list(g.value_info):
            self.used.add(vi.name)
        self.where = ""

    # -- driver ------------------------------------------------------------------------------
    def run(self):
        g = self.model.graph
        self.expand(list(g.node), top=True)
        for vi in g.output:
            if vi.name in self.seqs or vi.name in self.opts:
                raise ModelError(f"{self.file}: graph output '{vi.name}' is a sequence or "
                                 f"optional, which is not supported (held as a list of tensors "
                                 f"at load only)")
        model = self.onnx.ModelProto()
        model.CopyFrom(self.model)
        del model.graph.node[:]
        model.graph.node.extend(self.out)
        return model

    def expand(self, nodes, top: bool = False) -> None:
        for index, node in enumerate(nodes):
            if node.domain not in ("", "ai.onnx") or node.op_type not in CONTROL_OPS and \
                    node.op_type != "Constant" and node.op_type != "Identity":
                self.out.append(node)
                self.shapes = None
                self.fold(node)
                continue
            name = node.name or (node.output[0] if node.output else "")
            # a top node as the reader names it; one of a body by its name in the copy
            self.where = f"{self.file}: node {index} '{name}' ({node.op_type})" if top \
                else f"{self.file}: node '{name}' ({node.op_type})"
            check_attribute_types(self.onnx, node, self.where)
            check_node(self.onnx, node, self.opset, self.where)
            getattr(self, "op_" + node.op_type)(node)

    def refuse(self, why: str):
        raise ModelError(f"{self.where}: {why}")

    # -- helpers -----------------------------------------------------------------------------
    def fresh(self, base: str) -> str:
        self.count += 1
        name = f"{base}#{self.count}"
        while name in self.used:
            self.count += 1
            name = f"{base}#{self.count}"
        self.used.add(name)
        return name

    def attrs(self, node) -> dict:
        return {a.name: self.helper.get_attribute_value(a) for a in node.attribute}

    def add(self, op: str, inputs: list[str], outputs: list[str], **attrs) -> None:
        self.out.append(self.helper.make_node(op, inputs, outputs,
                                              name=self.fresh(f"{op}"), **attrs))
        self.shapes = None

    def constant(self, base: str, value) -> str:
        value = np.asarray(value)
        name = self.fresh(base)
        self.consts[name] = value
        self.add("Constant", [], [name],
                 value=self.onnx.numpy_helper.from_array(value, name))
        return name

    def alias(self, target: str, source: str) -> None:
        """`target` takes `source`'s value (a tensor, sequence or optional)."""
        if source in self.seqs:
            self.seqs[target] = list(self.seqs[source])
        elif source in self.opts:
            self.opts[target] = self.opts[source]
        else:
            if source in self.consts:
                self.consts[target] = self.consts[source]
            self.add("Identity", [source], [target])

    def known(self, name: str, what: str) -> np.ndarray:
        if name not in self.consts:
            self.refuse(f"the {what} ('{name}') must be a constant here")
        return self.consts[name]

    def sequence(self, name: str) -> list[str]:
        if name not in self.seqs:
            self.refuse(f"input '{name}' is a sequence whose length is not known at load "
                        f"(a graph input, or computed); sequences are held as lists at load only")
        return self.seqs[name]

    # -- subgraphs ---------------------------------------------------------------------------
    def inline(self, graph, bindings: dict[str, str], tag: str) -> list[str]:
        """Expand a copy of `graph` whose inputs read `bindings` (input name -> outer value);
        its own values renamed under `tag`. Returns the names of its outputs' values."""
        names = dict(bindings)
        for t in graph.initializer:
            new = self.fresh(f"{tag}/{t.name}")
            names[t.name] = new
            self.consts[new] = self.onnx.numpy_helper.to_array(t)
            copy = self.onnx.TensorProto()
            copy.CopyFrom(t)
            copy.name = new
            self.add("Constant", [], [new], value=copy)
        for n in graph.node:
            for out in n.output:
                if out:
                    names[out] = self.fresh(f"{tag}/{out}")
        nodes = [self.renamed(n, names, tag) for n in graph.node]
        where = self.where                   # the node inlining, for its own refusals after
        self.expand(nodes)
        self.where = where
        return [names.get(o.name, o.name) for o in graph.output]

    def renamed(self, node, names: dict[str, str], tag: str):
        copy = self.onnx.NodeProto()
        copy.CopyFrom(node)
        copy.name = self.fresh(f"{tag}/{node.name or node.op_type}")
        copy.input[:] = [names.get(i, i) if i else "" for i in node.input]
        copy.output[:] = [names.get(o, o) if o else "" for o in node.output]
        for a in copy.attribute:
            if a.type == self.onnx.AttributeProto.GRAPH:
                self.rename_outer(a.g, names)
            elif a.type == self.onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    self.rename_outer(g, names)
        return copy

    def rename_outer(self, graph, names: dict[str, str]) -> None:
        """Rename, in a nested graph, the outer values it reads (its own keep their names:
        they are renamed when it is inlined)."""
        for n in graph.node:
            n.input[:] = [names.get(i, i) if i else "" for i in n.input]
            for a in n.attribute:
                if a.type == self.onnx.AttributeProto.GRAPH:
                    self.rename_outer(a.g, names)
                elif a.type == self.onnx.AttributeProto.GRAPHS:
                    for g in a.graphs:
                        self.rename_outer(g, names)
        for o in graph.output:
            o.name = names.get(o.name, o.name)

    # -- plain nodes whose values this pass follows ----------------------------------------
    def op_Constant(self, node) -> None:
        self.out.append(node)
        self.shapes = None
        a = self.attrs(node)
        for key in ("value", "value_int", "value_float", "value_ints", "value_floats"):
            if key in a:
                v = a[key]
                self.consts[node.output[0]] = self.onnx.numpy_helper.to_array(v) \
                    if key == "value" else np.asarray(v)

    def op_Identity(self, node) -> None:
        src = node.input[0]
        if src in self.seqs or src in self.opts:
            self.alias(node.output[0], src)
            return
        if src in self.consts:
            self.consts[node.output[0]] = self.consts[src]
        self.out.append(node)
        self.shapes = None

    # -- If, Loop, Scan ----------------------------------------------------------------------
    def op_If(self, node) -> None:
        a = self.attrs(node)
        cond = node.input[0]
        tag = node.name or node.output[0]
        if cond in self.consts:
            chosen = a["then_branch"] if bool(np.asarray(self.consts[cond]).ravel()[0]) \
                else a["else_branch"]
            for out, value in zip(node.output, self.inline(chosen, {}, f"{tag}/branch")):
                if out:
                    self.alias(out, value)
            return
        then = self.inline(a["then_branch"], {}, f"{tag}/then")
        other = self.inline(a["else_branch"], {}, f"{tag}/else")
        for out, t, e in zip(node.output, then, other):
            if t in self.seqs or e in self.seqs or t in self.opts or e in self.opts:
                self.refuse("a branch gives a sequence or optional and the condition is not a "
                            "constant: which one is taken is known only when it runs")
            st, se = self.shape(t), self.shape(e)
            if st is None or st != se:
                self.refuse(f"the condition '{cond}' is not a constant, and the branches give "
                            f"output '{out}' different or unknown shapes ({st} and {se}): a "
                            f"static graph cannot hold both")
            if out:
                self.add("Where", [cond, t, e], [out])

    def op_Loop(self, node) -> None:
        a = self.attrs(node)
        body = a["body"]
        trip = node.input[0] if len(node.input) > 0 else ""
        cond = node.input[1] if len(node.input) > 1 else ""
        if not trip:
            self.refuse("the trip count (input 0) is absent: the number of iterations is "
                        "known only when it runs")
        count = int(self.known(trip, "trip count (input 0)").ravel()[0])
        if cond and not bool(self.known(cond, "condition (input 1)").ravel()[0]):
            count = 0
        if count > MAX_ITERATIONS:
            self.refuse(f"{count} iterations; at most {MAX_ITERATIONS} are unrolled")
        states = list(node.input[2:])
        n_states = len(states)
        n_scans = len(body.output) - 1 - n_states
        scans: list[list[str]] = [[] for _ in range(n_scans)]
        tag = node.name or node.output[0]
        for i in range(max(count, 0)):
            bindings = {body.input[0].name: self.constant(f"{tag}/i", np.array(i, np.int64)),
                        body.input[1].name: self.constant(f"{tag}/cond", np.array(True))}
            bindings.update({vi.name: s for vi, s in zip(body.input[2:], states)})
            outs = self.inline(body, bindings, f"{tag}/iter{i}")
            if outs[0] not in self.consts:
                self.refuse(f"the body computes its condition ('{body.output[0].name}'): the "
                            f"number of iterations is known only when it runs")
            states = outs[1:1 + n_states]
            for k, value in enumerate(outs[1 + n_states:]):
                scans[k].append(value)
            if not bool(np.asarray(self.consts[outs[0]]).ravel()[0]):
                break
        for out, value in zip(node.output[:n_states], states):
            if out:
                self.alias(out, value)
        for out, values in zip(node.output[n_states:], scans):
            if out:
                self.stack(out, values, 0)

    def op_Scan(self, node) -> None:
        a = self.attrs(node)
        body, m = a["body"], int(a["num_scan_inputs"])
        tag = node.name or node.output[0]
        if self.opset >= 9:
            n = len(node.input) - m
            outs = self.scan(tag, body, list(node.input[:n]), list(node.input[n:]),
                             a.get("scan_input_axes"), a.get("scan_input_directions"),
                             a.get("scan_output_axes"), a.get("scan_output_directions"))
            for out, value in zip(node.output, outs):
                if out:
                    self.alias(out, value)
            return
        # opset 8: axis 0 of every input is a batch, each item scanned on its own (axis 1)
        if node.input[0]:
            self.refuse("Scan of opset 8 with sequence_lens is not supported")
        n = len(node.input) - 1 - m
        batch = {self.shape(x)[0] if self.shape(x) else None for x in node.input[1:]}
        if len(batch) != 1 or None in batch:
            self.refuse("the batch (axis 0) of the inputs is not one size known at load")
        items = []
        for b in range(batch.pop()):
            index = self.constant(f"{tag}/batch", np.array(b, np.int64))
            picked = []
            for x in node.input[1:]:
                picked.append(self.fresh(f"{tag}/batch{b}/{x}"))
                self.add("Gather", [x, index], [picked[-1]], axis=0)
            items.append(self.scan(f"{tag}/batch{b}", body, picked[:n], picked[n:], None,
                                   a.get("directions"), None, None))
        for k, out in enumerate(node.output):
            if out:
                self.stack(out, [item[k] for item in items], 0)

    def scan(self, tag, body, states, inputs, in_axes, in_dirs, out_axes, out_dirs):
        """Scan (opset 9's) unrolled: the final states, then the scan outputs, as values."""
        n, m = len(states), len(inputs)
        k_out = len(body.output) - n
        in_axes, in_dirs = list(in_axes or [0] * m), list(in_dirs or [0] * m)
        out_axes, out_dirs = list(out_axes or [0] * k_out), list(out_dirs or [0] * k_out)
        lengths = set()
        for x, axis in zip(inputs, in_axes):
            shape = self.shape(x)
            if shape is None:
                self.refuse(f"the shape of scan input '{x}' is not known at load: the number "
                            f"of iterations must be")
            lengths.add(shape[axis])
        if len(lengths) != 1:
            self.refuse(f"the scan inputs have different lengths along their axes: "
                        f"{sorted(lengths)}")
        count = lengths.pop()
        if count > MAX_ITERATIONS:
            self.refuse(f"{count} iterations; at most {MAX_ITERATIONS} are unrolled")
        scans: list[list[str]] = [[] for _ in range(k_out)]
        for i in range(count):
            bindings = {vi.name: s for vi, s in zip(body.input[:n], states)}
            for vi, x, axis, d in zip(body.input[n:], inputs, in_axes, in_dirs):
                index = self.constant(f"{tag}/index", np.array(count - 1 - i if d else i,
                                                               np.int64))
                bindings[vi.name] = self.fresh(f"{tag}/iter{i}/{vi.name}")
                self.add("Gather", [x, index], [bindings[vi.name]], axis=int(axis))
            outs = self.inline(body, bindings, f"{tag}/iter{i}")
            states = outs[:n]
            for k, value in enumerate(outs[n:]):
                scans[k].append(value)
        stacked = []
        for values, axis, d in zip(scans, out_axes, out_dirs):
            stacked.append(self.fresh(f"{tag}/stacked"))
            self.stack(stacked[-1], values[::-1] if d else values, int(axis))
        return states + stacked
