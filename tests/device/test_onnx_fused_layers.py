"""Layers the compiler fuses or folds, against ONNX Runtime, on the shapes where the fused form
could differ from the layers it replaces:
- a bias (and ReLU) fused into a MatMul's store (passes/fusion.py, ops/nn/matmul.py) where the
  fused channel is not the GEMM's column: a 1-D B, whose output's last axis is A's rows (with
  A's batches folded into M, those rows count every batch's: the bias must be read at the row
  within its batch, not past its end);
- the erf GELU chain (passes/gelu_folding.py) whose one-valued constants have more axes than x
  and so broadcast it to a higher rank: one Gelu layer would keep x's rank."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from customlayers.api import Network  # noqa: E402

SQRT2 = np.float32(1.4142135)


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("ashape", [(2, 3, 4, 7), (5, 4, 7), (2, 1, 33, 7)])
def test_a_bias_after_a_matmul_by_a_vector_matches_onnxruntime(tmp_path, engine, ashape, relu):
    rng = np.random.default_rng(12)
    w = rng.standard_normal(ashape[-1]).astype(np.float32)
    bias = rng.standard_normal(ashape[-2]).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["a" if relu else "y"])]
    if relu:
        nodes.append(helper.make_node("Relu", ["a"], ["y"]))
    graph = helper.make_graph(
        nodes, "mv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ashape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ashape[:-1])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "b")])
    path = tmp_path / "mv.onnx"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8          # what older ONNX Runtime builds (the GPU machine's) read
    onnx.save(model, path)
    x = rng.standard_normal(ashape).astype(np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        ["y"], {"x": x})[0]
    got = Network(path, engine=engine).infer({"x": x})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _save(tmp_path, nodes, x_shape, y_shape, inits, name):
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
        [numpy_helper.from_array(np.asarray(v, np.float32), n) for n, v in inits.items()])
    path = tmp_path / f"{name}.onnx"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8          # what older ONNX Runtime builds (the GPU machine's) read
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("const_shapes", [((1, 1), (), ()), ((), (1, 1), ()),
                                          ((), (), (1, 1, 1))])
def test_a_gelu_chain_whose_constants_broadcast_x_matches_onnxruntime(tmp_path, engine,
                                                                      const_shapes):
    sq, one, half = const_shapes
    nodes = [helper.make_node("Div", ["x", "sq"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["p"]),
             helper.make_node("Mul", ["x", "p"], ["m"]),
             helper.make_node("Mul", ["m", "half"], ["g"]), helper.make_node("Relu", ["g"], ["y"])]
    rank = max(1, *(len(s) for s in const_shapes))
    path = _save(tmp_path, nodes, [33], [1] * (rank - 1) + [33],
                 {"sq": np.full(sq, SQRT2), "one": np.ones(one), "half": np.full(half, 0.5)},
                 "gelu")
    x = np.random.default_rng(13).standard_normal(33).astype(np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        ["y"], {"x": x})[0]
    got = Network(path, engine=engine).infer({"x": x})["y"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("layer,x_shape,w_shape,bias_shape", [
    ("MatMul", (2, 3, 7), (7, 5), (1, 1, 1, 5)),     # a transformer's Linear, bias of rank 4
    ("Conv", (1, 2, 5, 5), (3, 2, 3, 3), (1, 3, 1, 1, 1)),   # a per-channel bias of rank 5
])
def test_a_bias_of_more_axes_than_the_layer_output_matches_onnxruntime(tmp_path, engine, layer,
                                                                      x_shape, w_shape,
                                                                      bias_shape):
    # the Add broadcasts the layer's output up to the bias's rank: not a bias to fuse
    rng = np.random.default_rng(14)
    nodes = [helper.make_node(layer, ["x", "w"], ["t"]), helper.make_node("Add", ["t", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"])]
    path = _save(tmp_path, nodes, list(x_shape), None,
                 {"w": rng.standard_normal(w_shape), "b": rng.standard_normal(bias_shape)},
                 "bias_up")
    x = rng.standard_normal(x_shape).astype(np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        ["y"], {"x": x})[0]
    got = Network(path, engine=engine).infer({"x": x})["y"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
