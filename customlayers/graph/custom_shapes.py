"""Output shapes of custom ONNX nodes, known when the model is read.

ONNX shape inference stops at a node it does not know: everything after a custom node has no
shape, so a GlobalAveragePool after it cannot be translated (it needs the rank) and a bias after
a convolution after it is not fused (fusion needs the channel count). The reader therefore asks
the loaded layers (`CustomShapes`: the registry's `output_shapes`, by the README's rules: the
model's value_info, the descriptor's Tensor `shape` formula, else input 0's shape), writes the
answers into the model's value_info, and runs ONNX inference again, until nothing new is known.
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

from .onnx_shapes import infer_shapes

# (op type, domain, attributes as text, input shapes) -> output shapes, or None when unknown
CustomShapes = Callable[[str, str, Mapping[str, str], Sequence[tuple]], "list[tuple] | None"]


def _declared(vi) -> tuple | None:
    """The value's shape with None for unknown dims; None when not even the rank is known."""
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    return tuple(int(d.dim_value) if d.HasField("dim_value") else None for d in t.shape.dim)


def _agrees(declared: tuple | None, shape: Sequence[int]) -> bool:
    return declared is None or (len(declared) == len(shape) and all(
        d is None or d == s for d, s in zip(declared, shape)))


def propagate_custom_shapes(onnx, model, is_custom, attr_text, oracle: CustomShapes):
    """The model with value_info for every custom node's outputs that the oracle can shape
    (and ONNX inference rerun after each round). `is_custom(node)`, `attr_text(value)` come
    from the reader."""
    for _ in range(len(model.graph.node) + 1):
        g = model.graph
        known: dict[str, tuple] = {}
        declared: dict[str, tuple] = {}
        types: dict[str, int] = {}
        for vi in list(g.input) + list(g.value_info) + list(g.output):
            shape = _declared(vi)
            if shape is not None and None not in shape:
                known[vi.name] = shape
            elif shape is not None:
                declared[vi.name] = shape
            types.setdefault(vi.name, vi.type.tensor_type.elem_type)
        for t in g.initializer:
            known[t.name] = tuple(int(d) for d in t.dims)
            types.setdefault(t.name, t.data_type)
        added = []
        for node in g.node:
            if not is_custom(node) or all(o in known for o in node.output if o):
                continue
            inputs = [i for i in node.input if i]
            if not all(i in known for i in inputs):
                continue                   # an earlier custom node first: the next round
            attrs = {a.name: attr_text(onnx.helper.get_attribute_value(a))
                     for a in node.attribute}
            shapes = oracle(node.op_type, node.domain, attrs, [known[i] for i in inputs])
            if not shapes:
                continue
            elem = types.get(inputs[0], onnx.TensorProto.FLOAT) if inputs else \
                onnx.TensorProto.FLOAT
            for out, shape in zip(node.output, shapes):
                # a declared dim that disagrees is the compiler's to report, with both shapes
                if out and out not in known and _agrees(declared.get(out), shape):
                    added.append(onnx.helper.make_tensor_value_info(out, elem or
                                                                    onnx.TensorProto.FLOAT,
                                                                    list(shape)))
        if not added:
            return model
        # a declared entry without a full shape gives way to the answer
        names = {vi.name for vi in added}
        kept = [vi for vi in g.value_info if vi.name not in names]
        del g.value_info[:]
        g.value_info.extend(kept + added)
        inferred = infer_shapes(onnx, model)
        if inferred is model:      # inference is a help: what it cannot do stays unknown
            return model
        model = inferred
    return model
