"""Value inputs: a graph input that a built-in op needs as a compile-time constant (a Reshape
target, an Expand shape) is compiled in by value. Each set of values is its own plan, cached
like a shape plan; results are checked against numpy on the test device."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from customlayers.errors import ModelError
from customlayers.graph.onnx.reader import read_onnx
from customlayers.runtime.compile.network import Network


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def _save(path: Path, nodes, inputs, outputs, inits=()) -> Path:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _reshape_model(tmp_path) -> Path:
    """y = Relu(Reshape(x, shape)) with `shape` a graph input."""
    return _save(tmp_path / "reshape.onnx",
                 [helper.make_node("Reshape", ["x", "shape"], ["r"]),
                  helper.make_node("Relu", ["r"], ["y"])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
                  helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])


def _expand_model(tmp_path) -> Path:
    """y = Expand(x, shape); s = shape + 1 (a kernel that also reads the value input)."""
    one = numpy_helper.from_array(np.array([1], np.int64), "one")
    return _save(tmp_path / "expand.onnx",
                 [helper.make_node("Expand", ["x", "shape"], ["y"]),
                  helper.make_node("Add", ["shape", "one"], ["s"])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 1]),
                  helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                  helper.make_tensor_value_info("s", TensorProto.INT64, None)], [one])


def test_reshape_target_from_a_graph_input_compiles_per_value(tmp_path, engine):
    net = Network(read_onnx(_reshape_model(tmp_path)), engine=engine)
    assert list(net.value_inputs) == ["shape"]
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    for target in ([6, 4], [4, -1], [6, 4]):
        got = net.infer({"x": x, "shape": np.array(target, np.int64)})["y"]
        np.testing.assert_array_equal(got, np.maximum(x.reshape(target), 0))
    assert len(net._plans) == 2        # [6, 4] the second time reuses its plan


def test_expand_shape_from_a_graph_input_compiles_per_value(tmp_path, engine):
    net = Network(read_onnx(_expand_model(tmp_path)), engine=engine)
    x = np.array([[1.0], [2.0], [3.0]], np.float32)     # [1, 5] expands it to [3, 5]
    for target in ([3, 4], [1, 5]):
        shape = np.array(target, np.int64)
        got = net.infer({"x": x, "shape": shape})
        np.testing.assert_array_equal(got["y"], x * np.ones(target, np.float32))
        np.testing.assert_array_equal(got["s"], shape + 1)
    plan = net.plan_for({"x": (3, 1), "shape": (2,)}, {"shape": np.array([3, 4])})
    assert [name for name, _ in plan.inputs] == ["x"]   # the value input has no input buffer
    assert len(net._plans) == 2


def test_input_values_compile_the_default_plan(tmp_path, engine):
    net = Network(read_onnx(_reshape_model(tmp_path)), engine=engine,
                  input_values={"shape": [12, 2]})
    assert net.plan.descs[net.plan.outputs[0][1]].shape == (12, 2)
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 12
    got = net.create_request().infer({"x": x, "shape": np.array([12, 2])})["y"]
    np.testing.assert_array_equal(got, np.maximum(x.reshape(12, 2), 0))


def test_a_value_input_needs_its_value(tmp_path, engine):
    net = Network(read_onnx(_reshape_model(tmp_path)), engine=engine)
    with pytest.raises(ModelError, match=r"the model's input\(s\) shape are compiled in by value"):
        net.plan
    with pytest.raises(ModelError, match=r"input 'shape' is input 1 of layer '\S+' \(Reshape\), "
                                         r"which is compiled in as a constant: give its value"):
        net.create_request({"x": (2, 3, 4), "shape": (2,)})


def test_a_large_value_input_is_refused(tmp_path, engine):
    net = Network(read_onnx(_reshape_model(tmp_path)), engine=engine)
    with pytest.raises(ModelError, match="expected at most 64 numbers, found 100 of type int64"):
        net.infer({"x": np.zeros((2, 3, 4), np.float32), "shape": np.ones(100, np.int64)})


def test_expand_of_shape_arithmetic_on_a_graph_input_compiles_per_value(tmp_path, engine):
    # Add(shape, 1) on a small integer graph input is shape arithmetic, folded per value
    one = numpy_helper.from_array(np.array([1], np.int64), "one")
    path = _save(tmp_path / "computed.onnx",
                 [helper.make_node("Add", ["shape", "one"], ["s"]),
                  helper.make_node("Expand", ["x", "s"], ["y"])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 1]),
                  helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [one])
    net = Network(read_onnx(path), engine=engine)
    x = np.array([[1.0], [2.0], [3.0]], np.float32)
    for target in ([2, 3], [0, 4]):
        got = net.infer({"x": x, "shape": np.array(target, np.int64)})["y"]
        np.testing.assert_array_equal(got, x * np.ones(np.array(target) + 1, np.float32))


def test_expand_of_a_shape_computed_by_a_layer_is_refused_by_the_reader(tmp_path):
    path = _save(tmp_path / "computed.onnx",
                 [helper.make_node("Relu", ["f"], ["r"]),
                  helper.make_node("Cast", ["r"], ["s"], to=TensorProto.INT64),
                  helper.make_node("Expand", ["x", "s"], ["y"])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 1]),
                  helper.make_tensor_value_info("f", TensorProto.FLOAT, [2])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    with pytest.raises(ModelError, match=r"computed.onnx: node 2 .*the shape \(input 1, 's'\) "
                                         r"must be a constant or a graph input"):
        read_onnx(path)


def test_run_and_benchmark_commands_take_the_values_from_the_inputs(tmp_path, capsys, engine):
    from customlayers.cli import main
    model = _reshape_model(tmp_path)
    x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "shape.npy", np.array([4, 6], np.int64))
    dev = ["-d", engine.device.name]
    inputs = ["-i", f"x={tmp_path / 'x.npy'}", "-i", f"shape={tmp_path / 'shape.npy'}"]
    out = tmp_path / "y.npz"
    assert main(["run", *dev, "-m", str(model), *inputs, "-o", str(out)]) == 0
    np.testing.assert_array_equal(np.load(out)["y"], np.maximum(x.reshape(4, 6), 0))
    assert main(["benchmark", *dev, "-m", str(model), *inputs, "-niter", "2", "-nireq", "2"]) == 0
    assert "throughput" in capsys.readouterr().out
