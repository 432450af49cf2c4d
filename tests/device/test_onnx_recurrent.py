"""Issue 20 item 3, the recurrent ops: ONNX LSTM, GRU and RNN (ops/recurrent/rnn.py, translated
in graph/onnx/ops/recurrent.py) on onnx.helper models, against ONNX Runtime: every direction,
sequence_lens of unequal lengths (a 0 among them), initial states, peepholes, input_forget,
clip, non-default activations with their alpha/beta, linear_before_reset, omitted inputs and
outputs, layout 1 (which this ONNX Runtime refuses: matched against its layout-0 model with the
inputs and outputs transposed), float64, and the stacks torch.onnx.export emits (a 2-layer LSTM,
a 2-layer bidirectional GRU). Bad forms are refused at load naming the node."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from customlayers.api import Network  # noqa: E402
from customlayers.errors import ModelError  # noqa: E402
from customlayers.graph.onnx.reader import read_onnx  # noqa: E402

RNG = np.random.default_rng(20)
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
OUTPUTS = {"LSTM": ["y", "y_h", "y_c"], "GRU": ["y", "y_h"], "RNN": ["y", "y_h"]}
S, B, I, H = 5, 3, 4, 6


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def _elem(value: np.ndarray) -> int:
    return {np.dtype(np.int32): TensorProto.INT32, np.dtype(np.float64): TensorProto.DOUBLE
            }.get(value.dtype, TensorProto.FLOAT)


def _save(path: Path, nodes, feeds: dict, inits: dict, outputs, opset: int = 14) -> Path:
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(k, _elem(v), v.shape) for k, v in feeds.items()],
        [helper.make_tensor_value_info(o, _elem(next(iter(feeds.values()))), None)
         for o in outputs],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _weights(op: str, directions: int, dtype=np.float32, scale: float = 0.5) -> dict:
    g = GATES[op]
    return {"W": (RNG.standard_normal((directions, g * H, I)) * scale).astype(dtype),
            "R": (RNG.standard_normal((directions, g * H, H)) * scale).astype(dtype),
            "B": RNG.standard_normal((directions, 2 * g * H)).astype(dtype)}


def _node(op: str, inputs: dict, outputs, **attrs):
    """`inputs`: ONNX input name -> value name ('' or absent: omitted)."""
    order = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]
    names = [inputs.get(k, "") for k in order]
    while not names[-1]:
        names.pop()
    return helper.make_node(op, names, outputs, name=f"{op.lower()}_node", hidden_size=H,
                            **attrs)


def _compare(path: Path, engine, feeds: dict, outputs, want=None, rtol=1e-4, atol=1e-5):
    if want is None:
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        want = session.run(outputs, feeds)
    got = Network(read_onnx(path), engine=engine).infer(feeds)
    for name, w in zip(outputs, want):
        assert got[name].shape == w.shape, name
        np.testing.assert_allclose(got[name], w, rtol=rtol, atol=atol, err_msg=name)


def _state(directions: int) -> np.ndarray:
    return RNG.standard_normal((directions, B, H)).astype(np.float32)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_directions_with_lengths_and_initial_states(tmp_path, engine, op, direction):
    d = 2 if direction == "bidirectional" else 1
    feeds = {"x": RNG.standard_normal((S, B, I)).astype(np.float32),
             "lens": np.array([5, 2, 0], np.int32), "h0": _state(d)}
    inputs = {"X": "x", "W": "W", "R": "R", "B": "B", "sequence_lens": "lens",
              "initial_h": "h0"}
    if op == "LSTM":
        feeds["c0"] = _state(d)
        inputs["initial_c"] = "c0"
    node = _node(op, inputs, OUTPUTS[op], direction=direction)
    path = _save(tmp_path / "m.onnx", [node], feeds, _weights(op, d), OUTPUTS[op])
    _compare(path, engine, feeds, OUTPUTS[op])


def test_lstm_peepholes_input_forget_clip_and_activations(tmp_path, engine):
    """Peepholes, input_forget, clip, and three functions with alpha/beta per direction (the
    lists handed out in order, defaults after them)."""
    feeds = {"x": (RNG.standard_normal((S, B, I)) * 2).astype(np.float32),
             "lens": np.array([3, 5, 1], np.int32)}
    inits = _weights("LSTM", 2)
    inits["P"] = RNG.standard_normal((2, 3 * H)).astype(np.float32)
    node = _node("LSTM", {"X": "x", "W": "W", "R": "R", "B": "B", "sequence_lens": "lens",
                          "P": "P"}, OUTPUTS["LSTM"], direction="bidirectional",
                 input_forget=1, clip=1.5,
                 activations=["HardSigmoid", "ScaledTanh", "Softsign",
                              "Sigmoid", "Elu", "LeakyRelu"],
                 activation_alpha=[0.3, 0.9, 0.7], activation_beta=[0.4, 1.2])
    path = _save(tmp_path / "m.onnx", [node], feeds, inits, OUTPUTS["LSTM"])
    _compare(path, engine, feeds, OUTPUTS["LSTM"])


@pytest.mark.parametrize("linear_before_reset", [0, 1])
def test_gru_linear_before_reset_clip_and_activations(tmp_path, engine, linear_before_reset):
    feeds = {"x": (RNG.standard_normal((S, B, I)) * 2).astype(np.float32), "h0": _state(2)}
    node = _node("GRU", {"X": "x", "W": "W", "R": "R", "B": "B", "initial_h": "h0"},
                 OUTPUTS["GRU"], direction="bidirectional", clip=2.0,
                 linear_before_reset=linear_before_reset,
                 activations=["Sigmoid", "Tanh", "HardSigmoid", "Softplus"])
    path = _save(tmp_path / "m.onnx", [node], feeds, _weights("GRU", 2), OUTPUTS["GRU"])
    _compare(path, engine, feeds, OUTPUTS["GRU"])


@pytest.mark.parametrize("activations,alpha,beta", [
    (["Relu"], [], []), (["Affine"], [0.5], [0.1]), (["ThresholdedRelu"], [0.2], []),
    (["LeakyRelu", "Softsign"], [0.05], []), (["Elu", "ScaledTanh"], [0.8, 0.5], [1.5]),
])
def test_rnn_activations(tmp_path, engine, activations, alpha, beta):
    d = len(activations)
    feeds = {"x": RNG.standard_normal((S, B, I)).astype(np.float32)}
    attrs = {"activations": activations, "direction": "bidirectional" if d == 2 else "forward"}
    if alpha:
        attrs["activation_alpha"] = alpha
    if beta:
        attrs["activation_beta"] = beta
    node = _node("RNN", {"X": "x", "W": "W", "R": "R", "B": "B"}, OUTPUTS["RNN"], **attrs)
    path = _save(tmp_path / "m.onnx", [node], feeds, _weights("RNN", d, scale=0.3),
                 OUTPUTS["RNN"])
    _compare(path, engine, feeds, OUTPUTS["RNN"])


@pytest.mark.parametrize("op,outputs", [
    ("LSTM", ["", "y_h"]), ("LSTM", ["", "", "y_c"]), ("LSTM", ["y"]),
    ("GRU", ["", "y_h"]), ("RNN", ["y"]),
])
def test_omitted_inputs_and_outputs(tmp_path, engine, op, outputs):
    """No B, no initial state, and only some of the outputs (the others named '')."""
    feeds = {"x": RNG.standard_normal((S, B, I)).astype(np.float32)}
    weights = _weights(op, 1)
    del weights["B"]
    node = _node(op, {"X": "x", "W": "W", "R": "R"}, outputs, direction="reverse")
    asked = [o for o in outputs if o]
    path = _save(tmp_path / "m.onnx", [node], feeds, weights, asked)
    _compare(path, engine, feeds, asked)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_layout_1(tmp_path, engine, op):
    """Batch first: this ONNX Runtime refuses layout 1, so the expected values come from its
    layout-0 model on the transposed inputs, transposed back."""
    feeds = {"x": RNG.standard_normal((S, B, I)).astype(np.float32),
             "lens": np.array([4, 5, 2], np.int32), "h0": _state(2)}
    inputs = {"X": "x", "W": "W", "R": "R", "B": "B", "sequence_lens": "lens",
              "initial_h": "h0"}
    if op == "LSTM":
        feeds["c0"] = _state(2)
        inputs["initial_c"] = "c0"
    weights, outputs = _weights(op, 2), OUTPUTS[op]
    ref = _save(tmp_path / "ref.onnx", [_node(op, inputs, outputs, direction="bidirectional")],
                feeds, weights, outputs)
    want = ort.InferenceSession(str(ref), providers=["CPUExecutionProvider"]).run(outputs, feeds)
    want = [want[0].transpose(2, 0, 1, 3)] + [w.transpose(1, 0, 2) for w in want[1:]]
    batch_first = {k: v if k == "lens" else np.ascontiguousarray(v.swapaxes(0, 1))
                   for k, v in feeds.items()}
    path = _save(tmp_path / "m.onnx", [_node(op, inputs, outputs, direction="bidirectional",
                                             layout=1)], batch_first, weights, outputs)
    _compare(path, engine, batch_first, outputs, want=want)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_float64(tmp_path, engine, op):
    """Against the onnx package's reference evaluator, in double."""
    from onnx.reference import ReferenceEvaluator
    feeds = {"x": RNG.standard_normal((S, B, I))}
    node = _node(op, {"X": "x", "W": "W", "R": "R", "B": "B"}, OUTPUTS[op],
                 direction="bidirectional")
    path = _save(tmp_path / "m.onnx", [node], feeds, _weights(op, 2, np.float64), OUTPUTS[op])
    want = ReferenceEvaluator(str(path)).run(OUTPUTS[op], feeds)
    got = Network(read_onnx(path), engine=engine).infer(feeds)
    for name, w in zip(OUTPUTS[op], want):
        assert got[name].dtype == np.float64
        np.testing.assert_allclose(got[name], w, rtol=1e-12, atol=1e-12, err_msg=name)


