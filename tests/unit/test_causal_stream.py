"""passes/stream/causal_stream.py: a whole-window causal model [N, C, T] as its step (issue 21, points 4
and 5). Each accepted model is checked for exactness: its StreamProgram stepped in numpy
(ops/stream/reference.py, float64) over every step t equals ONNX Runtime (float32, a test
oracle only) running the whole window up to t, its last step, to rtol 1e-5. Each refused form
names the layer and why. No device."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from causal_models import CausalModel, stream_against_window
from customlayers.errors import ModelError
from customlayers.graph.load import read_model
from customlayers.ops.stream.program import (Binary, CausalConv, ChannelSlice, ChannelSoftmax,
                                             Pointwise)
from customlayers.passes.stream.causal_stream import stream_program

pytest.importorskip("onnxruntime")
sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))  # after tests/: both have a models.py
from gpu_peers import TCN_KERNEL, onnx_tcn  # noqa: E402

RTOL = 1e-5


def _input(batch: int, channels: int, length: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((batch, channels, length)).astype(
        np.float32)


def _program(path, **kw):
    return stream_program(read_model(path), **kw)


# -- the seed's TCN ------------------------------------------------------------------------
@pytest.mark.parametrize("weight_norm, batch", [(False, 1), (False, 64), (True, 3)])
def test_seed_tcn_streams_exactly_at_every_step(tmp_path, weight_norm, batch):
    """bench/gpu_peers.py's TCN (3 levels here: dilations 1, 2, 4, a receptive field of 85
    steps, longer than the 24 streamed) with its Gather of index T-1: one model per window
    length; N = 1 and 64 streams. weight_norm: torch's export of weight norm (constant
    ReduceL2, Div, Mul) is evaluated by the conversion; the step is the same chain of ops."""
    length = 24

    def model(t):
        return onnx_tcn(tmp_path / f"tcn{t}.onnx", batch, levels=3, length=t,
                        weight_norm=weight_norm)

    program = _program(model(length))
    convs = program.convolutions
    assert [c.history for c in convs] == [(TCN_KERNEL - 1) * d for d in (1, 1, 2, 2, 4, 4)]
    assert all(c.bias is not None for c in convs)           # the bias Adds are folded in
    assert [type(op).__name__ for op in program.ops].count("Binary") == 3   # residual Adds
    assert isinstance(program.ops[-1], ChannelSoftmax) and program.ops[-1].log
    assert [(o.name, o.shape, o.per_step_sequence) for o in program.outputs] == \
        [("y", (10,), False)]
    assert any("causal Slice 'b0c1sl'" in note for note in program.notes)
    worst = stream_against_window(program, model, _input(batch, 1, length), rtol=RTOL)
    assert worst < RTOL


# -- kernels 2 and 3, receptive field, forms of causal padding ------------------------------
def _stack(kernel: int, dilations, form: str = "chomp", channels: int = 6, cin: int = 2,
           length=None):
    """Causal convolutions with ReLUs and residual Adds (a symbolic time axis unless
    `length`)."""
    m = CausalModel(cin, length=length)
    h = m.add("Relu", [m.causal_conv("x", cin, channels, kernel, dilations[0], form=form)])
    for d in dilations[1:]:
        h = m.add("Add", [h, m.add("Relu", [m.causal_conv(h, channels, channels, kernel, d,
                                                          form=form)])])
    return m, h


@pytest.mark.parametrize("kernel, dilations, form, length", [
    (2, (1, 1, 1), "chomp", 12),
    (3, (1, 1), "chomp", 12),
    (3, (1, 1), "direct", 9),
    (2, (1, 1), "pad", 9),
    (3, (1, 2, 4, 8), "chomp", 10),        # a receptive field of 31 steps, longer than 10
    (2, (1, 2), "chomp to T", 8),          # the chomp's end written as T (a fixed length)
])
def test_causal_stacks_stream_exactly(tmp_path, kernel, dilations, form, length):
    fixed = form == "chomp to T"         # then one model per window length, same weights

    def model(t):
        m, h = _stack(kernel, dilations, form, length=t if fixed else None)
        return m.save(tmp_path / f"m{t if fixed else ''}.onnx", [m.dense_head(h, 6, 4)])

    path = model(length)
    program = _program(path)
    assert [c.history for c in program.convolutions] == [(kernel - 1) * d for d in dilations]
    stream_against_window(program, model if fixed else lambda t: path, _input(2, 2, length),
                          rtol=RTOL)


def test_heads_on_the_last_step_stream_exactly(tmp_path):
    """Three heads of one model: a Gather of index [-1] squeezed, a Gemm with alpha, beta and
    an untransposed weight, ReLU, LogSoftmax over the last axis; a Slice [-1:] reshaped to
    [0, -1], MatMul, Add, Sigmoid; a Gather of index -1 unsqueezed to [N, C, 1], a Softmax
    over the channels, flattened."""
    m, h = _stack(3, (1, 2))
    i64 = lambda v: m.const(v, np.int64)  # noqa: E731
    last = m.add("Squeeze", [m.add("Gather", [h, i64([-1])], axis=2), i64([2])])
    y1 = m.add("LogSoftmax", [m.add("Relu", [m.add("Gemm", [
        last, m.weight(6, 4), m.const(m.rng.standard_normal(4))], alpha=0.5, beta=2.0)])],
        axis=-1)
    flat = m.add("Reshape", [m.add("Slice", [h, i64([-1]), i64([2 ** 62]), i64([2])]),
                             i64([0, -1])])
    y2 = m.add("Sigmoid", [m.add("Add", [m.add("MatMul", [flat, m.weight(6, 3)]),
                                         m.const([0.1, 0.2, 0.3])])])
    col = m.add("Unsqueeze", [m.add("Gather", [h, i64(-1)], axis=2), i64([2])])
    y3 = m.add("Flatten", [m.add("Softmax", [col], axis=1)], axis=1)
    path = m.save(tmp_path / "m.onnx", [y1, y2, y3])
    program = _program(path)
    assert [(o.name, o.shape) for o in program.outputs] == [(y1, (4,)), (y2, (3,)), (y3, (6,))]
    assert sum(isinstance(op, Binary) for op in program.ops) == 1     # the residual Add only
    stream_against_window(program, lambda t: path, _input(2, 2, 9), rtol=RTOL)


def test_the_seed_tcn_at_full_size_streams_exactly(tmp_path):
    """The seed's TCN as it is (8 levels of 25 channels, kernel 7, dilations 1..128: a
    receptive field of 3061 steps) streamed over its 784 steps, checked against the whole
    window at a few lengths (one model per length: its Gather reads index T-1)."""
    checked = (1, 2, 100, 393, 784)
    program = _program(onnx_tcn(tmp_path / "tcn784.onnx", 1))
    assert [c.history for c in program.convolutions] == \
        [6 * 2 ** (k // 2) for k in range(16)]
    x = _input(1, 1, 784)
    from customlayers.ops.stream.reference import ReferenceStream
    import onnxruntime as ort
    stream = ReferenceStream(program, 1)
    for t in range(1, 785):
        got = stream.step(x[:, :, t - 1])["y"]
        if t in checked:
            path = onnx_tcn(tmp_path / f"tcn{t}.onnx", 1, length=t)
            want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
                None, {"x": x[:, :, :t]})[0]
            np.testing.assert_allclose(got, want, rtol=RTOL, err_msg=f"step {t}")


@pytest.mark.parametrize("form", ["split", "slices", "strided"])
def test_a_gate_that_splits_the_channels_streams_exactly(tmp_path, form):
    """A gated unit as WaveNet-like models write it: one convolution to 2C channels, then its
    halves (a Split of axis 1, or two Slices of it; "strided": the even and odd channels),
    tanh times sigmoid. It was refused ("a stream slices the last step of the time axis only",
    a new user's trial): each half is now a ChannelSlice of the step's frame."""
    c = 4
    m = CausalModel(c, opset=13)
    h = m.causal_conv("x", c, 2 * c, 3, 2)
    if form == "split":
        a = m.add("Split", [h, m.const([c, c], np.int64)], outputs=2, axis=1)
        b = f"{a}_1"
    elif form == "slices":
        a = m.add("Slice", [h, m.const([0], np.int64), m.const([c], np.int64),
                            m.const([1], np.int64)])
        b = m.add("Slice", [h, m.const([-c], np.int64), m.const([2 ** 62], np.int64),
                            m.const([1], np.int64)])
    else:
        a = m.add("Slice", [h, m.const([0], np.int64), m.const([2 * c], np.int64),
                            m.const([1], np.int64), m.const([2], np.int64)])
        b = m.add("Slice", [h, m.const([1], np.int64), m.const([2 * c], np.int64),
                            m.const([1], np.int64), m.const([2], np.int64)])
    gate = m.add("Mul", [m.add("Tanh", [a]), m.add("Sigmoid", [b])])
    y = m.add("Add", [m.causal_conv(gate, c, c, 2), "x"])
    path = m.save(tmp_path / "m.onnx", [y])
    program = _program(path)
    slices = [(op.start, op.step) for op in program.ops if isinstance(op, ChannelSlice)]
    assert sorted(slices) == ([(0, 2), (1, 2)] if form == "strided" else [(0, 1), (c, 1)])
    stream_against_window(program, lambda t: path, _input(2, c, 12), rtol=RTOL)


def test_the_last_steps_channels_split_stream_exactly(tmp_path):
    """A Split of the head [N, C] (the last step, gathered) along its channels, each half its
    own output: ChannelSlices of the head's frame (it was refused as slicing "as if it had a
    time axis", a reviewer's find); a Slice of another axis of a head is refused naming it."""
    c = 6
    m = CausalModel(c)
    h = m.causal_conv("x", c, 2 * c, 3)
    last = m.add("Gather", [h, m.const(-1, np.int64)], axis=2)
    a = m.add("Split", [last, m.const([c, c], np.int64)], outputs=2, axis=1)
    path = m.save(tmp_path / "m.onnx", [a, f"{a}_1"])
    program = _program(path)
    assert sum(isinstance(op, ChannelSlice) for op in program.ops) == 2
    stream_against_window(program, lambda t: path, _input(2, c, 8), rtol=RTOL)
    # torch's x[:, :, -1:] keeps [N, C, 1]: its channels slice the same
    m = CausalModel(c)
    last = m.add("Slice", [m.causal_conv("x", c, 2 * c, 3), m.const([-1], np.int64),
                           m.const([2 ** 62], np.int64), m.const([2], np.int64)])
    y = m.add("Slice", [last, m.const([1], np.int64), m.const([2 * c], np.int64),
                        m.const([1], np.int64), m.const([2], np.int64)])
    path = m.save(tmp_path / "c1.onnx", [y])
    program = _program(path)
    assert [o.shape for o in program.outputs] == [(c, 1)]
    stream_against_window(program, lambda t: path, _input(2, c, 8), rtol=RTOL)
    # another axis of a head: refused, naming it
    m = CausalModel(c)
    last = m.add("Unsqueeze", [m.add("Gather", [m.causal_conv("x", c, c, 3),
                                                m.const(-1, np.int64)], axis=2),
                               m.const([1], np.int64)])
    y = m.add("Slice", [last, m.const([0], np.int64), m.const([3], np.int64),
                        m.const([2], np.int64)])
    path = m.save(tmp_path / "bad.onnx", [y])
    with pytest.raises(ModelError, match=r"slices 0:3:1 of axis 2 of the last step's \[\?, 1, "
                                         r"6\]; a stream slices a head along its channels "
                                         r"\(axis 1\) where every axis after it is 1"):
        _program(path)
    # a Slice that keeps a whole axis (the batch here) changes nothing and streams
    m = CausalModel(c)
    last = m.add("Gather", [m.causal_conv("x", c, c, 3), m.const(-1, np.int64)], axis=2)
    y = m.add("Slice", [last, m.const([0], np.int64), m.const([2 ** 62], np.int64),
                        m.const([0], np.int64)])
    path = m.save(tmp_path / "whole.onnx", [y])
    stream_against_window(_program(path), lambda t: path, _input(2, c, 6), rtol=RTOL)


def test_depthwise_batchnorm_gates_and_a_sliced_head_stream_exactly(tmp_path):
    """A depthwise convolution after a left Pad, a 1x1 convolution, BatchNorm, a gated
    activation (tanh * sigmoid of two convolutions), a per-channel PReLU, a grouped
    convolution; the head a Slice [-1:] flattened, BatchNorm on the head, MatMul + Add,
    Softmax; and a second output, the per-step sequence of a channel LogSoftmax."""
    c = 6
    m = CausalModel(c)
    dw = m.causal_conv("x", c, c, 3, 2, group=c, form="pad")
    h = m.add("Conv", [dw, m.weight(c, c, 1)], kernel_shape=[1])
    bn = [m.const(v) for v in (m.rng.uniform(0.5, 2, c), m.rng.standard_normal(c),
                               m.rng.standard_normal(c) * 0.1, m.rng.uniform(0.5, 2, c))]
    h = m.add("BatchNormalization", [h] + bn, epsilon=1e-3)
    gate = m.add("Mul", [m.add("Tanh", [m.causal_conv(h, c, c, 2)]),
                         m.add("Sigmoid", [m.causal_conv(h, c, c, 2)])])
    h = m.add("PRelu", [m.add("Add", [gate, h]), m.const(m.rng.uniform(0, 0.5, (c, 1)))])
    h = m.add("Relu", [m.causal_conv(h, c, c, 3, group=2)])
    seq = m.add("LogSoftmax", [h], axis=1)
    last = m.add("Flatten", [m.add("Slice", [h, m.const([-1], np.int64),
                                             m.const([2 ** 62], np.int64),
                                             m.const([2], np.int64)])], axis=1)
    bn2 = [m.const(v) for v in (m.rng.uniform(0.5, 2, c), m.rng.standard_normal(c),
                                m.rng.standard_normal(c) * 0.1, m.rng.uniform(0.5, 2, c))]
    last = m.add("BatchNormalization", [last] + bn2)
    fc = m.add("Add", [m.add("MatMul", [last, m.weight(c, 5)]), m.const(np.arange(5) * 0.1)])
    y = m.add("Softmax", [fc], axis=1)
    path = m.save(tmp_path / "m.onnx", [y, seq])
    program = _program(path)
    groups = sorted(op.groups for op in program.ops if isinstance(op, CausalConv))
    assert groups == [1, 1, 1, 1, 2, c]
    by_name = {o.name: o for o in program.outputs}
    assert by_name[seq].per_step_sequence and by_name[seq].shape == (c,)
    assert by_name[y].shape == (5,) and not by_name[y].per_step_sequence
    stream_against_window(program, lambda t: path, _input(3, c, 10), rtol=RTOL)


def test_activations_and_per_channel_constants_stream_exactly(tmp_path):
    """Every activation the step runs, Add/Sub/Mul/Div/Max/Min with constants per channel
    ([1, C, 1], [C, 1]), scalar and first, Dropout and Identity, a MatMul W @ x (per step),
    two outputs that are per-step sequences."""
    c = 4
    m = CausalModel(c, opset=20)
    h = m.causal_conv("x", c, c, 3)
    per_channel = m.const(m.rng.uniform(0.5, 1.5, (1, c, 1)))
    chain = [("Sigmoid", {}), ("Tanh", {}), ("LeakyRelu", {"alpha": 0.2}), ("Elu", {}),
             ("Softplus", {}), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}), ("Softsign", {}),
             ("Selu", {}), ("Erf", {}), ("Neg", {}), ("Abs", {}), ("Sqrt", {}), ("Exp", {}),
             ("HardSwish", {}), ("Mish", {}), ("Gelu", {}), ("Gelu", {"approximate": "tanh"}),
             ("Dropout", {}), ("Identity", {})]
    outs = []
    for k, (op, attrs) in enumerate(chain):
        h = m.add(op, [h], **attrs)
        if op in ("Neg", "Exp"):
            h = m.add("Mul", [h, per_channel])
        if k % 4 == 3:                    # keep the values in a range every op likes
            h = m.add("Add", [m.causal_conv(h, c, c, 2), m.const([[0.1]] * c)])
    h = m.add("Clip", [h, m.const(-0.5), m.const(0.7)])
    h = m.add("Sub", [m.const(0.25), m.add("Div", [h, per_channel])])
    h = m.add("Max", [m.add("Min", [h, m.const([0.6])]), m.const(-0.4)])
    outs.append(m.add("MatMul", [m.weight(3, c), h]))
    outs.append(m.add("Relu", [m.causal_conv(h, c, c, 2, 3)]))
    path = m.save(tmp_path / "m.onnx", outs)
    program = _program(path)
    kinds = {op.kind for op in program.ops if isinstance(op, (Pointwise, Binary))}
    assert {"gelu_erf", "gelu_tanh", "hard_sigmoid", "elu", "leaky_relu", "clip", "softplus",
            "erf", "sqrt", "exp", "abs", "neg", "tanh", "sigmoid", "add", "sub", "mul", "div",
            "max", "min"} <= kinds
    assert all(o.per_step_sequence for o in program.outputs)
    # atol, measured: the MatMul's outputs cancel to about 1e-3 from terms of about 0.3, so
    # float32's rounding of the terms in ONNX Runtime (6e-8 of each) leaves 5e-8 absolute,
    # 6e-5 relative to the result; every other value meets rtol 1e-5 alone
    stream_against_window(program, lambda t: path, _input(2, c, 8), rtol=RTOL, atol=1e-6)


