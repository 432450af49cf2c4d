"""ONNX -> IR translations of the index ops on data: GatherElements, GatherND, ScatterElements,
Scatter, ScatterND, ArgMax/ArgMin, TopK, CumSum/CumProd, OneHot, EyeLike, Trilu,
ReverseSequence and Range on data (the built-ins of ops/index/); Einsum is einsum.py. Attributes are checked here and named in the refusal."""
from __future__ import annotations

import numpy as np

from .... import dtypes
from ..deferred import fold_or_defer, is_known, try_shape_arithmetic
from ..translate import (axis_in, dtype_of, optional_input, rank_of, reshaped, text_attr,
                         translates)

# ONNX reduction -> the IR's (OpenVINO ScatterElementsUpdate-12 / ScatterNDUpdate-15 spelling)
_REDUCTIONS = {"none": "none", "add": "sum", "mul": "prod", "max": "max", "min": "min"}


@translates("GatherElements")
def _gather_elements(r, node, name: str, attrs: dict) -> None:
    if try_shape_arithmetic(r, node, name, {"axis": int(attrs.get("axis", 0))}):
        return
    axis = axis_in(r, int(attrs.get("axis", 0)), rank_of(r, node.input[0], "GatherElements"))
    r.emit("GatherElements", [node.input[0], node.input[1]], [node.output[0]], name,
           {"axis": str(axis)}, version="opset6")


@translates("GatherND")
def _gather_nd(r, node, name: str, attrs: dict) -> None:
    if try_shape_arithmetic(r, node, name, {"batch_dims": int(attrs.get("batch_dims", 0))}):
        return
    r.emit("GatherND", [node.input[0], node.input[1]], [node.output[0]], name,
           {"batch_dims": str(int(attrs.get("batch_dims", 0)))}, version="opset8")


@translates("ScatterElements", "Scatter")
def _scatter_elements(r, node, name: str, attrs: dict) -> None:
    reduction = text_attr(r, attrs, "reduction", "none", tuple(_REDUCTIONS))
    if try_shape_arithmetic(r, node, name, {"axis": int(attrs.get("axis", 0)),
                                            "reduction": reduction}):
        return
    axis = axis_in(r, int(attrs.get("axis", 0)), rank_of(r, node.input[0], node.op_type))
    r.emit("ScatterElementsUpdate",
           [node.input[0], node.input[1], node.input[2],
            r.const(f"{name}/axis", np.array(axis, np.int64))], [node.output[0]], name,
           {"reduction": _REDUCTIONS[reduction]}, version="opset12")


@translates("ScatterND")
def _scatter_nd(r, node, name: str, attrs: dict) -> None:
    reduction = text_attr(r, attrs, "reduction", "none", tuple(_REDUCTIONS))
    if try_shape_arithmetic(r, node, name, {"reduction": reduction}):
        return
    r.emit("ScatterNDUpdate", [node.input[0], node.input[1], node.input[2]], [node.output[0]],
           name, {"reduction": _REDUCTIONS[reduction]}, version="opset15")


@translates("ArgMax", "ArgMin")
def _arg_reduce(r, node, name: str, attrs: dict) -> None:
    axis = axis_in(r, int(attrs.get("axis", 0)), rank_of(r, node.input[0], node.op_type))
    r.emit(node.op_type, [node.input[0]], [node.output[0]], name,
           {"axis": str(axis), "keep_dims": str(int(attrs.get("keepdims", 1))),
            "select_last_index": str(int(attrs.get("select_last_index", 0)))})


def _known_or_input(r, node, k: int, what: str) -> str:
    """Input k, which the built-in compiles in: a constant, or a graph input (compiled per
    value given: runtime/compile/network.py's value inputs); refused when computed."""
    value = node.input[k]
    if r.folded(value) is None and not r.is_graph_input(value):
        r.refuse(f"the {what} (input {k}, '{value}') must be a constant or a graph input: the "
                 f"network compiles it in, and this one is computed at run time")
    return value


@translates("TopK")
def _top_k(r, node, name: str, attrs: dict) -> None:
    """Ties: the lower index first, as ONNX says; sorted=0 allows any order, sorted is one."""
    axis = axis_in(r, int(attrs.get("axis", -1)), rank_of(r, node.input[0], "TopK"))
    if "k" in attrs:                                  # opset 1: k is an attribute
        k = r.const(f"{name}/k", np.array(int(attrs["k"]), np.int64))
    else:
        k = _known_or_input(r, node, 1, "k")
    outputs = [o or f"{name}/unused{j}" for j, o in enumerate(node.output)]
    r.emit("TopK", [node.input[0], k], outputs, name,
           {"axis": str(axis), "mode": "max" if int(attrs.get("largest", 1)) else "min",
            "sort": "value", "index_element_type": "i64", "stable": "true"}, version="opset11")


