"""Models whose MatMuls read through folded views (passes/view_folding.py) at the edges of what
folds, through a Network against ONNX Runtime: a B of batch 1 with a Transpose after the
MatMul (the rows rule the fold and the MatMul share), scalar factors that are not finite (against numpy: ONNX Runtime folds those too)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from customlayers.api import Network  # noqa: E402
from customlayers.graph.onnx.reader import read_onnx  # noqa: E402


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def _run(tmp_path, engine, nodes, inputs, inits, out_shape, feeds):
    """(ours, ONNX Runtime's) output "z" of the graph."""
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(v.shape))
                     for n, v in inputs.items()],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, list(out_shape))],
        [numpy_helper.from_array(v, n) for n, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = Network(read_onnx(path), engine=engine).infer(feeds)
    return got["z"], want[0]


@pytest.mark.parametrize("b_shape", [(1, 1, 6, 5), (1, 6, 5)])
def test_a_batch_one_b_and_a_transpose_after_the_matmul(tmp_path, engine, b_shape):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3, 4, 6)).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["a", "b"], ["m"]),
             helper.make_node("Transpose", ["m"], ["t"], perm=[1, 0, 2, 3]),
             helper.make_node("Relu", ["t"], ["z"])]
    got, want = _run(tmp_path, engine, nodes, {"a": a}, {"b": b}, (3, 2, 4, 5), {"a": a})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("factor", [float("nan"), float("inf")])
def test_a_scale_that_is_not_finite_gives_what_the_layers_give(tmp_path, engine, factor):
    """x * NaN before a MatMul is NaN everywhere (a folded NaN factor was written as
    -INFINITY); x * inf summed over signs is NaN where the sum times inf is not."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    w = rng.standard_normal((6, 5)).astype(np.float32)
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
             helper.make_node("Mul", ["t", "c"], ["s"]),
             helper.make_node("Transpose", ["s"], ["u"], perm=[1, 0]),
             helper.make_node("MatMul", ["u", "w"], ["z"])]
    got, _ = _run(tmp_path, engine, nodes, {"x": x},
                  {"w": w, "c": np.array(factor, np.float32)}, (4, 5), {"x": x})
    # numpy's, of the layers as written (ONNX Runtime folds the Mul into its MatMul's scale)
    with np.errstate(invalid="ignore"):
        want = (x.astype(np.float64) * factor) @ w
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(got)], want[~np.isnan(want)])