# -- refusals: the layer named, and why ------------------------------------------------------
def _conv_then(op: str, inputs_after=(), **attrs):
    """A causal convolution, then `op` on its output (and `inputs_after`), named 'culprit'."""
    def build(m):
        h = m.causal_conv("x", 2, 4, 2)
        return m.add(op, [h] + [m.const(v, np.asarray(v).dtype) for v in inputs_after],
                     name="culprit", **attrs)
    return build


def _with_head(build):
    def head(m):
        return m.dense_head(build(m), 4, 3)
    return head


def _second_conv(k, pads, strides=1):
    def build(m):
        h = m.causal_conv("x", 2, 4, 2)
        return m.add("Conv", [h, m.weight(4, 4, k)], name="culprit", kernel_shape=[k],
                     pads=pads, strides=[strides])
    return build


def _concat_time(m):
    h = m.causal_conv("x", 2, 2, 2)
    return m.add("Concat", [h, "x"], name="culprit", axis=2)


def _broadcast_last(m):
    h = m.causal_conv("x", 2, 2, 2)
    last = m.add("Gather", [h, m.const([-1], np.int64)], axis=2)
    return m.add("Add", [h, last], name="culprit")


def _flatten_time(m):
    h = m.causal_conv("x", 2, 2, 2)
    return m.add("Flatten", [h], name="culprit", axis=1)


