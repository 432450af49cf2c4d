"""Zero-size tensors (a 0 dim, as ONNX allows) through read_onnx and Network: an empty graph
input and output, Concat with an empty part, a Reduce over an empty axis (the reduction's
identity), Split with a zero part, Slice selecting nothing, Reshape with allowzero, the request
API and the CLI's run. Each result against ONNX Runtime; a layer that cannot take an empty input
is refused naming it."""
from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T, helper

from customlayers.cli import main as cli_main
from customlayers.errors import CustomLayersError
from customlayers.graph.onnx.reader import read_onnx
from customlayers.runtime.compile.network import Network

TEST_DEVICE = os.environ.get("CUSTOMLAYERS_TEST_DEVICE", "CPU")   # as conftest.py reads it
X = np.random.default_rng(3).standard_normal((2, 3)).astype(np.float32)


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def _model(tmp_path, nodes, inputs, outputs, inits=(), opset=18):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(o, t, None) for o, t in outputs],
                              list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    return path


def _ints(name, *values):
    return helper.make_tensor(name, T.INT64, [len(values)], list(values))


def _against_ort(engine, path, feeds):
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    net = Network(read_onnx(path), engine=engine)
    got = net.infer(feeds)
    plan = net.plan_for({n: a.shape for n, a in feeds.items()}, feeds)
    # OpenCL refuses a global size of 0: no launch has one
    assert all(0 not in launch.global_size for step in plan.steps for launch in step.launches)
    # and no layer reads a tensor with no element (a 1-byte placeholder stands in its buffer)
    assert all(plan.descs[key].count for step in plan.steps for key in step.inputs)
    names = [o.name for o in onnx.load(str(path)).graph.output]
    for name, expected in zip(names, want):
        assert got[name].shape == expected.shape, name
        assert got[name].dtype == expected.dtype, name
        np.testing.assert_allclose(got[name], expected, rtol=1e-6, atol=1e-6, err_msg=name)
    return net, got


def test_an_empty_input_flows_to_an_empty_output(engine, tmp_path):
    path = _model(tmp_path, [helper.make_node("Relu", ["x"], ["y"]),
                             helper.make_node("Add", ["y", "y"], ["z"])],
                  [("x", T.FLOAT, [None, 3])], [("z", T.FLOAT)])
    net, got = _against_ort(engine, path, {"x": np.empty((0, 3), np.float32)})
    assert got["z"].shape == (0, 3)
    assert not net.plan_for({"x": (0, 3)}).steps        # nothing launched for no element
    # the same network still runs a non-empty batch
    np.testing.assert_allclose(net.infer({"x": X})["z"], 2 * np.maximum(X, 0))


def test_concat_skips_an_empty_part(engine, tmp_path):
    path = _model(tmp_path, [helper.make_node("Concat", ["a", "b", "c"], ["y"], axis=0)],
                  [("a", T.FLOAT, [None, 3]), ("b", T.FLOAT, [None, 3]),
                   ("c", T.FLOAT, [None, 3])], [("y", T.FLOAT)])
    _against_ort(engine, path, {"a": X, "b": np.empty((0, 3), np.float32), "c": X + 1})


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceProd", "ReduceMax", "ReduceMin", "ReduceMean",
                                "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum"])
def test_a_reduce_over_an_empty_axis_gives_its_identity(engine, tmp_path, op):
    path = _model(tmp_path, [helper.make_node(op, ["x", "axes"], ["y"], keepdims=1)],
                  [("x", T.FLOAT, [2, None, 4])], [("y", T.FLOAT)],
                  inits=[_ints("axes", 1)])
    _, got = _against_ort(engine, path, {"x": np.empty((2, 0, 4), np.float32)})
    assert got["y"].shape == (2, 1, 4)


def test_a_reduce_over_a_non_empty_axis_of_an_empty_tensor_is_empty(engine, tmp_path):
    path = _model(tmp_path, [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)],
                  [("x", T.FLOAT, [2, None, 4])], [("y", T.FLOAT)], inits=[_ints("axes", 2)])
    _, got = _against_ort(engine, path, {"x": np.empty((2, 0, 4), np.float32)})
    assert got["y"].shape == (2, 0)


def test_split_with_a_zero_part_and_slice_selecting_nothing(engine, tmp_path):
    path = _model(tmp_path, [helper.make_node("Split", ["x", "parts"], ["p", "q"], axis=0),
                             helper.make_node("Slice", ["x", "s", "e"], ["r"]),
                             helper.make_node("Relu", ["r"], ["t"])],
                  [("x", T.FLOAT, [2, 3])], [("p", T.FLOAT), ("q", T.FLOAT), ("t", T.FLOAT)],
                  inits=[_ints("parts", 0, 2), _ints("s", 5), _ints("e", 9)])
    _, got = _against_ort(engine, path, {"x": X})
    assert got["p"].shape == (0, 3) and got["t"].shape == (0, 3)


def test_reshape_with_allowzero_keeps_a_zero_dim(engine, tmp_path):
    path = _model(tmp_path, [helper.make_node("Reshape", ["x", "shape"], ["y"], allowzero=1)],
                  [("x", T.FLOAT, [0, 3, 4])], [("y", T.FLOAT)],
                  inits=[_ints("shape", 3, 4, 0)])
    _, got = _against_ort(engine, path, {"x": np.empty((0, 3, 4), np.float32)})
    assert got["y"].shape == (3, 4, 0)


