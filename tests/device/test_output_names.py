"""A network's outputs are keyed by the graph's own output names, each present once, whatever
computes them: an Identity, a Dropout, a one-input Sum/Max/Min/Mean or a no-op ReduceSum make
an output the value of another name, and two graph outputs may hold one value. Compared with
ONNX Runtime on the same file (a test oracle only)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

from customlayers.api import Engine, Network  # noqa: E402

SHAPE = [1, 3, 4, 5]


@pytest.fixture(scope="module")
def engine(test_device):
    return Engine(test_device)


def _model(tmp_path, nodes, outputs, initializers=(), name="m"):
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    return path


def _both(engine, path):
    x = np.random.default_rng(5).standard_normal(SHAPE).astype(np.float32)
    ours = Network(path, None, engine, tuning="off")
    got = ours.infer({"x": x})
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {"x": x})))
    return ours, got, want


def _assert_same(ours, got, want):
    assert list(got) == list(want) and ours.output_names == list(want)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-6, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("op,extra", [
    ("Identity", {}),
    ("Dropout", {}),
    ("Sum", {}), ("Max", {}), ("Min", {}), ("Mean", {}),
])
def test_an_output_passed_through_keeps_the_graph_name(engine, tmp_path, op, extra):
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node(op, ["r"], ["y"], **extra)]
    _assert_same(*_both(engine, _model(tmp_path, nodes, ["y"], name=op)))


def test_a_no_op_reduce_sum_keeps_the_graph_name(engine, tmp_path):
    axes = helper.make_tensor("axes", TensorProto.INT64, [0], [])
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("ReduceSum", ["r", "axes"], ["y"], noop_with_empty_axes=1)]
    _assert_same(*_both(engine, _model(tmp_path, nodes, ["y"], [axes])))


def test_two_outputs_of_one_value_are_both_returned(engine, tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Identity", ["r"], ["y"])]
    ours, got, want = _both(engine, _model(tmp_path, nodes, ["r", "y"]))
    _assert_same(ours, got, want)
    assert got["r"] is not got["y"]                 # two arrays, not one under two names


def test_an_output_that_is_the_input_passed_through(engine, tmp_path):
    nodes = [helper.make_node("Identity", ["x"], ["y"]), helper.make_node("Relu", ["x"], ["z"])]
    _assert_same(*_both(engine, _model(tmp_path, nodes, ["y", "z"])))


def test_device_output_buffers_by_the_graph_names(engine, tmp_path, cl_env):
    """set_tensor takes the graph's names too, and both outputs of one value are written."""
    import pyopencl as cl
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Dropout", ["r"], ["y"])]
    path = _model(tmp_path, nodes, ["r", "y"])
    net = Network(path, None, engine, tuning="off")
    req = net.create_request()
    x = np.random.default_rng(6).standard_normal(SHAPE).astype(np.float32)
    bufs = {n: cl.Buffer(engine.context, cl.mem_flags.READ_WRITE, x.nbytes) for n in ("r", "y")}
    req.set_tensor("x", x)
    for name, buf in bufs.items():
        req.set_tensor(name, buf)
    req.start_async()
    req.wait()
    for buf in bufs.values():
        host = np.empty_like(x)
        cl.enqueue_copy(engine.queue, host, buf)
        np.testing.assert_array_equal(host, np.maximum(x, 0))


def test_an_output_listed_twice_is_returned_once_under_its_name(engine, tmp_path):
    """ONNX lets a graph list one output twice (ONNX Runtime returns it twice); a dict holds it
    once, under its own name (it came back a second time as 'y/sink', a name not in the
    model)."""
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Sigmoid", ["x"], ["z"])]
    path = _model(tmp_path, nodes, ["y", "z", "y"])
    x = np.random.default_rng(8).standard_normal(SHAPE).astype(np.float32)
    net = Network(path, None, engine, tuning="off")
    got = net.infer({"x": x})
    assert list(got) == net.output_names == ["y", "z"]
    np.testing.assert_array_equal(got["y"], np.maximum(x, 0))


def test_outputs_come_in_the_models_order(engine, tmp_path):
    """The order of the graph's outputs, not the order the layers run in (an output that is
    the input passed through came first)."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Identity", ["r"], ["a"]),
             helper.make_node("Sigmoid", ["r"], ["b"]), helper.make_node("Identity", ["x"], ["i"])]
    ours, got, want = _both(engine, _model(tmp_path, nodes, ["b", "r", "i", "a"]))
    _assert_same(ours, got, want)
    assert list(got) == ["b", "r", "i", "a"]