def _no_conv(m):
    return m.add("Gather", [m.add("Relu", ["x"]), m.const(-1, np.int64)], axis=2)


def _time_constant(m):
    h = m.causal_conv("x", 2, 2, 2)
    return m.add("Add", [h, m.const(np.ones((1, 2, 7)))], name="culprit")


def _pad_after(m):
    h = m.causal_conv("x", 2, 2, 2)
    return m.add("Pad", [h, m.const([0, 0, 1, 0, 0, 0], np.int64)], name="culprit")


def _chomp_not_cut(m):
    h = m.add("Conv", ["x", m.weight(2, 2, 3)], name="culprit", kernel_shape=[3], pads=[2, 2])
    return m.add("Relu", [h])


REFUSED = {
    "symmetric padding": (_second_conv(3, [1, 1]), "pads_begin 1 on the time axis"),
    "end padding kept": (_with_head(_chomp_not_cut), "pads_end 2 on the time axis"),
    "a stride": (_second_conv(2, [1, 0], strides=2), "stride 2 over time"),
    "pooling": (_conv_then("MaxPool", kernel_shape=[2]), "pools over the time axis"),
    "softmax over time": (_conv_then("Softmax", axis=2), "a softmax over the time axis"),
    "a reduction over time": (_conv_then("ReduceMean", axes=[2]),
                              "reduces over the time axis"),
    "a transpose": (_conv_then("Transpose", perm=[0, 2, 1]), "moves the time axis"),
    "a concat over time": (_concat_time, "concatenates along the time axis"),
    "a step not the last": (_with_head(_conv_then("Slice", ([0], [1], [2]))),
                            "keeps steps 0:1:1 of the time axis"),
    "the first step": (_conv_then("Gather", (np.int64(0),), axis=2),
                       "reads step 0 of the time axis, not the last"),
    "the last step broadcast back": (_broadcast_last, "combines a sequence [N, C, T] with a "
                                                      "tensor of the last step"),
    "time flattened into channels": (_flatten_time, "the time axis must stay the last axis"),
    "a constant along time": (_time_constant, "changes along the time axis"),
    "a Pad not before a convolution": (_pad_after, "pads the sequence"),
}