def _const(name: str, value) -> object:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(
        np.asarray(value), name))


def test_two_layer_lstm_as_torch_exports_it(tmp_path, engine):
    """torch.onnx.export of nn.LSTM(num_layers=2): each layer's initial states sliced out of
    (h0, c0), its Y squeezed (num_directions 1) into the next layer, the final states
    concatenated."""
    feeds = {"x": RNG.standard_normal((S, B, I)).astype(np.float32),
             "h0": RNG.standard_normal((2, B, H)).astype(np.float32),
             "c0": RNG.standard_normal((2, B, H)).astype(np.float32)}
    inits = {}
    nodes = [_const("one", np.array([1], np.int64)), _const("zero", np.array([0], np.int64)),
             _const("two", np.array([2], np.int64))]
    layer_in = "x"
    for layer in range(2):
        w = _weights("LSTM", 1)
        if layer:
            w["W"] = (RNG.standard_normal((1, 4 * H, H)) * 0.5).astype(np.float32)
        inits.update({f"{k}{layer}": v for k, v in w.items()})
        lo, hi = ("zero", "one") if layer == 0 else ("one", "two")
        nodes += [helper.make_node("Slice", [s, lo, hi, "zero"], [f"{s}_{layer}"])
                  for s in ("h0", "c0")]
        nodes.append(helper.make_node(
            "LSTM", [layer_in, f"W{layer}", f"R{layer}", f"B{layer}", "", f"h0_{layer}",
                     f"c0_{layer}"], [f"y{layer}", f"hn{layer}", f"cn{layer}"],
            name=f"lstm{layer}", hidden_size=H))
        nodes.append(helper.make_node("Squeeze", [f"y{layer}", "one"], [f"seq{layer}"]))
        layer_in = f"seq{layer}"
    nodes += [helper.make_node("Concat", ["hn0", "hn1"], ["hn"], axis=0),
              helper.make_node("Concat", ["cn0", "cn1"], ["cn"], axis=0)]
    outputs = ["seq1", "hn", "cn"]
    path = _save(tmp_path / "lstm2.onnx", nodes, feeds, inits, outputs)
    _compare(path, engine, feeds, outputs)


