"""passes/gelu_folding.py: the exporters' five-layer erf GELU becomes one Gelu layer, only where
the layers are exactly that chain (device-free: the graph read from ONNX, then the pass)."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from customlayers.graph.onnx.reader import read_onnx  # noqa: E402
from customlayers.passes.gelu_folding import fold_gelu_chains  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import transformer_models as tm  # noqa: E402


def _types(graph) -> list[str]:
    return [n.type for n in graph]


def _gelu_model(tmp_path: Path, order: str = "x_first", divisor: float = math.sqrt(2.0),
                one: float = 1.0, extra_reader: bool = False, to_output: bool = False):
    """Relu -> GELU chain -> Relu (the chain's end read by a layer unless `to_output`)."""
    c = lambda v, n: numpy_helper.from_array(np.array(v, np.float32), n)  # noqa: E731
    nodes = [helper.make_node("Relu", ["in"], ["x"]),
             helper.make_node("Div", ["x", "sqrt2"], ["d"]),
             helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["a"])]
    if order == "x_first":
        nodes += [helper.make_node("Mul", ["x", "a"], ["m"]),
                  helper.make_node("Mul", ["m", "half"], ["g"])]
    elif order == "half_of_sum":                     # the dynamo exporter's order
        nodes += [helper.make_node("Mul", ["half", "a"], ["h"]),
                  helper.make_node("Mul", ["x", "h"], ["g"])]
    else:
        nodes += [helper.make_node("Mul", ["x", "half"], ["h"]),
                  helper.make_node("Mul", ["h", "a"], ["g"])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])]
    nodes.append(helper.make_node("Identity" if to_output else "Relu", ["g"], ["y"]))
    if extra_reader:
        nodes.append(helper.make_node("Neg", ["d"], ["z"]))
        outputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 8]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("in", TensorProto.FLOAT,
                                                                         [2, 8])], outputs,
                              [c(divisor, "sqrt2"), c(one, "one"), c(0.5, "half")])
    path = tmp_path / "gelu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return read_onnx(path)


@pytest.mark.parametrize("order", ["x_first", "half_first", "half_of_sum"])
def test_the_chain_becomes_one_gelu(tmp_path, order):
    graph, notes = fold_gelu_chains(_gelu_model(tmp_path, order), lambda n: True)
    types = _types(graph)
    assert types.count("Gelu") == 1 and "Erf" not in types and "Divide" not in types
    assert "Multiply" not in types and "Add" not in types
    gelu = next(n for n in graph if n.type == "Gelu")
    assert gelu.attrs == {"approximation_mode": "erf"}
    (src, _), = [graph.producer(gelu.id, 0)]
    assert graph.nodes[src].type == "ReLU"
    assert len(notes) == 1


@pytest.mark.parametrize("change", [dict(divisor=2.0), dict(one=2.0), dict(extra_reader=True),
                                    dict(to_output=True), dict(order="half_of_sum", one=2.0)])
def test_anything_else_is_left_alone(tmp_path, change):
    # another constant, a link read elsewhere, or the end a graph output: not the chain
    graph = _gelu_model(tmp_path, **change)
    folded, notes = fold_gelu_chains(graph, lambda n: True)
    assert folded is graph and notes == []


def test_a_custom_layer_in_the_chain_is_left_alone(tmp_path):
    graph = _gelu_model(tmp_path)
    folded, _ = fold_gelu_chains(graph, lambda n: n.type != "Erf")
    assert folded is graph


def test_every_block_of_a_vit_folds(tmp_path):
    model, _ = tm.vit(depth=3)
    path = tmp_path / "vit.onnx"
    onnx.save(model, str(path))
    graph, notes = fold_gelu_chains(read_onnx(path), lambda n: True)
    assert _types(graph).count("Gelu") == 3 and "Erf" not in _types(graph)
    assert len(notes) == 3