@pytest.mark.parametrize("form", sorted(REFUSED))
def test_a_model_that_cannot_stream_is_refused_naming_the_layer_and_why(tmp_path, form):
    build, why = REFUSED[form]
    m = CausalModel(2, length=7)
    path = m.save(tmp_path / "m.onnx", [build(m)])
    with pytest.raises(ModelError) as e:
        _program(path)
    text = str(e.value)
    assert text.startswith("cannot stream layer 'culprit' (type "), text
    assert "m.onnx" in text and why in text, text


def test_a_model_with_no_causal_convolution_is_refused(tmp_path):
    m = CausalModel(2)
    path = m.save(tmp_path / "m.onnx", [_no_conv(m)])
    with pytest.raises(ModelError, match="no causal convolution reads past steps of its input "
                                         "layer 'x' .*no causal structure"):
        _program(path)


def test_a_custom_layer_is_refused(tmp_path):
    m, h = _stack(2, (1, 1))
    path = m.save(tmp_path / "m.onnx", [m.dense_head(h, 6, 4)])
    with pytest.raises(ModelError, match="cannot stream layer 'relu8' .*a custom layer"):
        _program(path, is_builtin=lambda node: node.name != "relu8")


def test_a_second_input_with_a_time_axis_is_refused(tmp_path):
    import onnx
    from onnx import TensorProto, helper
    m, h = _stack(2, (1,))
    path = m.save(tmp_path / "m.onnx", [m.add("Add", [h, "z"], name="culprit")])
    model = onnx.load(str(path))
    model.graph.input.append(helper.make_tensor_value_info("z", TensorProto.FLOAT,
                                                           ["N", 6, "T"]))
    onnx.save(model, str(path))
    with pytest.raises(ModelError, match="cannot stream layer 'z' .*a second model input with "
                                         "a time axis"):
        _program(path)


