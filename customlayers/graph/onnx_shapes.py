"""ONNX shape inference without the weights.

onnx.shape_inference.infer_shapes serializes the whole model for its C++ side and parses the
answer back: for ResNet-50 that is 100 MB of weights written and read again, most of the time
it takes to read the model. Inference needs an initializer's element type and dims; its values
only where an op computes a shape from them (a Reshape target, Slice starts, Resize scales,
Range limits): small vectors. So inference runs on a skeleton of the model whose large
initializers are stubs (name, type, dims, no data); the reader takes the values from the model
itself.
"""
from __future__ import annotations

import math

# Initializers of more elements than this go to inference as stubs: no shape an op computes
# from a constant's values is held in a tensor this large (a shape has one value per axis).
MAX_VALUE_ELEMENTS = 1024


def infer_shapes(onnx, model):
    """The model as ONNX shape inference (with data propagation) completes it, its large
    initializers stubs without data; the model itself when inference fails (it is a help, not
    a requirement: custom ops stop it). `model` is not changed."""
    try:
        return onnx.shape_inference.infer_shapes(skeleton(onnx, model), data_prop=True)
    except Exception:          # noqa: BLE001 - what inference cannot do stays unknown
        return model


def skeleton(onnx, model):
    """A copy of `model` whose initializers of more than MAX_VALUE_ELEMENTS elements hold their
    name, element type and dims only."""
    copy = onnx.ModelProto()
    _copy_fields(model, copy, skip="graph")
    graph = model.graph
    _copy_fields(graph, copy.graph, skip="initializer")
    for t in graph.initializer:
        if _is_large(t):
            stub = copy.graph.initializer.add()
            stub.name = t.name
            stub.data_type = t.data_type
            stub.dims.extend(t.dims)
        else:
            copy.graph.initializer.append(t)
    return copy


def _is_large(tensor) -> bool:
    dims = tensor.dims
    # a negative dim is the reader's to report (onnx_checks.tensor_array): kept as it is
    return all(d >= 0 for d in dims) and math.prod(dims) > MAX_VALUE_ELEMENTS


def _copy_fields(source, target, skip: str) -> None:
    """Every set field of `source` but `skip` into `target` (a message of the same type)."""
    for field, value in source.ListFields():
        if field.name == skip:
            continue
        repeated = field.is_repeated if hasattr(field, "is_repeated") else field.label == 3
        if repeated:
            getattr(target, field.name).extend(value)
        elif field.type == field.TYPE_MESSAGE:
            getattr(target, field.name).CopyFrom(value)
        else:
            setattr(target, field.name, value)
