"""Issue 20 item 2, transformer pieces beyond the normalizations: ONNX Gelu (opset 20, both
approximations) and Trilu (a causal mask: lower triangle of a score matrix, constant k) against
ONNX Runtime."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from customlayers.api import Network  # noqa: E402
from customlayers.graph.onnx.reader import read_onnx  # noqa: E402

RNG = np.random.default_rng(11)


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def _run_both(path: Path, engine, x: np.ndarray):
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    got = Network(read_onnx(path), engine=engine).infer({"x": x})["y"]
    return got, want


def _model(path: Path, node, shape, elem, inits=(), opset=20) -> Path:
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", elem, shape)],
                              [helper.make_tensor_value_info("y", elem, None)], list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_matches_onnx_runtime(tmp_path, engine, approximate):
    node = helper.make_node("Gelu", ["x"], ["y"], approximate=approximate)
    path = _model(tmp_path / "gelu.onnx", node, [2, 7, 64], TensorProto.FLOAT)
    x = (RNG.standard_normal((2, 7, 64)) * 3).astype(np.float32)
    got, want = _run_both(path, engine, x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("upper,k,elem,dtype", [
    (0, 0, TensorProto.FLOAT, np.float32),    # the causal mask of a decoder block
    (1, 1, TensorProto.FLOAT, np.float32),
    (0, -2, TensorProto.INT64, np.int64),
])
def test_trilu_matches_onnx_runtime(tmp_path, engine, upper, k, elem, dtype):
    node = helper.make_node("Trilu", ["x", "k"], ["y"], upper=upper)
    k_init = numpy_helper.from_array(np.array(k, np.int64), "k")
    path = _model(tmp_path / "trilu.onnx", node, [2, 5, 6], elem, [k_init], opset=17)
    x = (RNG.standard_normal((2, 5, 6)) * 10).astype(dtype)
    got, want = _run_both(path, engine, x)
    np.testing.assert_array_equal(got, want)