@pytest.mark.parametrize("axis, shape", [(1, ["N", 2, "T"]), (-1, ["N", 2, 3, "T"])])
def test_a_time_axis_that_is_not_the_last_of_n_c_t_is_refused(tmp_path, axis, shape):
    import onnx
    m, h = _stack(2, (1,))
    path = m.save(tmp_path / "m.onnx", [h])
    if len(shape) == 4:
        model = onnx.load(str(path))
        del model.graph.node[:]
        model.graph.node.append(onnx.helper.make_node("Relu", ["x"], ["y"]))
        del model.graph.output[:]
        model.graph.output.append(onnx.helper.make_tensor_value_info("y", 1, shape))
        model.graph.input[0].CopyFrom(onnx.helper.make_tensor_value_info("x", 1, shape))
        onnx.save(model, str(path))
    with pytest.raises(ModelError, match=r"cannot stream layer 'x' .*a stream steps an input "
                                         r"\[N, C, T\] along its last axis"):
        _program(path, axis=axis)


def _ir_conv_bn(w, gamma, beta, mean, var, conv_attrs, bn_attrs=None):
    """An IR graph (OpenVINO's spelling): x [1, C, ?] -> Convolution -> BatchNormInference."""
    from customlayers.graph.graph import Graph, Node, Port
    cout, cin = w.shape[:2]
    g = Graph("ir")
    seq = lambda c: Port((1, c, None), "f32")  # noqa: E731
    g.add_node(Node("x", "x", "Parameter", outputs=[seq(cin)], location="m.xml:3"))
    consts = {"w": w, "gamma": gamma, "beta": beta, "mean": mean, "var": var}
    for name, value in consts.items():
        g.add_node(Node(name, name, "Const", outputs=[Port(value.shape, "f32")], value=value))
    g.add_node(Node("conv", "conv", "Convolution", conv_attrs, location="m.xml:9",
                    inputs=[seq(cin), Port(w.shape, "f32")], outputs=[seq(cout)]))
    g.add_node(Node("bn", "bn", "BatchNormInference", bn_attrs or {"epsilon": "0.001"},
                    inputs=[seq(cout)] + [Port((cout,), "f32")] * 4, outputs=[seq(cout)]))
    g.add_node(Node("out", "out", "Result", inputs=[seq(cout)]))
    g.connect("x", 0, "conv", 0)
    g.connect("w", 0, "conv", 1)
    g.connect("conv", 0, "bn", 0)
    for port, name in enumerate(("gamma", "beta", "mean", "var"), 1):
        g.connect(name, 0, "bn", port)
    g.connect("bn", 0, "out", 0)
    return g


