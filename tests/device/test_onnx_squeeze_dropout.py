"""Issue 18, wrong numbers from inputs the reader took for absent: a Squeeze whose axes are a
graph input squeezed every size-1 axis, and a Dropout ran as identity whatever its
training_mode. Now the axes are a value input (compiled in per value, as a Reshape target is)
and one computed at run time is refused; a true or run-time training_mode is refused as a
training op. ONNX models built with onnx.helper, compared with ONNX Runtime."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from customlayers.api import BindingError, ModelError, Network  # noqa: E402


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def _save(path: Path, nodes, inputs, inits=(), opset: int = 13) -> Path:
    graph = helper.make_graph(nodes, "g", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _onnxruntime(path: Path, feeds: dict) -> np.ndarray:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        ["y"], feeds)[0]


# -- Squeeze --------------------------------------------------------------------------------
def _squeeze_model(tmp_path) -> Path:
    """y = Relu(Squeeze(x, axes)) with `axes` a graph input."""
    return _save(tmp_path / "squeeze.onnx",
                 [helper.make_node("Squeeze", ["x", "axes"], ["s"]),
                  helper.make_node("Relu", ["s"], ["y"])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 1, 4]),
                  helper.make_tensor_value_info("axes", TensorProto.INT64, ["k"])])


def test_squeeze_axes_from_a_graph_input_squeeze_those_axes_only(tmp_path, engine):
    path = _squeeze_model(tmp_path)
    net = Network(path, engine=engine)
    assert list(net.value_inputs) == ["axes"]
    x = np.random.default_rng(0).standard_normal((1, 3, 1, 4)).astype(np.float32)
    for axes in ([0], [-2], [0, 2], [2, 0]):
        feeds = {"x": x, "axes": np.array(axes, np.int64)}
        got, want = net.infer(feeds)["y"], _onnxruntime(path, feeds)
        assert got.shape == want.shape, axes
        np.testing.assert_array_equal(got, want)


def test_squeeze_of_a_size_above_one_through_a_graph_input_is_refused(tmp_path, engine):
    net = Network(_squeeze_model(tmp_path), engine=engine)
    x = np.ones((1, 3, 1, 4), np.float32)
    with pytest.raises(BindingError, match=r"layer 's' \(type Squeeze\) at .*squeeze.onnx: node 0 "
                                           r"'s' \(Squeeze\): Squeeze: axis 1 of shape "
                                           r"\[1, 3, 1, 4\] has size 3"):
        net.infer({"x": x, "axes": np.array([1], np.int64)})


def test_squeeze_axes_computed_at_run_time_are_refused(tmp_path, engine):
    # a Convert layer computes the axes (shape arithmetic on a fed integer vector would not:
    # it is folded per value)
    path = _save(tmp_path / "computed.onnx",
                 [helper.make_node("Cast", ["a"], ["axes"], to=TensorProto.INT64),
                  helper.make_node("Squeeze", ["x", "axes"], ["y"])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 1, 1, 4]),
                  helper.make_tensor_value_info("a", TensorProto.FLOAT, [1])], [])
    with pytest.raises(ModelError, match=r"node 1 'y' \(Squeeze\): the axes \(input 1, 'axes'\) "
                                         r"must be a constant or a graph input"):
        Network(path, engine=engine)


# -- Dropout --------------------------------------------------------------------------------
def _dropout_model(tmp_path, mode_input: bool, mode_value=None) -> Path:
    """y = Dropout(x, ratio 0.5, training_mode): a graph input, an initializer of
    `mode_value`, or absent (neither)."""
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])]
    inits = [numpy_helper.from_array(np.array(0.5, np.float32), "ratio")]
    node_inputs = ["x", "ratio"]
    if mode_input:
        inputs.append(helper.make_tensor_value_info("mode", TensorProto.BOOL, []))
        node_inputs.append("mode")
    elif mode_value is not None:
        inits.append(numpy_helper.from_array(np.array(mode_value), "mode"))
        node_inputs.append("mode")
    nodes = [helper.make_node("Dropout", node_inputs, ["d"]),
             helper.make_node("Relu", ["d"], ["y"])]
    return _save(tmp_path / "dropout.onnx", nodes, inputs, inits)


@pytest.mark.parametrize("mode_value", [None, False], ids=["absent", "false"])
def test_inference_dropout_passes_its_input_through(tmp_path, engine, mode_value):
    path = _dropout_model(tmp_path, False, mode_value)
    x = np.random.default_rng(1).standard_normal((2, 8)).astype(np.float32)
    got = Network(path, engine=engine).infer({"x": x})["y"]
    np.testing.assert_array_equal(got, _onnxruntime(path, {"x": x}))


def test_training_mode_dropout_is_refused_as_a_training_op(tmp_path, engine):
    path = _dropout_model(tmp_path, False, True)
    with pytest.raises(ModelError, match=r"node 0 'd' \(Dropout\): training_mode \(input 2, "
                                         r"'mode'\) is true with ratio 0.5 \(input 1, "
                                         r"'ratio'\): training-mode Dropout .* is a training op"):
        Network(path, engine=engine)


def test_training_mode_given_at_run_time_is_compiled_in_per_value(tmp_path, engine):
    # a fed training_mode is a value input: false runs as inference; true with ratio 0.5
    # would draw a random mask, refused naming the node when the plan is compiled
    path = _dropout_model(tmp_path, True)
    net = Network(path, engine=engine)
    x = np.random.default_rng(2).standard_normal((2, 8)).astype(np.float32)
    np.testing.assert_array_equal(net.infer({"x": x, "mode": np.array(False)})["y"],
                                  np.maximum(x, 0))
    with pytest.raises(ModelError, match=r"node 0 'd' \(Dropout\): training_mode is true with "
                                         r"ratio 0.5: training-mode Dropout .* is a training op"):
        net.infer({"x": x, "mode": np.array(True)})
