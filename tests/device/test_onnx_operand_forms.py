"""ONNX operands the built-in ops need before the network runs (Reduce axes, Slice bounds,
Pad pads, Split sizes, Tile repeats, Squeeze axes, ConstantOfShape's shape, Dropout's ratio and
training_mode), fed as graph inputs: each set of values is compiled in as its own plan. Also
Clip with tensor bounds, Pad's wrap mode and the ConvTranspose forms. Every result is checked
against ONNX's own reference implementation (onnx.reference, numpy) on the test device."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from customlayers.errors import ModelError
from customlayers.graph.onnx.reader import read_onnx
from customlayers.runtime.compile.network import Network

RNG = np.random.default_rng(7)
X = RNG.standard_normal((2, 3, 4)).astype(np.float32)


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def _model(tmp_path, nodes, inputs, outputs, opset=18, inits=()):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(o, t, None) for o, t in outputs],
                              list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    return model, path


def _check(engine, model, path, feeds_list, plans=None, oracle=None):
    """Each feed through one Network, against the reference (or `oracle`(feeds) -> outputs);
    `plans`: how many plans the values must have compiled."""
    net = Network(read_onnx(path), engine=engine)
    oracle = oracle or (lambda feeds, ref=ReferenceEvaluator(model): ref.run(None, feeds))
    names = [o.name for o in model.graph.output]
    for feeds in feeds_list:
        got = net.infer(feeds)
        for name, want in zip(names, oracle(feeds)):
            np.testing.assert_allclose(np.asarray(got[name]).astype(want.dtype), want,
                                       rtol=1e-5, atol=1e-5, err_msg=name)
    if plans is not None:
        assert len(net._plans) == plans
    return net


def _ints(*values):
    return np.array(values, np.int64)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin",
                                "ReduceL1", "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare"])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_axes_from_a_graph_input_compile_one_plan_per_value(tmp_path, engine, op,
                                                                    keepdims):
    model, path = _model(tmp_path, [helper.make_node(op, ["x", "axes"], ["y"],
                                                     keepdims=keepdims)],
                         [("x", T.FLOAT, [2, 3, 4]), ("axes", T.INT64, [None])],
                         [("y", T.FLOAT)])
    x = np.abs(X) + 0.5
    net = _check(engine, model, path, [{"x": x, "axes": _ints(1)}, {"x": x, "axes": _ints(0, -1)},
                                       {"x": x, "axes": _ints(1)}], plans=2)
    assert list(net.value_inputs) == ["axes"]


@pytest.mark.parametrize("noop", [0, 1])
def test_empty_reduce_axes_from_a_graph_input(tmp_path, engine, noop):
    model, path = _model(tmp_path, [helper.make_node("ReduceL1", ["x", "axes"], ["y"],
                                                     noop_with_empty_axes=noop)],
                         [("x", T.FLOAT, [2, 3, 4]), ("axes", T.INT64, [None])],
                         [("y", T.FLOAT)])
    _check(engine, model, path, [{"x": X, "axes": _ints()}, {"x": X, "axes": _ints(2)}])


def test_slice_bounds_from_graph_inputs(tmp_path, engine):
    model, path = _model(tmp_path, [helper.make_node("Slice", ["x", "s", "e", "a", "st"],
                                                     ["y"])],
                         [("x", T.FLOAT, [2, 3, 4]), ("s", T.INT64, [2]), ("e", T.INT64, [2]),
                          ("a", T.INT64, [2]), ("st", T.INT64, [2])], [("y", T.FLOAT)])
    _check(engine, model, path, [
        {"x": X, "s": _ints(0, 1), "e": _ints(2, 4), "a": _ints(1, 2), "st": _ints(1, 2)},
        {"x": X, "s": _ints(-1, 3), "e": _ints(-100, 0), "a": _ints(2, 1), "st": _ints(-2, -1)}],
        plans=2)


def test_split_sizes_from_a_graph_input(tmp_path, engine):
    model, path = _model(tmp_path, [helper.make_node("Split", ["x", "sizes"], ["a", "b"],
                                                     axis=2)],
                         [("x", T.FLOAT, [2, 3, 4]), ("sizes", T.INT64, [2])],
                         [("a", T.FLOAT), ("b", T.FLOAT)])
    _check(engine, model, path, [{"x": X, "sizes": _ints(1, 3)}, {"x": X, "sizes": _ints(2, 2)}],
           plans=2)


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "wrap"])
def test_pad_pads_axes_and_value_from_graph_inputs(tmp_path, engine, mode):
    model, path = _model(tmp_path, [helper.make_node("Pad", ["x", "pads", "v", "axes"], ["y"],
                                                     mode=mode)],
                         [("x", T.FLOAT, [2, 3, 4]), ("pads", T.INT64, [None]),
                          ("v", T.FLOAT, []), ("axes", T.INT64, [None])],
                         [("y", T.FLOAT)], opset=19)
    v = np.float32(1.5)
    _check(engine, model, path, [
        {"x": X, "pads": _ints(1, 2, 0, 1), "v": v, "axes": _ints(1, 2)},
        {"x": X, "pads": _ints(1, 0, 2, 2, 1, 3), "v": v, "axes": _ints(0, 1, -1)}], plans=2)


def test_pad_wrap_with_constant_pads_on_five_dims(tmp_path, engine):
    pads = numpy_helper.from_array(_ints(0, 1, 0, 2, 1, 1, 0, 2, 0, 0), "pads")
    model, path = _model(tmp_path, [helper.make_node("Pad", ["x", "pads"], ["y"], mode="wrap")],
                         [("x", T.FLOAT, [2, 3, 2, 3, 2])], [("y", T.FLOAT)], opset=19,
                         inits=[pads])
    _check(engine, model, path, [{"x": RNG.standard_normal((2, 3, 2, 3, 2)).astype(np.float32)}])


def test_clip_bounds_from_a_graph_input_and_a_layer(tmp_path, engine):
    model, path = _model(tmp_path, [helper.make_node("Neg", ["lo"], ["hi"]),
                                    helper.make_node("Clip", ["x", "lo", "hi"], ["y"]),
                                    helper.make_node("Clip", ["x", "", "hi"], ["z"])],
                         [("x", T.FLOAT, [2, 3, 4]), ("lo", T.FLOAT, [])],
                         [("y", T.FLOAT), ("z", T.FLOAT)])
    _check(engine, model, path, [{"x": X, "lo": np.float32(-0.5)},
                                 {"x": X, "lo": np.float32(-1.0)}])


def test_tile_squeeze_unsqueeze_and_constant_of_shape_from_graph_inputs(tmp_path, engine):
    one = helper.make_tensor("one", T.FLOAT, [1], [1.0])
    model, path = _model(tmp_path, [
        helper.make_node("Tile", ["x", "reps"], ["t"]),
        helper.make_node("Unsqueeze", ["x", "ax"], ["u"]),
        helper.make_node("Squeeze", ["u", "ax"], ["s"]),
        helper.make_node("ConstantOfShape", ["shape"], ["c"], value=one)],
        [("x", T.FLOAT, [2, 3, 4]), ("reps", T.INT64, [3]), ("ax", T.INT64, [1]),
         ("shape", T.INT64, [2])],
        [("t", T.FLOAT), ("u", T.FLOAT), ("s", T.FLOAT), ("c", T.FLOAT)])
    _check(engine, model, path, [
        {"x": X, "reps": _ints(1, 2, 1), "ax": _ints(0), "shape": _ints(2, 3)},
        {"x": X, "reps": _ints(2, 1, 3), "ax": _ints(-1), "shape": _ints(4, 1)}], plans=2)


def test_dropout_ratio_and_training_mode_from_graph_inputs(tmp_path, engine):
    model, path = _model(tmp_path, [helper.make_node("Dropout", ["x", "ratio", "train"],
                                                     ["y", "mask"])],
                         [("x", T.FLOAT, [2, 3, 4]), ("ratio", T.FLOAT, []),
                          ("train", T.BOOL, [])], [("y", T.FLOAT), ("mask", T.BOOL)])
    net = _check(engine, model, path, [
        {"x": X, "ratio": np.float32(0.5), "train": np.array(False)},
        {"x": X, "ratio": np.float32(0.0), "train": np.array(True)}])
    # training with a ratio that drops something: a random mask, refused naming the node
    with pytest.raises(ModelError, match=r"'y' \(Dropout\).*training_mode is true with ratio"):
        net.infer({"x": X, "ratio": np.float32(0.5), "train": np.array(True)})


@pytest.mark.parametrize("case", [
    dict(w=(4, 1, 3, 3), group=4),
    dict(w=(4, 3, 3, 3), group=2, strides=[2, 2], dilations=[2, 1]),
    dict(w=(4, 2, 2, 3, 3), strides=[1, 2, 2], pads=[1, 0, 1, 0, 1, 1], x=(1, 4, 3, 4, 5)),
    dict(w=(4, 2, 3, 3), auto_pad="SAME_UPPER", strides=[2, 2]),
    dict(w=(4, 2, 3, 3), auto_pad="SAME_LOWER", strides=[2, 3]),
    dict(w=(4, 2, 3, 3), output_shape=[10, 9], strides=[3, 2]),
    dict(w=(4, 2, 3), output_padding=[1], strides=[2], x=(1, 4, 5)),
])
def test_conv_transpose_forms(tmp_path, engine, case):
    # against ONNX Runtime: onnx.reference's grouped ConvTranspose adds the first group's
    # bias to every group, and pads an output_shape at the end only
    case = dict(case)
    wshape, xshape = case.pop("w"), case.pop("x", (2, 4, 4, 5))
    w = numpy_helper.from_array(RNG.standard_normal(wshape).astype(np.float32), "w")
    b = numpy_helper.from_array(RNG.standard_normal(wshape[1] * case.get("group", 1))
                                .astype(np.float32), "b")
    model, path = _model(tmp_path, [helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"],
                                                     **case)],
                         [("x", T.FLOAT, list(xshape))], [("y", T.FLOAT)], opset=17,
                         inits=[w, b])
    import onnxruntime as ort
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    _check(engine, model, path, [{"x": RNG.standard_normal(xshape).astype(np.float32)}],
           oracle=lambda feeds: session.run(None, feeds))


def test_an_operand_computed_by_a_layer_is_refused_naming_the_node(tmp_path):
    _, path = _model(tmp_path, [helper.make_node("Relu", ["k"], ["kr"]),
                                helper.make_node("Cast", ["kr"], ["starts"], to=T.INT64),
                                helper.make_node("Slice", ["x", "starts", "ends"], ["y"],
                                                 name="cut")],
                     [("x", T.FLOAT, [2, 3, 4]), ("k", T.FLOAT, [1]), ("ends", T.INT64, [1])],
                     [("y", T.FLOAT)])
    with pytest.raises(ModelError, match=r"node 2 'cut' \(Slice\): the starts \(input 1, "
                                         r"'starts'\) must be a constant, shape arithmetic or a "
                                         r"graph input"):
        read_onnx(path)


def test_a_zero_size_input_with_fed_axes_reduces_to_the_identity(tmp_path, engine):
    # a zero-size data input runs (tests/device/test_zero_size.py): a sum over its empty axis
    # is 0, with the axes fed as a graph input (compiled in by value)
    model, path = _model(tmp_path, [helper.make_node("ReduceSum", ["x", "axes"], ["y"])],
                         [("x", T.FLOAT, [2, None, 4]), ("axes", T.INT64, [1])],
                         [("y", T.FLOAT)])
    _check(engine, model, path, [{"x": np.zeros((2, 0, 4), np.float32), "axes": _ints(1)}])