def test_an_ir_batch_norm_inference_after_a_causal_convolution_streams_exactly():
    """The IR spelling (an OpenVINO model): Convolution padded at the start, then
    BatchNormInference, read as a per-channel scale and shift folded into the convolution;
    against the whole-window model in numpy."""
    rng = np.random.default_rng(3)
    cin, cout, k, d = 3, 4, 3, 2
    w = rng.standard_normal((cout, cin, k)).astype(np.float32)
    gamma, beta, mean = (rng.standard_normal(cout).astype(np.float32) for _ in range(3))
    var = rng.uniform(0.5, 2, cout).astype(np.float32)
    g = _ir_conv_bn(w, gamma, beta, mean, var, {"strides": "1", "dilations": str(d),
                                                "pads_begin": str((k - 1) * d), "pads_end": "0"})
    program = stream_program(g)
    assert [type(op).__name__ for op in program.ops] == ["CausalConv"]    # the BN folded in
    from customlayers.ops.stream.reference import ReferenceStream
    x = _input(2, cin, 9).astype(np.float64)
    padded = np.concatenate([np.zeros((2, cin, (k - 1) * d)), x], axis=2)
    conv = sum(np.einsum("oc,nct->not", w[:, :, j], padded[:, :, j * d:j * d + 9])
               for j in range(k))
    scale = gamma / np.sqrt(var.astype(np.float64) + 1e-3)
    want = conv * scale[:, None] + (beta - mean * scale)[:, None]
    stream = ReferenceStream(program, 2)
    got = np.stack([stream.step(x[:, :, t])["out"] for t in range(9)], axis=2)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=1e-12)