def test_a_layer_that_cannot_take_an_empty_input_is_refused_naming_it(engine, tmp_path):
    # the expanded form of an empty Softmax row would have no element to normalise: refused,
    # never a wrong number; here a MatMul whose shared axis is empty (its output is not)
    path = _model(tmp_path, [helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")],
                  [("a", T.FLOAT, [2, None]), ("b", T.FLOAT, [None, 3])], [("y", T.FLOAT)])
    net = Network(read_onnx(path), engine=engine)
    with pytest.raises(CustomLayersError, match=r"mm.*zero-size"):
        net.infer({"a": np.empty((2, 0), np.float32), "b": np.empty((0, 3), np.float32)})


def test_the_request_api_takes_an_empty_input_and_output(engine, tmp_path):
    path = _model(tmp_path, [helper.make_node("Relu", ["x"], ["y"])],
                  [("x", T.FLOAT, [None, 3])], [("y", T.FLOAT)])
    net = Network(read_onnx(path), engine=engine)
    request = net.create_request({"x": (0, 3)})
    request.set_tensor("x", np.empty((0, 3), np.float32))
    out = np.empty((0, 3), np.float32)
    request.set_tensor("y", out)
    assert request.infer()["y"].shape == (0, 3)
    with pytest.raises(CustomLayersError, match="shape"):
        request.set_tensor("x", np.empty((0, 4), np.float32))


def test_cli_run_with_an_empty_input(tmp_path, capsys):
    path = _model(tmp_path, [helper.make_node("Concat", ["a", "b"], ["y"], axis=0)],
                  [("a", T.FLOAT, [None, 3]), ("b", T.FLOAT, [None, 3])], [("y", T.FLOAT)])
    np.save(tmp_path / "a.npy", np.empty((0, 3), np.float32))
    np.save(tmp_path / "b.npy", X)
    out = tmp_path / "out.npz"
    status = cli_main(["run", "-d", TEST_DEVICE, "-m", str(path), "-i",
                       f"a={tmp_path / 'a.npy'}", "-i", f"b={tmp_path / 'b.npy'}",
                       "-o", str(out)])
    assert status == 0, capsys.readouterr().err
    with np.load(out) as saved:
        np.testing.assert_array_equal(saved["y"], X)


def test_a_batch_of_none_through_a_fused_convolution(engine, tmp_path):
    # Conv + Relu fuse (the Relu is computed where the Conv stores); with a batch of 0 the
    # Concat after them still sees the Relu's output as a part with no element
    w = helper.make_tensor("w", T.FLOAT, [4, 3, 3, 3],
                           np.random.default_rng(1).standard_normal(108).tolist())
    b = helper.make_tensor("b", T.FLOAT, [4], [0.1, -0.2, 0.3, 0.0])
    path = _model(tmp_path, [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1] * 4),
                             helper.make_node("Relu", ["c"], ["r"]),
                             helper.make_node("Concat", ["r", "z"], ["y"], axis=0)],
                  [("x", T.FLOAT, [None, 3, 8, 8]), ("z", T.FLOAT, [1, 4, 8, 8])],
                  [("y", T.FLOAT)], inits=[w, b])
    rng = np.random.default_rng(2)
    z = rng.standard_normal((1, 4, 8, 8)).astype(np.float32)
    _, got = _against_ort(engine, path, {"x": np.empty((0, 3, 8, 8), np.float32), "z": z})
    np.testing.assert_array_equal(got["y"], z)
    _against_ort(engine, path, {"x": rng.standard_normal((2, 3, 8, 8)).astype(np.float32),
                                "z": z})


@pytest.mark.parametrize("fed", [False, True])
def test_compress_selecting_nothing(engine, tmp_path, fed):
    # the condition as a constant (folded at load) or a graph input (compiled in by value)
    cond = helper.make_tensor("cond", T.BOOL, [3], [False, False, False])
    path = _model(tmp_path, [helper.make_node("Compress", ["x", "cond"], ["y"], axis=1)],
                  [("x", T.FLOAT, [2, 3])] + ([("cond", T.BOOL, [3])] if fed else []),
                  [("y", T.FLOAT)], inits=[] if fed else [cond])
    feeds = {"x": X, **({"cond": np.zeros(3, bool)} if fed else {})}
    _, got = _against_ort(engine, path, feeds)
    assert got["y"].shape == (2, 0)


def test_flatten_and_pad_of_an_empty_tensor(engine, tmp_path):
    # Flatten's [0, -1] of a batch of 0 still gives the other axes' product; a Pad of a tensor
    # with no element along an axis it does not pad stays empty
    path = _model(tmp_path, [helper.make_node("Flatten", ["x"], ["f"], axis=1)],
                  [("x", T.FLOAT, [None, 3, None, 4])], [("f", T.FLOAT)])
    _, got = _against_ort(engine, path, {"x": np.empty((0, 3, 2, 4), np.float32)})
    assert got["f"].shape == (0, 24)
    path = _model(tmp_path, [helper.make_node("Pad", ["x", "p"], ["q"])],
                  [("x", T.FLOAT, [None, 3, None, 4])], [("q", T.FLOAT)],
                  inits=[_ints("p", 1, 0, 0, 0, 1, 0, 0, 0)])
    _, got = _against_ort(engine, path, {"x": np.empty((2, 3, 0, 4), np.float32)})
    assert got["q"].shape == (4, 3, 0, 4)
