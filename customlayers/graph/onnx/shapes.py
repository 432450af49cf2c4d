"""ONNX shape inference without the weights.

onnx.shape_inference.infer_shapes serializes the whole model for its C++ side and parses the
answer back: for ResNet-50 that is 100 MB of weights written and read again, most of the time
it takes to read the model. Inference needs an initializer's element type and dims; its values
only where an op computes a shape from them (a Reshape target, Slice starts, Resize scales,
Range limits): small vectors. So inference runs on a skeleton of the model whose large
initializers are stubs (name, type, dims, no data); the reader takes the values from the model
itself.

ONNX's inference (1.23 still) sizes a ceil_mode pooling by the rule before opset 19's note:
a last window that would start in the end padding is kept, where ONNX Runtime and PyTorch
drop it (MaxPool 2x2 stride 2, pads_end 1 on 2x2 gives 2x2, not 1x1). Such outputs are given
their right shape and inference runs again, for the values after them.
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
        inferred = onnx.shape_inference.infer_shapes(skeleton(onnx, model), data_prop=True)
    except Exception:          # noqa: BLE001 - what inference cannot do stays unknown
        return model
    fixed: dict[str, list] = {}                      # value name -> its dims, corrected
    # a pool after a corrected one was sized from a wrong input: in a chain, each round gets
    # at least the first pool still wrong right
    for _ in range(len(model.graph.node) + 1):
        wrong = _ceil_pool_shapes(inferred)
        if not wrong:
            break
        fixed.update(wrong)
        try:
            inferred = onnx.shape_inference.infer_shapes(
                _declaring(skeleton(onnx, model), inferred, fixed), data_prop=True)
        except Exception:      # noqa: BLE001 - the op's own shape check then speaks
            break
    return inferred


_POOLS = ("MaxPool", "AveragePool", "LpPool")


def ceil_pool_size(size: int, kernel: int, stride: int, dilation: int, pad_begin: int,
                   pad_end: int) -> int:
    """The output size of a ceil_mode pooling axis, as ONNX Runtime and PyTorch have it: the
    windows rounded up, less a last one that would start in the end padding."""
    span = size + pad_begin + pad_end - ((kernel - 1) * dilation + 1)
    out = -(-span // stride) + 1
    if (out - 1) * stride >= size + pad_begin:
        out -= 1
    return out


def _dims(value_info) -> list:
    return [d.dim_value if d.HasField("dim_value") else None
            for d in value_info.type.tensor_type.shape.dim]


def _ceil_pool_shapes(model) -> dict[str, list]:
    """The outputs of ceil_mode poolings (a MaxPool's Indices too) whose inferred static size
    differs from ceil_pool_size, with their right dims."""
    infos = {vi.name: vi for vi in (list(model.graph.input) + list(model.graph.value_info)
                                    + list(model.graph.output))}
    wrong = {}
    for node in model.graph.node:
        window = _ceil_window(node)
        x = infos.get(node.input[0]) if window else None
        if x is None or not x.type.HasField("tensor_type"):
            continue
        x_dims = _dims(x)
        kernel, strides, dilations, pads = window
        k = len(kernel)
        for out in [o for o in node.output[:2] if o in infos]:
            if not infos[out].type.HasField("tensor_type"):
                continue
            y_dims = _dims(infos[out])
            if len(x_dims) != k + 2 or len(y_dims) != k + 2:
                continue
            right = list(y_dims)
            for i in range(k):
                size = x_dims[i + 2]
                if size is not None and y_dims[i + 2] is not None and \
                        size + pads[i] + pads[i + k] >= (kernel[i] - 1) * dilations[i] + 1:
                    right[i + 2] = ceil_pool_size(size, kernel[i], strides[i], dilations[i],
                                                  pads[i], pads[i + k])
            if right != y_dims:
                wrong[out] = right
    return wrong


def _ceil_window(node) -> tuple[list, list, list, list] | None:
    """(kernel, strides, dilations, pads) of a ceil_mode pooling with explicit pads (or VALID:
    none); None for any other node, or one whose attributes the reader will refuse."""
    if node.op_type not in _POOLS or node.domain not in ("", "ai.onnx") or not node.input:
        return None
    attrs = {a.name: a for a in node.attribute}
    auto_pad = attrs["auto_pad"].s if "auto_pad" in attrs else b"NOTSET"
    if "ceil_mode" not in attrs or not attrs["ceil_mode"].i or \
            auto_pad not in (b"NOTSET", b"", b"VALID") or "kernel_shape" not in attrs:
        return None
    kernel = list(attrs["kernel_shape"].ints)
    k = len(kernel)
    strides = list(attrs["strides"].ints) if "strides" in attrs else [1] * k
    dilations = list(attrs["dilations"].ints) if "dilations" in attrs else [1] * k
    pads = list(attrs["pads"].ints) if "pads" in attrs and auto_pad != b"VALID" \
        else [0] * (2 * k)
    if len(strides) != k or len(dilations) != k or len(pads) != 2 * k or \
            min(kernel + strides + dilations + [1]) < 1 or min(pads + [0]) < 0:
        return None
    return kernel, strides, dilations, pads


def _declaring(model, inferred, fixed: dict):
    """`model` (a skeleton, changed) with the values of `fixed` declared with their right
    dims, as a graph output or value_info (inference keeps a declared shape and goes on from
    it)."""
    inferred_infos = {vi.name: vi for vi in (list(inferred.graph.value_info)
                                             + list(inferred.graph.output))}
    outputs = {vi.name: vi for vi in model.graph.output}
    kept = [vi for vi in model.graph.value_info if vi.name not in fixed]
    del model.graph.value_info[:]
    model.graph.value_info.extend(kept)
    for name, dims in fixed.items():
        target = outputs.get(name)
        if target is None:
            target = model.graph.value_info.add()
        target.CopyFrom(inferred_infos[name])
        for dim, value in zip(target.type.tensor_type.shape.dim, dims):
            if value is not None:
                dim.dim_value = value
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
    # a negative dim is the reader's to report (checks.tensor_array): kept as it is
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
