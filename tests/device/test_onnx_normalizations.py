"""Issue 20 item 2, the transformers' normalizations: ONNX LayerNormalization (opset 17) and
RMSNormalization (opset 23), decomposed at load (graph/onnx/ops/norm.py), on the shapes a
ViT/BERT block gives them, against ONNX Runtime (LayerNormalization, with its Mean and
InvStdDev outputs) and numpy (RMSNormalization, newer than this ONNX Runtime's opsets)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from customlayers.api import Network  # noqa: E402
from customlayers.graph.onnx.reader import read_onnx  # noqa: E402

F = TensorProto.FLOAT
RNG = np.random.default_rng(7)


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def _model(path: Path, node, shape, inits, outputs, opset: int) -> Path:
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", F, shape)],
                              [helper.make_tensor_value_info(o, F, None) for o in outputs],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("shape,axis,bias,stats", [
    ((1, 197, 64), -1, True, False),      # a ViT token row
    ((2, 16, 32), -1, False, True),       # no bias; Mean and InvStdDev asked for
    ((2, 3, 4, 5), 1, True, True),        # over the last three axes
])
def test_layer_normalization_matches_onnx_runtime(tmp_path, engine, shape, axis, bias, stats):
    norm_shape = shape[axis % len(shape):]
    inits = {"scale": RNG.standard_normal(norm_shape).astype(np.float32)}
    if bias:
        inits["bias"] = RNG.standard_normal(norm_shape).astype(np.float32)
    outputs = ["y", "mean", "inv_std"] if stats else ["y"]
    node = helper.make_node("LayerNormalization", ["x", "scale"] + (["bias"] if bias else []),
                            outputs, axis=axis, epsilon=1e-5)
    path = _model(tmp_path / "ln.onnx", node, shape, inits, outputs, 17)
    x = RNG.standard_normal(shape).astype(np.float32) * 3 + 1
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})
    got = Network(read_onnx(path), engine=engine).infer({"x": x})
    for name, w in zip(outputs, want):
        np.testing.assert_allclose(got[name], w, rtol=1e-4, atol=1e-5, err_msg=name)


def test_layer_normalization_with_open_leading_axes_is_one_kernel(tmp_path, engine):
    """A batch and a sequence length left open (torch's dynamic axes) still give the one
    LayerNorm kernel, planned per request's shapes (a new user's model: the decomposition's 9
    kernels had cost it 20 us against 5)."""
    inits = {"scale": RNG.standard_normal(8).astype(np.float32),
             "bias": RNG.standard_normal(8).astype(np.float32)}
    node = helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["y", "mean"],
                            axis=-1, epsilon=1e-5)
    path = _model(tmp_path / "ln.onnx", node, ["N", "T", 8], inits, ["y", "mean"], 17)
    net = Network(read_onnx(path), engine=engine)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for shape in ((2, 5, 8), (3, 1, 8)):
        assert [s.type for s in net.plan_for({"x": shape}).steps] == ["LayerNorm"]
        x = RNG.standard_normal(shape).astype(np.float32)
        got = net.infer({"x": x})
        for name, want in zip(("y", "mean"), session.run(None, {"x": x})):
            np.testing.assert_allclose(got[name], want, rtol=1e-4, atol=1e-5, err_msg=name)


def test_rms_normalization_matches_numpy(tmp_path, engine):
    shape = (2, 8, 48)
    scale = RNG.standard_normal(48).astype(np.float32)
    node = helper.make_node("RMSNormalization", ["x", "scale"], ["y"], axis=-1, epsilon=1e-6)
    path = _model(tmp_path / "rms.onnx", node, shape, {"scale": scale}, ["y"], 23)
    x = RNG.standard_normal(shape).astype(np.float32)
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64 * x64).mean(axis=-1, keepdims=True) + 1e-6) * scale
    got = Network(read_onnx(path), engine=engine).infer({"x": x})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_layer_normalizations_of_other_epsilons_and_lengths_share_one_program(tmp_path,
                                                                              test_device):
    """epsilon and the row length are kernel arguments: LayerNormalization over 32 and over
    4 x 32 values, of epsilons 1e-5, 1e-2 and 0.5, is one program (a fresh program cache
    misses once), each right against ONNX Runtime."""
    from customlayers.runtime.device.cache import ProgramCache
    from customlayers.runtime.device.device import Engine
    shape = (2, 4, 32)
    inits, nodes, outputs = {}, [], []
    for k, (axis, eps) in enumerate([(-1, 1e-5), (-1, 1e-2), (1, 0.5)]):
        norm_shape = shape[axis % 3:]
        inits[f"s{k}"] = RNG.standard_normal(norm_shape).astype(np.float32)
        inits[f"b{k}"] = RNG.standard_normal(norm_shape).astype(np.float32)
        nodes.append(helper.make_node("LayerNormalization", ["x", f"s{k}", f"b{k}"], [f"y{k}"],
                                      axis=axis, epsilon=eps))
        outputs.append(f"y{k}")
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, shape)],
                              [helper.make_tensor_value_info(o, F, None) for o in outputs],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "ln3.onnx"))
    x = (RNG.standard_normal(shape) * 0.2).astype(np.float32)
    engine = Engine(test_device, cache=ProgramCache(tmp_path / "cache"))
    got = Network(read_onnx(tmp_path / "ln3.onnx"), engine=engine, tuning="off").infer({"x": x})
    assert engine.cache.misses == 1
    want = ort.InferenceSession(str(tmp_path / "ln3.onnx"),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})
    for name, w in zip(outputs, want):
        np.testing.assert_allclose(got[name], w, rtol=1e-4, atol=1e-5, err_msg=name)
