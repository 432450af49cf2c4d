"""ONNX -> IR translations of the index ops on data: GatherElements, GatherND, ScatterElements,
Scatter, ScatterND, ArgMax/ArgMin, TopK, CumSum/CumProd, OneHot, EyeLike, ReverseSequence
(the built-ins of ops/index/). Attributes are checked here and named in the refusal."""
from __future__ import annotations

import numpy as np

from ..translate import axis_in, const_input, optional_input, rank_of, text_attr, translates

# ONNX reduction -> the IR's (OpenVINO ScatterElementsUpdate-12 / ScatterNDUpdate-15 spelling)
_REDUCTIONS = {"none": "none", "add": "sum", "mul": "prod", "max": "max", "min": "min"}


@translates("GatherElements")
def _gather_elements(r, node, name: str, attrs: dict) -> None:
    axis = axis_in(r, int(attrs.get("axis", 0)), rank_of(r, node.input[0], "GatherElements"))
    r.emit("GatherElements", [node.input[0], node.input[1]], [node.output[0]], name,
           {"axis": str(axis)}, version="opset6")


@translates("GatherND")
def _gather_nd(r, node, name: str, attrs: dict) -> None:
    r.emit("GatherND", [node.input[0], node.input[1]], [node.output[0]], name,
           {"batch_dims": str(int(attrs.get("batch_dims", 0)))}, version="opset8")


@translates("ScatterElements", "Scatter")
def _scatter_elements(r, node, name: str, attrs: dict) -> None:
    reduction = text_attr(r, attrs, "reduction", "none", tuple(_REDUCTIONS))
    axis = axis_in(r, int(attrs.get("axis", 0)), rank_of(r, node.input[0], node.op_type))
    r.emit("ScatterElementsUpdate",
           [node.input[0], node.input[1], node.input[2],
            r.const(f"{name}/axis", np.array(axis, np.int64))], [node.output[0]], name,
           {"reduction": _REDUCTIONS[reduction]}, version="opset12")


@translates("ScatterND")
def _scatter_nd(r, node, name: str, attrs: dict) -> None:
    reduction = text_attr(r, attrs, "reduction", "none", tuple(_REDUCTIONS))
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