@translates("CumSum", "CumProd")
def _cumulate(r, node, name: str, attrs: dict) -> None:
    """The axis (input 1) a constant or a graph input (compiled in per value)."""
    axis = _known_or_input(r, node, 1, "axis")
    r.emit(node.op_type, [node.input[0], axis], [node.output[0]], name,
           {"exclusive": str(int(attrs.get("exclusive", 0))),
            "reverse": str(int(attrs.get("reverse", 0)))}, version="opset3")


@translates("OneHot")
def _one_hot(r, node, name: str, attrs: dict) -> None:
    """values = [off_value, on_value]: split into the IR's two inputs (constants when given as
    one, else two Gathers of it); negative indices wrap, as ONNX says."""
    depth = _known_or_input(r, node, 1, "depth")
    rank = rank_of(r, node.input[0], "OneHot")
    axis = axis_in(r, int(attrs.get("axis", -1)), rank + 1)
    values = node.input[2]
    folded = r.folded(values)
    if folded is not None:
        if folded.size != 2:
            r.refuse(f"values (input 2) must hold two elements [off, on], found "
                     f"{folded.size}")
        off, on = (r.const(f"{name}/{what}", folded.reshape(-1)[k])
                   for k, what in enumerate(("off_value", "on_value")))
    else:
        zero_axis = r.const(f"{name}/values_axis", np.array(0, np.int64))
        off, on = (f"{name}/{what}" for what in ("off_value", "on_value"))
        for k, out in enumerate((off, on)):
            r.emit("Gather", [values, r.const(f"{out}/index", np.array(k, np.int64)),
                              zero_axis], [out], out, {"batch_dims": "0"}, version="opset8",
                   shapes=[()])
    r.emit("OneHot", [node.input[0], depth, on, off], [node.output[0]], name,
           {"axis": str(axis), "negative_indices": "wrap"})


@translates("EyeLike")
def _eye_like(r, node, name: str, attrs: dict) -> None:
    shape = r.known_shape(node.input[0])
    if shape is None or len(shape) != 2 or None in shape:
        r.refuse(f"EyeLike needs a 2-D input of static shape, found "
                 f"{r.describe_shape(node.input[0])}")
    if "dtype" in attrs:
        if int(attrs["dtype"]) not in dtypes.ONNX_TYPES:
            r.refuse(f"dtype {attrs['dtype']} is not supported; supported: "
                     f"{dtypes.ONNX_SUPPORTED_TEXT}")
        dtype = dtypes.ONNX_TYPES[int(attrs["dtype"])]
    else:
        dtype = dtype_of(r, node.input[0]) or "f32"
    ints = [r.const(f"{name}/{what}", np.array(v, np.int64)) for what, v in
            (("rows", shape[0]), ("columns", shape[1]), ("k", int(attrs.get("k", 0))))]
    r.emit("Eye", ints, [node.output[0]], name, {"output_type": dtype}, version="opset9")


@translates("Trilu")
def _trilu(r, node, name: str, attrs: dict) -> None:
    """k (input 1, default 0) is data: a constant, a graph input or computed."""
    k = optional_input(node, 1) or r.const(f"{name}/k", np.array(0, np.int64))
    if dtype_of(r, k) not in ("i64", ""):
        r.refuse(f"k (input 1) must be int64, found {dtype_of(r, k)}")
    if rank_of(r, node.input[0], "Trilu") < 2:
        r.refuse("Trilu needs an input of rank 2 or more")
    r.emit("Trilu", [node.input[0], k], [node.output[0]], name,
           {"upper": str(int(attrs.get("upper", 1)))})


@translates("ReverseSequence")
def _reverse_sequence(r, node, name: str, attrs: dict) -> None:
    rank = rank_of(r, node.input[0], "ReverseSequence")
    batch = axis_in(r, int(attrs.get("batch_axis", 1)), rank, "batch_axis")
    time = axis_in(r, int(attrs.get("time_axis", 0)), rank, "time_axis")
    r.emit("ReverseSequence", [node.input[0], node.input[1]], [node.output[0]], name,
           {"batch_axis": str(batch), "seq_axis": str(time)})


