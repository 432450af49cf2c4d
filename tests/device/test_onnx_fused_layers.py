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


def test_the_tuners_walk_and_the_compile_fold_a_layers_weights_once(tmp_path, engine):
    """The tuner's walk of the layers (build_ahead) and the compile after it share the weights
    scaled by a fused BatchNormalization (compile_plan's `folded`): the compile takes the walk's
    array, whose values are the float64 product rounded once; a layer whose weights are another
    array, or whose scale is another, is folded anew; the network's output matches ONNX
    Runtime."""
    from customlayers.runtime.compile.compiler import compile_plan
    rng = np.random.default_rng(5)
    c, o = 3, 8
    inits = {"w": rng.standard_normal((o, c, 3, 3)), "s": rng.uniform(0.5, 2, o),
             "b": rng.standard_normal(o), "m": rng.standard_normal(o),
             "v": rng.uniform(0.5, 2, o)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"]),
             helper.make_node("Relu", ["n"], ["y"])]
    path = _save(tmp_path, nodes, (1, c, 6, 6), (1, o, 6, 6), inits, "conv_bn")
    net = Network(path, engine=engine, tuning="off")
    shapes = {"x": (1, c, 6, 6)}
    graph, order, impls, fusion = net._graph_for(shapes, {})
    memo: dict = {}
    walk = compile_plan(graph, order, impls, fusion, net.engine, net._options, shapes, {},
                        layers_only=True, folded=memo)
    assert walk is None and len(memo) == 1
    (weights, scale, folded), = memo.values()
    plan = compile_plan(graph, order, impls, fusion, net.engine, net._options, shapes, {},
                        folded=memo)
    kept = [v for k, v in plan.consts.items() if k[0] == "folded_weights"]
    assert len(kept) == 1 and kept[0] is folded
    want = (weights.astype(np.float64) * scale.reshape(-1, 1, 1, 1)).astype(np.float32)
    assert np.array_equal(folded, want)
    # an entry for other weights, or for these weights with another scale, is not taken: the
    # layer folds its own
    node_id = next(iter(memo))
    for stale in ((weights.copy(), scale), (weights, scale * 2)):
        memo[node_id] = (*stale, np.zeros_like(folded))
        again = compile_plan(graph, order, impls, fusion, net.engine, net._options, shapes, {},
                             folded=memo)
        refolded = [v for k, v in again.consts.items() if k[0] == "folded_weights"][0]
        assert np.array_equal(refolded, want) and memo[node_id][2] is refolded
    x = rng.standard_normal((1, c, 6, 6)).astype(np.float32)
    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        ["y"], {"x": x})[0]
    np.testing.assert_allclose(net.infer({"x": x})["y"], ref, rtol=1e-5, atol=1e-5)
