"""ops/nn/causal_conv.py without a device: one program per variant for every shape (the sizes
are kernel arguments), both outputs from one launch, and the shapes it refuses."""
from __future__ import annotations

import pytest

from customlayers.errors import BindingError
from customlayers.jit.tensor import TensorDesc
from customlayers.ops import get_op

OP = get_op("CausalConvWithState")
ATTRS = OP.parse_attributes({"activation": "silu", "has_bias": "true",
                             "has_past_state": "true"}, "ccs")


def _descs(n, c, length, k, past_k=None):
    return [TensorDesc((n, c, length), "f32"), TensorDesc((c, 1, k), "f32"),
            TensorDesc((c,), "f32"), TensorDesc((n, c, (past_k or k) - 1), "f32")]


def _launch(n, c, length, k):
    inputs = _descs(n, c, length, k)
    outputs = [TensorDesc(s, d) for s, d in OP.infer_shapes(ATTRS, inputs, {})]
    (launch,) = OP.launches(ATTRS, inputs, outputs, {})
    return outputs, launch


def test_one_program_for_every_shape_and_one_launch_for_both_outputs():
    (y, state), a = _launch(2, 3, 1, 4)
    assert y.shape == (2, 3, 1) and state.shape == (2, 3, 3)
    _, b = _launch(5, 7, 100, 9)
    assert a.source == b.source and a.entry == b.entry == "causal_conv_with_state"
    assert [arg.kind for arg in a.args] == ["input"] * 4 + ["output"] * 2 + ["scalar"] * 4
    assert [int(arg.value) for arg in b.args[6:]] == [35, 7, 100, 9]
    assert b.global_size[0] >= 5 * 7 * (100 + 8)


@pytest.mark.parametrize("descs,words", [
    (_descs(2, 3, 5, 4, past_k=3), "past_state must be [2, 3, 3]"),
    (_descs(2, 3, 5, 4)[:3], "expected 4 inputs (input, weight, bias, past_state), found 3"),
    ([TensorDesc((2, 3, 5), "f32"), TensorDesc((3, 1, 4), "f32"), TensorDesc((3,), "f16"),
      TensorDesc((2, 3, 3), "f32")], "share one element type"),
])
def test_bad_shapes_and_types_are_refused(descs, words):
    with pytest.raises(BindingError, match="CausalConvWithState") as info:
        OP.infer_shapes(ATTRS, descs, {})
    assert words in str(info.value)


def test_integer_tensors_are_refused():
    attrs = OP.parse_attributes({}, "ccs")
    with pytest.raises(BindingError, match="one element type of f32, f64, f16"):
        OP.infer_shapes(attrs, [TensorDesc((1, 2, 3), "i32"), TensorDesc((2, 1, 2), "i32")], {})


def _onnx_model(tmp_path, opset: int):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    nodes = [helper.make_node("CausalConvWithState", ["x", "w"], ["c", "state"], name="ccs"),
             helper.make_node("Relu", ["c"], ["y"], name="relu")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5]),
                     helper.make_tensor_value_info("w", TensorProto.FLOAT, [2, 1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("state", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    path = tmp_path / f"opset{opset}.onnx"
    onnx.save(model, str(path))
    return path


def test_an_opset_27_model_reads_with_each_op_checked_against_its_opset(tmp_path):
    from customlayers.errors import ModelError
    from customlayers.graph.onnx.reader import read_onnx
    graph = read_onnx(_onnx_model(tmp_path, 27))
    conv = next(n for n in graph if n.type == "CausalConvWithState")
    assert conv.attrs == {"activation": "none", "has_bias": "false", "has_past_state": "false"}
    assert [p.shape for p in conv.outputs] == [(1, 2, 5), (1, 2, 2)]
    with pytest.raises(ModelError, match="CausalConvWithState is not an op of opset 26"):
        read_onnx(_onnx_model(tmp_path, 26))
