"""Issue 18, wrong numbers of ONNX pooling: ceil_mode drops a last window that would start in
the end padding (in the reader's static shapes and in the op's own shapes, with symbolic dims),
AveragePool honours dilations and counts padding only up to pads_end, and what ONNX Runtime and
ONNX's shape inference disagree on is refused. ONNX models built with onnx.helper run by a
Network on the test device, compared with ONNX Runtime."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

from customlayers.api import ModelError, Network  # noqa: E402


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def _model(path: Path, nodes, x_dims, opset: int = 19) -> Path:
    """x (float, declared with `x_dims`: ints or names) -> nodes -> y (shape not declared)."""
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         x_dims)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    onnx.save(model, str(path))
    return path


def _check(engine, path: Path, x: np.ndarray) -> np.ndarray:
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        ["y"], {"x": x})[0]
    got = Network(path, engine=engine).infer({"x": x})["y"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    return got


DECLARED = {"static": lambda s: list(s), "symbolic-batch": lambda s: ["N"] + list(s[1:]),
            "symbolic-spatial": lambda s: list(s[:2]) + [f"d{i}" for i in range(len(s) - 2)]}


@pytest.mark.parametrize("declared", DECLARED)
@pytest.mark.parametrize("op,extra", [("MaxPool", {}), ("AveragePool", {}),
                                      ("AveragePool", {"count_include_pad": 1})],
                         ids=["max", "avg", "avg-count-pad"])
def test_ceil_mode_drops_a_last_window_starting_in_the_end_padding(tmp_path, engine, declared,
                                                                    op, extra):
    x = np.random.default_rng(1).standard_normal((1, 1, 2, 2)).astype(np.float32)
    node = helper.make_node(op, ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2],
                            pads=[0, 0, 1, 1], ceil_mode=1, **extra)
    got = _check(engine, _model(tmp_path / "pool.onnx", [node], DECLARED[declared](x.shape)), x)
    assert got.shape == (1, 1, 1, 1)


@pytest.mark.parametrize("declared", DECLARED)
def test_ceil_mode_pools_in_a_chain_and_the_values_after_them(tmp_path, engine, declared):
    """The second pool's input is the first's corrected shape; a Relu and a Flatten after."""
    x = np.random.default_rng(2).standard_normal((2, 3, 7, 9)).astype(np.float32)
    nodes = [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[3, 3], strides=[3, 3],
                              pads=[1, 1, 2, 2], ceil_mode=1),
             helper.make_node("AveragePool", ["p"], ["q"], kernel_shape=[2, 2], strides=[2, 2],
                              pads=[1, 0, 1, 1], ceil_mode=1, count_include_pad=1),
             helper.make_node("Relu", ["q"], ["r"]),
             helper.make_node("Flatten", ["r"], ["y"])]
    _check(engine, _model(tmp_path / "chain.onnx", nodes, DECLARED[declared](x.shape)), x)


def test_indices_of_a_ceil_mode_max_pool_have_its_output_shape(tmp_path, engine):
    x = np.random.default_rng(3).standard_normal((1, 2, 3, 3)).astype(np.float32)
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2], strides=[2, 2],
                            pads=[1, 1, 1, 1], ceil_mode=1)
    path = tmp_path / "idx.onnx"
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, list(x.shape))], [
        helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
        helper.make_tensor_value_info("i", TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    onnx.save(model, str(path))
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})
    got = Network(path, engine=engine).infer({"x": x})
    np.testing.assert_allclose(got["y"], want[0], rtol=1e-6)
    np.testing.assert_array_equal(got["i"], want[1])


AVG_CASES = [
    # input shape, attributes
    ((1, 2, 7, 7), dict(kernel_shape=[3, 3], strides=[1, 1], dilations=[2, 2])),
    ((1, 2, 7, 7), dict(kernel_shape=[3, 3], strides=[1, 1], pads=[2, 2, 2, 2],
                        dilations=[2, 2])),
    ((1, 2, 8, 8), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 2, 2],
                        dilations=[2, 2], ceil_mode=1)),
    ((1, 2, 7, 9), dict(kernel_shape=[2, 3], strides=[2, 1], pads=[1, 0, 1, 2],
                        dilations=[3, 2], ceil_mode=1)),
    ((1, 2, 6, 6), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)),
    ((2, 1, 9), dict(kernel_shape=[3], strides=[2], pads=[1, 2], dilations=[2], ceil_mode=1)),
    ((1, 1, 5, 6, 7), dict(kernel_shape=[2, 2, 3], strides=[1, 2, 2], pads=[1, 0, 1, 0, 1, 1],
                           dilations=[2, 1, 2])),
]


@pytest.mark.parametrize("count_pad", [0, 1], ids=["exclude-pad", "count-pad"])
@pytest.mark.parametrize("shape,attrs", AVG_CASES, ids=[str(i) for i in range(len(AVG_CASES))])
def test_average_pool_dilations_and_padding_count_match_onnxruntime(tmp_path, engine, shape,
                                                                    attrs, count_pad):
    x = np.random.default_rng(4).standard_normal(shape).astype(np.float32)
    node = helper.make_node("AveragePool", ["x"], ["y"], count_include_pad=count_pad, **attrs)
    _check(engine, _model(tmp_path / "avg.onnx", [node], list(shape)), x)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_max_pool_dilations_and_valid_with_ceil_mode_match_onnxruntime(tmp_path, engine, op):
    x = np.random.default_rng(5).standard_normal((1, 2, 7, 8)).astype(np.float32)
    for k, attrs in enumerate([dict(kernel_shape=[2, 3], strides=[2, 2], auto_pad="VALID",
                                    ceil_mode=1),
                               dict(kernel_shape=[3, 2], strides=[2, 3], pads=[2, 1, 2, 1],
                                    dilations=[2, 3], ceil_mode=1)]):
        node = helper.make_node(op, ["x"], ["y"], **attrs)
        _check(engine, _model(tmp_path / f"{k}.onnx", [node], ["N", 2, 7, 8]), x)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_same_auto_pad_with_dilations_is_refused(tmp_path, engine, op):
    """ONNX's shape inference pads for the dilated window, ONNX Runtime for the undilated one
    (7x7, kernel 3, dilation 2, stride 2: 4x4 against 3x3)."""
    node = helper.make_node(op, ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                            dilations=[2, 2], auto_pad="SAME_UPPER")
    path = _model(tmp_path / "same.onnx", [node], [1, 1, 7, 7])
    with pytest.raises(ModelError, match=r"node 0 'y' \((MaxPool|AveragePool)\): "
                                         r"auto_pad=SAME_UPPER with dilations \[2, 2\] is not "
                                         r"supported .*give explicit pads"):
        Network(path, engine=engine)