@translates("Range")
def _range(r, node, name: str, attrs: dict) -> None:
    """Shape arithmetic when start, limit and delta are known at load or per input shapes;
    on data when they are graph inputs, whose values decide the output's size (the network
    compiles a plan per value given); refused when a layer computes one at run time."""
    inputs = list(node.input[:3])
    if all(is_known(r, v) for v in inputs):
        fold_or_defer(r, "Range", inputs, [node.output[0]], name)
        return
    for k, value in enumerate(inputs):
        if not is_known(r, value) and not r.is_graph_input(value):
            r.refuse(f"input {k} ('{value}') is computed at run time by a layer, and Range's "
                     f"output size depends on its value: only constants, shape arithmetic and "
                     f"graph inputs (compiled in per value) are supported")
    r.emit("Range", inputs, [node.output[0]], name,
           {"output_type": dtype_of(r, inputs[0])}, version="opset4")


# -- ops whose output size is the data's: folded at load when their inputs are constants ----
def _data_sized(r, node, what: str) -> None:
    r.refuse(f"{node.op_type}'s output size depends on the values of {what}, computed at run "
             f"time here; it runs only when they are constants (folded at load)"
             f"{' or a graph input' if node.op_type == 'Compress' else ''}")


@translates("NonZero")
def _non_zero(r, node, name: str, attrs: dict) -> None:
    x = r.folded(node.input[0])
    if x is None:
        _data_sized(r, node, f"input 0 ('{node.input[0]}')")
    r.consts[node.output[0]] = np.array(np.nonzero(x), np.int64).reshape(x.ndim, -1)


@translates("Unique")
def _unique(r, node, name: str, attrs: dict) -> None:
    """ONNX's four outputs, as its reference computes them (numpy's unique, then the first
    occurrences reordered when sorted=0)."""
    x = r.folded(node.input[0])
    if x is None:
        _data_sized(r, node, f"input 0 ('{node.input[0]}')")
    axis = attrs.get("axis")
    if axis is not None:
        axis = axis_in(r, int(axis), x.ndim)
    values, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True,
                                               return_counts=True, axis=axis)
    if not int(attrs.get("sorted", 1)):
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        values = np.take(values, order, axis=0 if axis is None else axis)
        first, counts, inverse = first[order], counts[order], rank[inverse.reshape(-1)]
    results = (values, first, inverse.reshape(-1), counts)
    for out, value in zip(node.output, results):
        if out:
            r.consts[out] = np.asarray(value, x.dtype if value is values else np.int64)


@translates("Compress")
def _compress(r, node, name: str, attrs: dict) -> None:
    """A constant condition is a Gather of the indices it selects (along `axis`, or of the
    flattened input); one that is a graph input runs on the Compress built-in, compiled per
    value given; a computed one is refused (the output size would be data's)."""
    condition = r.folded(node.input[1])
    if condition is None and r.is_graph_input(node.input[1]):
        axis = attrs.get("axis")
        if axis is not None:
            axis = axis_in(r, int(axis), rank_of(r, node.input[0], "Compress"))
        r.emit("Compress", [node.input[0], node.input[1]], [node.output[0]], name,
               {} if axis is None else {"axis": str(axis)})
        return
    if condition is None:
        _data_sized(r, node, f"the condition (input 1, '{node.input[1]}')")
    x = node.input[0]
    data = r.folded(x)
    axis = attrs.get("axis")
    if data is not None:
        r.consts[node.output[0]] = np.compress(condition.reshape(-1).astype(bool), data,
                                               axis=None if axis is None else int(axis))
        return
    picked = np.nonzero(condition.reshape(-1))[0].astype(np.int64)
    if axis is None:
        x = reshaped(r, x, [-1], f"{name}/flat")
        axis = 0
    else:
        axis = axis_in(r, int(axis), rank_of(r, x, "Compress"))
    r.emit("Gather", [x, r.const(f"{name}/indices", picked),
                      r.const(f"{name}/axis", np.array(axis, np.int64))], [node.output[0]],
           name, {"batch_dims": "0"}, version="opset8")


@translates("TensorScatter")
def _tensor_scatter(r, node, name: str, attrs: dict) -> None:
    mode = text_attr(r, attrs, "mode", "linear", ("linear", "circular"))
    axis = axis_in(r, int(attrs.get("axis", -2)), rank_of(r, node.input[0], "TensorScatter"))
    inputs = [node.input[0], node.input[1]] + ([node.input[2]] if optional_input(node, 2)
                                               else [])
    r.emit("TensorScatter", inputs, [node.output[0]], name, {"axis": str(axis), "mode": mode})
