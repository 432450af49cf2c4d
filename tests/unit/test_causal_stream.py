"""passes/causal_stream.py: a whole-window causal model [N, C, T] as its step (issue 21, points 4
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
from customlayers.ops.stream.program import Binary, CausalConv, ChannelSoftmax, Pointwise
from customlayers.passes.causal_stream import stream_program

pytest.importorskip("onnxruntime")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from gpu_peers import TCN_KERNEL, onnx_tcn  # noqa: E402

RTOL = 1e-5


def _input(batch: int, channels: int, length: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((batch, channels, length)).astype(
        np.float32)


def _program(path, **kw):
    return stream_program(read_model(path), **kw)


# -- the seed's TCN ------------------------------------------------------------------------
@pytest.mark.parametrize("weight_norm", [False, True])
def test_seed_tcn_streams_exactly_at_every_step(tmp_path, weight_norm):
    """bench/gpu_peers.py's TCN (3 levels here: dilations 1, 2, 4, a receptive field of 85
    steps, longer than the 24 streamed) with its Gather of index T-1: one model per window
    length. weight_norm: torch's export of weight norm (constant ReduceL2, Div, Mul) is
    evaluated by the conversion; the step is the same chain of ops."""
    length, batch = 24, 3

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
def _stack(kernel: int, dilations, form: str = "chomp", channels: int = 6, cin: int = 2):
    """Causal convolutions with ReLUs and a residual Add, a head on the last step."""
    m = CausalModel(cin)
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
])
def test_causal_stacks_stream_exactly(tmp_path, kernel, dilations, form, length):
    m, h = _stack(kernel, dilations, form)
    path = m.save(tmp_path / "m.onnx", [m.dense_head(h, 6, 4)])
    program = _program(path)
    assert [c.history for c in program.convolutions] == [(kernel - 1) * d for d in dilations]
    stream_against_window(program, lambda t: path, _input(2, 2, length), rtol=RTOL)


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