def test_two_layer_bidirectional_gru_as_torch_exports_it(tmp_path, engine):
    """torch.onnx.export of nn.GRU(bidirectional=True, num_layers=2, batch_first=True): the
    input transposed to sequence first, each layer's Y [S, 2, B, H] transposed to [S, B, 2, H]
    and reshaped to [S, B, 2H] for the next, the output transposed back to batch first."""
    feeds = {"x": RNG.standard_normal((B, S, I)).astype(np.float32)}
    inits = {"shape": np.array([0, 0, -1], np.int64)}
    nodes = [helper.make_node("Transpose", ["x"], ["x_t"], perm=[1, 0, 2])]
    layer_in = "x_t"
    for layer in range(2):
        w = _weights("GRU", 2)
        if layer:
            w["W"] = (RNG.standard_normal((2, 3 * H, 2 * H)) * 0.5).astype(np.float32)
        inits.update({f"{k}{layer}": v for k, v in w.items()})
        nodes += [
            helper.make_node("GRU", [layer_in, f"W{layer}", f"R{layer}", f"B{layer}"],
                             [f"y{layer}", f"hn{layer}"], name=f"gru{layer}", hidden_size=H,
                             direction="bidirectional", linear_before_reset=1),
            helper.make_node("Transpose", [f"y{layer}"], [f"yt{layer}"], perm=[0, 2, 1, 3]),
            helper.make_node("Reshape", [f"yt{layer}", "shape"], [f"seq{layer}"])]
        layer_in = f"seq{layer}"
    nodes += [helper.make_node("Transpose", ["seq1"], ["out"], perm=[1, 0, 2]),
              helper.make_node("Concat", ["hn0", "hn1"], ["hn"], axis=0)]
    path = _save(tmp_path / "gru2.onnx", nodes, feeds, inits, ["out", "hn"])
    _compare(path, engine, feeds, ["out", "hn"])