# -- a mutated causal model is streamed or refused, never a crash -------------------------
def _fuzz_seeds(folder: Path) -> list[bytes]:
    m, h = _stack(3, (1, 2))
    a = m.save(folder / "a.onnx", [m.dense_head(h, 6, 4)])
    m, h = _stack(2, (1,), form="pad", length=9)
    b = m.save(folder / "b.onnx", [m.dense_head(h, 6, 4, pick="slice"), h])
    return [a.read_bytes(), b.read_bytes()]


def test_a_mutated_causal_model_streams_or_is_refused_with_a_model_error(tmp_path):
    """tests/model_mutators.py's ONNX mutations (op types, attributes, dims, initializers,
    inputs changed) of two causal models: a model read is converted or refused with a
    ModelError, never another exception (found so: a float index of a Gather)."""
    import random
    import model_mutators as mm
    from customlayers.errors import CustomLayersError
    seeds = _fuzz_seeds(tmp_path)
    converted = refused = 0
    for seed in range(1000):
        rng = random.Random(seed)
        data = rng.choice(seeds)
        for _ in range(rng.randint(1, 3)):
            data = mm.mutate_onnx(data, rng)
        try:
            graph = read_model(mm.write_onnx(tmp_path, data))
        except CustomLayersError:
            continue
        try:
            stream_program(graph)
            converted += 1
        except ModelError:
            refused += 1
    assert converted and refused


