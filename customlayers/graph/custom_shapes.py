"""Output shapes of custom ONNX nodes, known when the model is read.

ONNX shape inference stops at a node it does not know: everything after a custom node has no
shape, so a GlobalAveragePool after it cannot be translated (it needs the rank) and a bias after
a convolution after it is not fused (fusion needs the channel count). The reader therefore asks
the loaded layers (`CustomLayers`, which the runtime's resolver implements: a layer's own rules,
by docs/models.md: the model's value_info, the descriptor's Tensor `shape` formula, else input 0's
shape), writes the answers into the model's value_info, and runs ONNX inference again, until
nothing new is known.

The question carries what the rules need: the node's attributes, its inputs' shapes with their
symbolic dims (a dynamic batch "N" is a dim of its own, and rule 3 gives it back), and which
inputs are constants (a layer's <Data> blobs bind to those). A node whose shapes cannot be known
keeps the reason, so that a later node that needs them names it (`propagate_custom_shapes`
returns them by value name); one whose layer's descriptor does not fit it (a BindingError: an
input port it does not have) is the reader's error at once.

Before any of this the reader lists the custom nodes nothing implements (`check_implemented`):
that list, not a shape error after it, is what a model run with the wrong config must show.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Mapping, Protocol, Sequence

from ..errors import BindingError, CustomLayersError

@dataclass(frozen=True)
class CustomInput:
    """An input of a custom node. A dim is an int, a symbolic name (an ONNX dim_param: "N"), or
    None (unknown)."""
    name: str                  # the value's name (an initializer's, for a constant)
    shape: tuple | None        # dims as above; None when not even the rank is known
    constant: bool             # an initializer: a <Data> blob may bind to it


@dataclass(frozen=True)
class CustomNode:
    """A custom node as the reader sees it (the resolver reads `type`, `domain`, `name`)."""
    name: str
    type: str
    domain: str                # "" for the standard domain
    attrs: Mapping[str, str]   # attribute text, as the layer will receive it
    inputs: tuple[CustomInput, ...] = ()
    outputs: int = 1           # how many outputs the node has
    # per output, the shape the model gives it when first asked (its value_info), dims as
    # CustomInput's; None where the model gives none (the layer's rules alone shape it)
    declared: tuple = ()


class CustomLayers(Protocol):
    def check_implemented(self, nodes: Sequence[CustomNode]) -> None:
        """Raise the error that lists every node of `nodes` that nothing implements."""

    def output_shapes(self, node: CustomNode) -> "list[tuple | None] | None":
        """The node's output shapes (dims as CustomInput's; an entry None: unknown); None when
        no loaded layer implements its type; a CustomLayersError saying why when the layer's
        rules give no shape for these inputs."""

    def implements(self, op_type: str) -> bool:
        """Whether a loaded layer has this type (a standard op the reader has no translation
        for is then the user's layer)."""


class _ShapesOnly:
    """A bare callable `(op_type, domain, attrs, input_shapes)` (the registry's output_shapes)
    as CustomLayers: it answers static shapes and checks nothing."""

    def __init__(self, shapes: Callable):
        self._shapes = shapes

    def check_implemented(self, nodes) -> None:
        return None

    def implements(self, op_type: str) -> bool:
        return False            # a bare shapes callable says nothing of what is loaded

    def output_shapes(self, node: CustomNode):
        shapes = [i.shape for i in node.inputs]
        if any(s is None or not all(isinstance(d, int) for d in s) for s in shapes):
            return None
        return self._shapes(node.type, node.domain, node.attrs, shapes)


def as_custom_layers(given) -> CustomLayers | None:
    """`given` (a CustomLayers, a bare shapes callable, or None) as a CustomLayers."""
    if given is None or hasattr(given, "check_implemented"):
        return given
    return _ShapesOnly(given)


def node_name(node, index: int) -> str:
    """The name the reader gives node `index` (its own, else its first output's)."""
    return node.name or (node.output[0] if node.output else "") or f"node{index}"


def _dims(vi) -> tuple | None:
    """A ValueInfo's dims (int, dim_param name, or None); None when not even the rank is known."""
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    return tuple(int(d.dim_value) if d.HasField("dim_value") else (d.dim_param or None)
                 for d in t.shape.dim)


def _merged(declared: tuple | None, answer: tuple | None) -> tuple | None:
    """What is known of a value from the model's declaration and the layer's answer: every
    static dim of either, else a symbolic one; None when they disagree (a static dim against
    another, or the rank: the compiler reports that with both shapes) or nothing is known."""
    if answer is None:
        return None
    if declared is None:
        return tuple(answer)
    if len(declared) != len(answer):
        return None
    dims = []
    for d, a in zip(declared, answer):
        if isinstance(d, int) and isinstance(a, int) and d != a:
            return None
        dims.append(d if isinstance(d, int) else a if isinstance(a, int) else
                    d if d is not None else a)
    return tuple(dims)


def custom_nodes(model, is_custom, attr_text, onnx) -> list[tuple[int, object, CustomNode]]:
    """(index, proto, CustomNode without input shapes) of every custom node of the model."""
    found = []
    for index, node in enumerate(model.graph.node):
        if not is_custom(node):
            continue
        try:
            attrs = {a.name: attr_text(onnx.helper.get_attribute_value(a))
                     for a in node.attribute}
        except Exception:         # noqa: BLE001 - a malformed attribute is the reader's to name
            attrs = {}
        domain = node.domain if node.domain not in ("", "ai.onnx") else ""
        found.append((index, node, CustomNode(node_name(node, index), node.op_type, domain,
                                              attrs, outputs=len(node.output))))
    return found


def propagate_custom_shapes(onnx, model, nodes, layers: CustomLayers, infer):
    """(the model with value_info for every custom node output the layers can shape, ONNX
    inference `infer` rerun after each round; the reason each output left unknown is unknown,
    by value name). `nodes`: custom_nodes(model)."""
    reasons: dict[str, str] = {}
    asked: dict[int, tuple] = {}          # node index -> the input shapes last asked about
    declared: dict[int, tuple] = {}       # node index -> its outputs' shapes in the model
    for _ in range(len(nodes) + 1):
        g = model.graph
        shapes: dict[str, tuple | None] = {}
        types: dict[str, int] = {}
        for vi in list(g.input) + list(g.value_info) + list(g.output):
            shapes[vi.name] = _dims(vi)
            types.setdefault(vi.name, vi.type.tensor_type.elem_type)
        constants = set()
        for t in g.initializer:
            shapes[t.name] = tuple(int(d) for d in t.dims)
            types.setdefault(t.name, t.data_type)
            constants.add(t.name)
        added = []
        for index, proto, node in nodes:
            names = [i for i in proto.input if i]
            inputs = tuple(CustomInput(i, shapes.get(i), i in constants) for i in names)
            if any(i.shape is None for i in inputs):
                continue                   # an earlier custom node first: the next round
            if asked.get(index) == tuple(i.shape for i in inputs):
                continue                   # answered for these shapes already
            # what the model itself says of the outputs: known only before the first answer,
            # which goes into the value_info
            declared.setdefault(index, tuple(shapes.get(o) for o in proto.output))
            asked[index] = tuple(i.shape for i in inputs)
            try:
                answer = layers.output_shapes(replace(node, inputs=inputs,
                                                      declared=declared[index]))
            except BindingError:
                # the descriptor does not fit this node (ports, Data blobs): the node's own
                # error, not an unknown shape that a later node would be named for
                raise
            except CustomLayersError as e:
                for out in proto.output:
                    reasons[out] = e.describe()
                continue
            if answer is None:
                for out in proto.output:
                    reasons[out] = "its type is not a loaded custom layer"
                continue
            elem = types.get(names[0], onnx.TensorProto.FLOAT) if names else \
                onnx.TensorProto.FLOAT
            for out, shape in zip(proto.output, answer):
                if shape is None:
                    reasons[out] = "its layer's rules leave this output's shape open"
                    continue
                merged = _merged(shapes.get(out), shape)
                if out and merged is not None and merged != shapes.get(out):
                    added.append(onnx.helper.make_tensor_value_info(
                        out, elem or onnx.TensorProto.FLOAT, list(merged)))
                    reasons.pop(out, None)
        if not added:
            return model, reasons
        # a declared entry that says less gives way to the answer
        new = {vi.name for vi in added}
        kept = [vi for vi in g.value_info if vi.name not in new]
        del g.value_info[:]
        g.value_info.extend(kept + added)
        inferred = infer(onnx, model)
        if inferred is model:      # inference is a help: what it cannot do stays unknown
            return model, reasons
        model = inferred
    return model, reasons
