"""The ONNX translations of the elementwise ops on data (graph/onnx/ops/logic.py, CastLike in
fold.py), without a device: which IR op each becomes, the element type its output is given
(a boolean held as u8, Where's the values' type), a model output declared bool marked so, and
the same ops on constants still folded at load."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from customlayers.graph.fold_eval import FOLD_TYPE  # noqa: E402
from customlayers.graph.onnx.reader import read_onnx  # noqa: E402

F, I64, B, U8 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL, TensorProto.UINT8


def _read(tmp_path, nodes, inputs, outputs, inits=(), opset=18):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*o) for o in outputs],
                              list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    return read_onnx(path)


def _node(g, name):
    return next(n for n in g if n.name == name)


@pytest.mark.parametrize("op, ir_op", [("Equal", "Equal"), ("LessOrEqual", "LessEqual"),
                                        ("GreaterOrEqual", "GreaterEqual"),
                                        ("Xor", "LogicalXor")])
def test_a_comparison_on_data_is_the_ir_op_with_a_u8_result(tmp_path, op, ir_op):
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node(op, ["r", "x"], ["m"], name="cmp"),
             helper.make_node("Cast", ["m"], ["y"], to=F)]
    g = _read(tmp_path, nodes, [("x", F, [2, 3])], [("y", F, None)])
    node = _node(g, "cmp")
    assert node.type == ir_op and node.outputs[0].dtype == "u8"
    assert node.attrs["auto_broadcast"] == "numpy"


def test_where_on_data_is_a_select_of_the_values_type(tmp_path):
    nodes = [helper.make_node("IsNaN", ["x"], ["m"], name="nan"),
             helper.make_node("Where", ["m", "zero", "x"], ["y"], name="where")]
    g = _read(tmp_path, nodes, [("x", F, [2, 3])], [("y", F, None)],
              [numpy_helper.from_array(np.float32(0), "zero")])
    assert _node(g, "nan").type == "IsNaN" and _node(g, "nan").outputs[0].dtype == "u8"
    where = _node(g, "where")
    assert where.type == "Select" and where.outputs[0].dtype == "f32"


def test_a_model_output_declared_bool_is_marked_on_its_result(tmp_path):
    nodes = [helper.make_node("Less", ["x", "x2"], ["y"]),
             helper.make_node("Relu", ["x"], ["z"])]
    g = _read(tmp_path, nodes, [("x", F, [2]), ("x2", F, [2])], [("y", B, [2]), ("z", F, [2])])
    marks = {n.inputs[0].names[0]: n.attrs.get("boolean") for n in g if n.type == "Result"}
    assert marks == {"y": "true", "z": None}


@pytest.mark.parametrize("direction, ir_op", [("LEFT", "BitwiseLeftShift"),
                                              ("RIGHT", "BitwiseRightShift")])
def test_bit_shift_takes_its_direction(tmp_path, direction, ir_op):
    nodes = [helper.make_node("BitShift", ["x", "s"], ["y"], name="shift", direction=direction)]
    g = _read(tmp_path, nodes, [("x", U8, [4]), ("s", U8, [4])], [("y", U8, [4])])
    assert _node(g, "shift").type == ir_op


@pytest.mark.parametrize("like, destination", [(B, "boolean"), (U8, "u8"), (I64, "i64")])
def test_cast_like_on_data_is_a_convert_to_the_likes_type(tmp_path, like, destination):
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("CastLike", ["r", "like"], ["y"], name="cast")]
    g = _read(tmp_path, nodes, [("x", F, [2]), ("like", like, [1])], [("y", like, [2])])
    node = _node(g, "cast")
    assert node.type == "Convert" and node.attrs["destination_type"] == destination


def test_the_same_ops_on_constants_fold_at_load(tmp_path):
    nodes = [helper.make_node("Greater", ["a", "b"], ["m"]),
             helper.make_node("Not", ["m"], ["n"]),
             helper.make_node("Where", ["n", "a", "b"], ["w"]),
             helper.make_node("Add", ["x", "w"], ["y"])]
    inits = [numpy_helper.from_array(np.array([1, 5], np.int64), "a"),
             numpy_helper.from_array(np.array([3, 2], np.int64), "b")]
    # (x is data: a [3, 2] tensor; a small 1-D integer input beside constants would be read
    # by value, compiled in per value given, as a fed shape vector is)
    g = _read(tmp_path, nodes, [("x", I64, [3, 2])], [("y", I64, [3, 2])], inits)
    assert {n.type for n in g} == {"Parameter", "Const", "Add", "Result"}
    assert not [n for n in g if n.type == FOLD_TYPE]
    const = next(n for n in g if n.type == "Const")
    assert const.value.tolist() == [1, 2]
