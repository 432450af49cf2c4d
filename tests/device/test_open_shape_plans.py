"""A model whose inputs leave a dimension open: each plan decides its rewrites and fusions on
its own shapes (runtime/compile/network.py, _graph_for). What the load says once stays said once,
a fusion asked for that finds nothing says so at the first plan, a declared shape the plan's
shapes contradict is refused as for a static model, and a run of an empty batch prints its
outputs without a traceback."""
from __future__ import annotations

import os

import numpy as np
import pytest

from customlayers.api import Registry
from customlayers.cli import main as cli_main
from customlayers.errors import CustomLayersError, InputFileError, PackageError
from customlayers.runtime.compile.network import Network
from customlayers.runtime.device.device import Engine

TEST_DEVICE = os.environ.get("CUSTOMLAYERS_TEST_DEVICE", "CPU")   # as conftest.py reads it

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

RELU_XML = "examples/layers/relu/relu.xml"


def _save(tmp_path, nodes, inputs, outputs, inits=(), value_info=(), name="m"):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits), value_info=value_info)
    path = tmp_path / f"{name}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def _relu_block(tmp_path):
    """x [N, 4, 6, 6] -> Conv 3x3 -> Relu -> Add(x) -> Relu, the batch open."""
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((4, 4, 3, 3)) * 0.2).astype(np.float32)
    return _save(tmp_path, [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("Relu", ["c"], ["r"], name="relu1"),
        helper.make_node("Add", ["r", "x"], ["a"], name="add"),
        helper.make_node("Relu", ["a"], ["y"], name="relu2")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 6, 6])],
        [numpy_helper.from_array(w, "w")], name="block")


def test_a_custom_layers_override_is_said_once_whatever_the_plans(tmp_path, test_device):
    """The line that a loaded layer overrides a built-in is the load's, not one a plan: three
    batches, one line."""
    said = []
    engine = Engine(test_device)
    registry = Registry(engine)
    registry.load(RELU_XML)
    net = Network(str(_relu_block(tmp_path)), registry, engine, messages=said.append,
                  tuning="off")
    x = np.random.default_rng(4).standard_normal((3, 4, 6, 6)).astype(np.float32)
    for batch in (1, 2, 3):
        net.infer({"x": x[:batch]})
    assert sum("overrides the built-in ReLU" in m for m in said) == 1, said


def test_the_residual_of_an_open_batch_is_fused_per_plan(tmp_path, test_device):
    net = Network(str(_relu_block(tmp_path)), engine=Engine(test_device), tuning="off")
    x = np.random.default_rng(5).standard_normal((2, 4, 6, 6)).astype(np.float32)
    steps = [s.type for s in net.plan_for({"x": x.shape}).steps]
    assert steps == ["Convolution+relu+residual+relu"], steps
    plain = Network(str(_relu_block(tmp_path)), engine=Engine(test_device), fuse=False)
    np.testing.assert_allclose(net.infer({"x": x})["y"], plain.infer({"x": x})["y"],
                               rtol=1e-5, atol=1e-6)


def test_a_fusion_asked_for_that_finds_nothing_says_so_at_the_first_plan(tmp_path,
                                                                         test_device):
    said = []
    net = Network(str(_relu_block(tmp_path)), engine=Engine(test_device), tuning="off",
                  messages=said.append, fuse_attention=True)
    assert not any("fuse_attention" in m for m in said)      # decided on a plan's shapes
    x = np.ones((2, 4, 6, 6), np.float32)
    net.infer({"x": x})
    net.infer({"x": x[:1]})
    assert sum("fuse_attention: no attention matched" in m for m in said) == 1, said


def test_a_declared_shape_the_plans_shapes_contradict_is_refused(tmp_path, test_device):
    """x [N, 3, 4] -> Reshape [0, -1] -> Relu, the Reshape's output declared [1, 12]: a batch
    of 2 makes it [2, 12]; refused naming the layer, as for a model declared whole (ONNX
    Runtime runs it with a warning; an IR's declared shapes are the model's word)."""
    path = _save(tmp_path, [
        helper.make_node("Reshape", ["x", "s"], ["f"], name="flat"),
        helper.make_node("Relu", ["f"], ["y"], name="relu")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 12])],
        [numpy_helper.from_array(np.array([0, -1], np.int64), "s")],
        value_info=[helper.make_tensor_value_info("f", TensorProto.FLOAT, [1, 12])],
        name="declared")
    net = Network(str(path), engine=Engine(test_device), tuning="off")
    np.testing.assert_array_equal(net.infer({"x": np.ones((1, 3, 4), np.float32)})["y"],
                                  np.ones((1, 12), np.float32))
    with pytest.raises(CustomLayersError, match=r"flat.*declared as \[1, 12\].*\[2, 12\]"):
        net.infer({"x": np.ones((2, 3, 4), np.float32)})


def test_a_run_of_an_empty_batch_prints_its_outputs(tmp_path, capsys):
    np.save(tmp_path / "x0.npy", np.zeros((0, 4, 6, 6), np.float32))
    assert cli_main(["run", "-m", str(_relu_block(tmp_path)), "-i", str(tmp_path / "x0.npy"),
                     "-d", TEST_DEVICE, "--tuning", "off"]) == 0
    printed = capsys.readouterr()
    assert "y: shape [0, 4, 6, 6] float32  (no elements)" in printed.out
    assert "Traceback" not in printed.err


def test_a_missing_package_is_a_package_error_and_an_input_file_error(tmp_path, test_device):
    with pytest.raises(PackageError) as caught:
        Network(str(tmp_path / "nowhere.clpkg"), engine=Engine(test_device))
    assert isinstance(caught.value, InputFileError) and "nowhere.clpkg" in str(caught.value)


def test_an_empty_spatial_axis_is_named_as_such(tmp_path, test_device):
    """An input with no positions along the axis a convolution slides over (a sequence of
    length 0) is named as empty, not as a window that does not fit."""
    w = np.ones((3, 2, 3), np.float32)
    path = _save(tmp_path, [helper.make_node("Conv", ["x", "w"], ["y"], pads=[2, 0],
                                             name="causal")],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, "T"])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, "T"])],
                 [numpy_helper.from_array(w, "w")], name="seq")
    net = Network(str(path), engine=Engine(test_device), tuning="off")
    with pytest.raises(CustomLayersError, match=r"causal.*spatial axis 0 of its input is empty "
                                                r"\(size 0\)"):
        net.infer({"x": np.zeros((1, 2, 0), np.float32)})
