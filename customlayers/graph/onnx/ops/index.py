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