@pytest.mark.parametrize("attrs,weights_dirs,message", [
    ({"direction": "sideways"}, 1, "attribute direction='sideways' is not one of"),
    ({"layout": 2}, 1, "layout 2 is not 0 or 1"),
    ({"clip": -1.0}, 1, "clip -1.0 must be positive"),
    ({"activations": ["Sigmoid", "Tanh"]}, 1, "2 activations given; 3 are needed"),
    ({"activations": ["Sigmoid", "Gelu", "Tanh"]}, 1, "activation 'Gelu' is not one of"),
    ({"activations": ["Sigmoid", "Tanh", "Tanh"], "activation_alpha": [0.5]}, 1,
     "more than the activations"),
    ({"input_forget": 2}, 1, "input_forget=2 is not 0 or 1"),
    ({"direction": "bidirectional"}, 1, "W is for 1 direction(s); the direction attribute "
                                        "says 2"),
])
def test_bad_forms_are_refused_naming_the_node(tmp_path, attrs, weights_dirs, message):
    feeds = {"x": RNG.standard_normal((S, B, I)).astype(np.float32)}
    node = _node("LSTM", {"X": "x", "W": "W", "R": "R"}, ["y"], **attrs)
    weights = _weights("LSTM", weights_dirs)
    del weights["B"]
    path = _save(tmp_path / "bad.onnx", [node], feeds, weights, ["y"])
    with pytest.raises(ModelError) as caught:
        read_onnx(path)
    assert "'lstm_node' (LSTM)" in str(caught.value)
    assert message in str(caught.value)


def test_hidden_size_that_does_not_match_the_weights_is_refused(tmp_path):
    feeds = {"x": RNG.standard_normal((S, B, I)).astype(np.float32)}
    node = helper.make_node("GRU", ["x", "W", "R"], ["y"], name="gru_node", hidden_size=H + 1)
    path = _save(tmp_path / "bad.onnx", [node], feeds,
                 {k: v for k, v in _weights("GRU", 1).items() if k != "B"}, ["y"])
    with pytest.raises(ModelError, match=r"'gru_node' \(GRU\).*W's dim 1 is 18; 3 gates of "
                                         r"hidden_size 7 make 21"):
        read_onnx(path)