@pytest.mark.parametrize("attrs, why", [
    ({"strides": "1", "dilations": "x", "pads_begin": "2", "pads_end": "0"},
     "dilations='x' is not a list of integers"),
    ({"strides": "1", "dilations": "0", "pads_begin": "0", "pads_end": "0"},
     "kernel 3 with dilations [0]"),
    ({"strides": "1", "dilations": "1", "pads_begin": "2", "pads_end": "-1"},
     "pads_end -1 on the time axis"),
])
def test_an_ir_convolution_with_bad_attributes_is_refused_by_name(attrs, why):
    ones = np.ones(4, np.float32)
    g = _ir_conv_bn(np.ones((4, 3, 3), np.float32), ones, ones, ones, ones, attrs)
    with pytest.raises(ModelError, match="cannot stream layer 'conv' .*m.xml:9") as e:
        stream_program(g)
    assert why in str(e.value)


def test_an_ir_batch_norm_with_an_epsilon_that_is_not_a_number_is_refused_by_name():
    ones = np.ones(4, np.float32)
    g = _ir_conv_bn(np.ones((4, 3, 3), np.float32), ones, ones, ones, ones,
                    {"strides": "1", "dilations": "1", "pads_begin": "2", "pads_end": "0"},
                    {"epsilon": "1e-3x"})
    with pytest.raises(ModelError, match="cannot stream layer 'bn' .*epsilon='1e-3x' is not a "
                                         "number"):
        stream_program(g)


def test_ir_activations_stream_exactly():
    """IR-only activations (Swish with and without beta, HSigmoid, Clamp, Elu) after a causal
    convolution, against numpy over the whole window."""
    from customlayers.graph.graph import Graph, Node, Port
    from customlayers.ops.stream.reference import ReferenceStream
    rng = np.random.default_rng(5)
    w = rng.standard_normal((3, 2, 2)).astype(np.float32)
    seq = Port((1, 3, None), "f32")
    g = Graph("ir")
    g.add_node(Node("x", "x", "Parameter", outputs=[Port((1, 2, None), "f32")]))
    g.add_node(Node("w", "w", "Const", outputs=[Port(w.shape, "f32")], value=w))
    g.add_node(Node("conv", "conv", "Convolution", {"strides": "1", "dilations": "1",
                                                      "pads_begin": "1", "pads_end": "0"},
                    inputs=[Port((1, 2, None), "f32"), Port(w.shape, "f32")], outputs=[seq]))
    g.connect("x", 0, "conv", 0)
    g.connect("w", 0, "conv", 1)
    chain = [("Swish", {}, ()), ("Swish", {}, (np.float32(1.7),)), ("HSigmoid", {}, ()),
             ("Elu", {"alpha": "0.5"}, ()), ("Clamp", {"min": "-0.2", "max": "0.9"}, ())]
    last = "conv"
    for k, (kind, attrs, params) in enumerate(chain):
        name = f"a{k}"
        g.add_node(Node(name, name, kind, attrs, inputs=[seq] + [Port((), "f32")] * len(params),
                        outputs=[seq]))
        g.connect(last, 0, name, 0)
        for j, value in enumerate(params, 1):
            g.add_node(Node(f"{name}p{j}", "p", "Const", outputs=[Port((), "f32")], value=value))
            g.connect(f"{name}p{j}", 0, name, j)
        last = name
    g.add_node(Node("out", "out", "Result", inputs=[seq]))
    g.connect(last, 0, "out", 0)
    program = stream_program(g)
    x = _input(2, 2, 6).astype(np.float64)
    padded = np.concatenate([np.zeros((2, 2, 1)), x], axis=2)
    v = sum(np.einsum("oc,nct->not", w[:, :, j], padded[:, :, j:j + 6]) for j in range(2))
    v = v / (1 + np.exp(-v))
    v = v / (1 + np.exp(-1.7 * v))
    v = np.clip(v + 3, 0, 6) / 6
    v = np.where(v > 0, v, 0.5 * (np.exp(v) - 1))
    want = np.clip(v, -0.2, 0.9)
    stream = ReferenceStream(program, 2)
    got = np.stack([stream.step(x[:, :, t])["out"] for t in range(6)], axis=2)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=1e-12)