@pytest.mark.parametrize("op,hidden,extra", [
    ("LSTM", 24, {"direction": "bidirectional"}),       # three full runs of 8 units
    ("LSTM", 20, {"direction": "reverse"}),             # two runs and a tail of 4
    ("GRU", 16, {"direction": "bidirectional"}),
    ("RNN", 40, {}),
])
def test_hidden_sizes_of_full_vector_runs(tmp_path, engine, op, hidden, extra):
    """Hidden sizes where the kernels' 8-unit runs are full (and one with a tail)."""
    d = 2 if extra.get("direction") == "bidirectional" else 1
    g = GATES[op]
    inits = {"W": (RNG.standard_normal((d, g * hidden, I)) * 0.3).astype(np.float32),
             "R": (RNG.standard_normal((d, g * hidden, hidden)) * 0.3).astype(np.float32),
             "B": RNG.standard_normal((d, 2 * g * hidden)).astype(np.float32)}
    feeds = {"x": RNG.standard_normal((S, B, I)).astype(np.float32),
             "lens": np.array([5, 1, 3], np.int32)}
    node = helper.make_node(op, ["x", "W", "R", "B", "lens"], OUTPUTS[op], hidden_size=hidden,
                            **extra)
    path = _save(tmp_path / "m.onnx", [node], feeds, inits, OUTPUTS[op])
    _compare(path, engine, feeds, OUTPUTS[op])


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_weights_given_at_run_time(tmp_path, engine, op):
    """W, R and B as graph inputs, not initializers: transposed on the device per run."""
    feeds = {"x": RNG.standard_normal((S, B, I)).astype(np.float32), **_weights(op, 2)}
    node = _node(op, {"X": "x", "W": "W", "R": "R", "B": "B"}, OUTPUTS[op],
                 direction="bidirectional")
    path = _save(tmp_path / "m.onnx", [node], feeds, {}, OUTPUTS[op])
    _compare(path, engine, feeds, OUTPUTS[op])


def test_float16_is_refused_at_load_naming_the_node(tmp_path):
    weights = {k: v.astype(np.float16) for k, v in _weights("RNN", 1).items() if k != "B"}
    node = _node("RNN", {"X": "x", "W": "W", "R": "R"}, ["y"])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, (S, B, I))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)],
        [numpy_helper.from_array(v, k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "f16.onnx"))
    with pytest.raises(ModelError, match=r"'rnn_node' \(RNN\): X is f16; float32 and float64 "
                                         r"are supported"):
        read_onnx(tmp_path / "f16.onnx")


def test_zero_initial_states_from_the_input_shape_as_torch_exports_them(tmp_path, engine):
    """torch.onnx.export of nn.LSTM called without (h0, c0): the zero states are an Expand of
    a shape computed from X's (Shape, Gather, Concat), sequence length and batch symbolic; one
    Network runs two shapes."""
    nodes = [_const("one", np.array([1], np.int64)), _const("hid", np.array([H], np.int64)),
             _const("batch_axis", np.array(1, np.int64)), _const("axes", np.array([0], np.int64)),
             _const("zero", np.array([0.0], np.float32)),
             helper.make_node("Shape", ["x"], ["x_shape"]),
             helper.make_node("Gather", ["x_shape", "batch_axis"], ["batch"], axis=0),
             helper.make_node("Unsqueeze", ["batch", "axes"], ["batch1"]),
             helper.make_node("Concat", ["one", "batch1", "hid"], ["state_shape"], axis=0),
             helper.make_node("Expand", ["zero", "state_shape"], ["zeros"]),
             helper.make_node("LSTM", ["x", "W", "R", "B", "", "zeros", "zeros"],
                              ["y", "y_h", "y_c"], name="lstm", hidden_size=H),
             helper.make_node("Squeeze", ["y", "one"], ["out"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ("S", "N", I))],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in _weights("LSTM", 1).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "lstm_zeros.onnx"
    onnx.save(model, str(path))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    net = Network(read_onnx(path), engine=engine)
    for shape in ((S, B, I), (S + 2, B + 1, I)):
        x = RNG.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(net.infer({"x": x})["out"], session.run(None, {"x": x})[0],
                                   rtol=1e-4, atol=1e-5)
