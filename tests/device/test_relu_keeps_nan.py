"""A ReLU keeps a NaN wherever it runs: alone (the ReLU op), and fused into its producer (a
convolution's epilogue in every form, a BatchNorm's channel affine, the fused TCN block, an RNN's
activation). fmax(NaN, 0) is 0: the fused forms used it and turned a NaN input into zeros (a new
user's trial: Conv then Relu gave 0 where ONNX Runtime gives NaN), hiding it from the non-finite
check too. ONNX Runtime itself keeps the NaN in its Relu op and in an unfused Conv then Relu, but
not where it fuses the ReLU (a depthwise Conv) or inside an RNN: so the NaNs expected are those of
the same model with every Relu made an Identity (a ReLU changes no value's finiteness), run by
ONNX Runtime, and every other value is compared with ONNX Runtime's run of the model itself."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from customlayers.api import Network  # noqa: E402
from customlayers.jit.launch import CompileContext, DeviceTraits, FusedEpilogue  # noqa: E402
from customlayers.jit.tensor import TensorDesc  # noqa: E402
from customlayers.ops import get_op  # noqa: E402
from launch_runner import run_launches  # noqa: E402

RNG = np.random.default_rng(57)
GPU = DeviceTraits("GPU", compute_units=16, max_work_group_size=256)


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def _save(path: Path, nodes, x_shape, y_shape, inits, opset=17) -> Path:
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y_shape))],
        [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8          # what every onnxruntime of these opsets reads
    onnx.save(model, path)
    return path


def _with_nans(shape, at) -> np.ndarray:
    x = RNG.standard_normal(shape).astype(np.float32)
    for index in at:
        x[index] = np.nan
    return x


def _ort(path: Path, x: np.ndarray) -> np.ndarray:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]


def _check(net_out: np.ndarray, path: Path, x: np.ndarray) -> None:
    """NaNs where the model without its ReLUs has them; the rest as ONNX Runtime gives it."""
    model = onnx.load(str(path))
    for node in model.graph.node:
        if node.op_type == "Relu":
            node.op_type = "Identity"
        if node.op_type == "RNN":     # (ONNX Runtime's RNN takes no Identity: Affine 1, 0)
            node.attribute.extend([helper.make_attribute("activation_alpha", [1.0]),
                                   helper.make_attribute("activation_beta", [0.0])])
            for attr in node.attribute:
                if attr.name == "activations":
                    attr.strings[:] = [b"Affine" if a == b"Relu" else a for a in attr.strings]
    no_relu = path.with_name(path.stem + "_no_relu.onnx")
    onnx.save(model, str(no_relu))
    nan_at = np.isnan(_ort(no_relu, x))
    assert nan_at.any() and not nan_at.all(), "the case must put NaNs in part of the output"
    np.testing.assert_array_equal(np.isnan(net_out), nan_at)
    want = _ort(path, x)
    np.testing.assert_allclose(net_out[~nan_at], want[~nan_at], rtol=1e-5, atol=1e-5)


def _conv(x_name, out, cin, cout, k, pads, prefix, inits, nodes, group=1):
    inits[f"{prefix}w"] = RNG.standard_normal((cout, cin // group, k, k)) * 0.3
    inits[f"{prefix}b"] = RNG.standard_normal(cout)
    nodes.append(helper.make_node("Conv", [x_name, f"{prefix}w", f"{prefix}b"], [out],
                                  pads=[pads] * 4, group=group))


@pytest.mark.parametrize("form", ["conv+relu", "conv+add+relu", "conv+relu+add+relu",
                                  "depthwise+relu", "batchnorm+relu"])
def test_a_fused_relu_keeps_a_nan_input(tmp_path, engine, form):
    inits, nodes = {}, []
    c = 8
    if form == "batchnorm+relu":
        for name, value in (("s", RNG.random(c) + 0.5), ("bb", RNG.standard_normal(c)),
                            ("m", RNG.standard_normal(c)), ("v", RNG.random(c) + 0.5)):
            inits[name] = value
        nodes.append(helper.make_node("BatchNormalization", ["x", "s", "bb", "m", "v"], ["h"]))
    elif form == "depthwise+relu":
        _conv("x", "h", c, c, 3, 1, "d", inits, nodes, group=c)
    else:
        _conv("x", "h", c, c, 3, 1, "a", inits, nodes)
    if form == "conv+add+relu":
        nodes.append(helper.make_node("Add", ["h", "x"], ["h2"]))
        nodes.append(helper.make_node("Relu", ["h2"], ["y"]))
    elif form == "conv+relu+add+relu":
        nodes.append(helper.make_node("Relu", ["h"], ["r"]))
        _conv("r", "h3", c, c, 3, 1, "b", inits, nodes)
        nodes.append(helper.make_node("Add", ["h3", "x"], ["h4"]))
        nodes.append(helper.make_node("Relu", ["h4"], ["y"]))
    else:
        nodes.append(helper.make_node("Relu", ["h"], ["y"]))
    shape = (1, c, 9, 10)
    path = _save(tmp_path / "m.onnx", nodes, shape, shape, inits)
    x = _with_nans(shape, [(0, 2, 4, 5), (0, 5, 0, 0)])
    net = Network(str(path), engine=engine)
    _check(net.infer({"x": x})["y"], path, x)


@pytest.mark.parametrize("epilogue", [FusedEpilogue(bias=True, relu=True),
                                      FusedEpilogue(bias=True, relu=True, residual=True,
                                                    pre_relu=True)],
                         ids=["bias+relu", "bias+relu+residual+relu"])
def test_every_gpu_convolution_form_keeps_a_nan_through_its_relu(cl_env, epilogue):
    """The GPU forms' epilogue (conv_epilogue.cl), through GPU traits on the test device: the
    direct kernel, the blocked ones and the implicit GEMM, each against NaN positions that a
    numpy reference gives."""
    from customlayers.ops.nn._conv_variants import DirectVariant, OcbVariant
    x = _with_nans((1, 8, 7, 9), [(0, 3, 3, 4)])
    w = (RNG.standard_normal((8, 8, 3, 3)) * 0.3).astype(np.float32)
    bias = RNG.standard_normal(8).astype(np.float32)
    residual = RNG.standard_normal((1, 8, 7, 9)).astype(np.float32)
    raw = {"strides": "1,1", "dilations": "1,1", "pads_begin": "1,1", "pads_end": "1,1"}
    op = get_op("Convolution")
    parsed = op.parse_attributes(raw, "layer")
    arrays = [x, w, bias] + ([residual] if epilogue.residual else [])
    descs = [TensorDesc(a.shape) for a in arrays]
    out = [TensorDesc(s) for s, _ in op.infer_shapes(parsed, descs[:2], {})]
    listed = op.kernel_variants(parsed, descs, out, {1: w}, CompileContext(GPU, epilogue=epilogue))
    picked = [DirectVariant()] + [v for v in listed if isinstance(v, OcbVariant)][:1] + \
        [v for v in listed if v.name.startswith("gemm")][:1]
    assert len(picked) == 3
    # the NaN reaches the 3x3 neighbourhood of (3, 4) in every output channel
    want = np.zeros((1, 8, 7, 9), bool)
    want[:, :, 2:5, 3:6] = True
    for v in picked:
        launches = op.launches(parsed, descs, out, {1: w},
                               CompileContext(GPU, epilogue=epilogue, variant=v))
        got = run_launches(cl_env, launches, arrays, descs, out)[0]
        np.testing.assert_array_equal(np.isnan(got), want, err_msg=v.name)
        assert (got[~want] >= 0).all(), v.name


def test_the_fused_tcn_block_keeps_a_nan(tmp_path, engine):
    """conv_temporal_blocks (fuse_temporal_blocks=True): both ReLUs and the one after the
    residual Add."""
    from tcn_models import Spec, tcn_model
    path = tcn_model(tmp_path / "tcn.onnx", 1, 40, [Spec(1, 6, 3, 1), Spec(6, 6, 3, 2)])
    x = _with_nans((1, 1, 40), [(0, 0, 17)])
    net = Network(str(path), engine=engine, fuse_temporal_blocks=True)
    assert any(step.type.startswith("TemporalBlocks") for step in net.plan.steps)
    _check(net.infer({"x": x})["y"], path, x)


def test_an_rnn_with_relu_keeps_a_nan(tmp_path, engine):
    hidden, feat, steps = 5, 4, 6
    inits = {"W": RNG.standard_normal((1, hidden, feat)) * 0.4,
             "R": RNG.standard_normal((1, hidden, hidden)) * 0.4}
    nodes = [helper.make_node("RNN", ["x", "W", "R"], ["y"], hidden_size=hidden,
                              activations=["Relu"])]
    path = _save(tmp_path / "rnn.onnx", nodes, (steps, 1, feat), (steps, 1, 1, hidden), inits)
    x = _with_nans((steps, 1, feat), [(3, 0, 2)])
    net = Network(str(path), engine=engine)
    _check(net.infer({"x": x})["y"], path, x)


def test_a_streamed_step_keeps_a_nan_frame(tmp_path, engine):
    """The step kernel's ReLU (ops/stream/step_exprs.py): a NaN in frame 5 gives the NaNs that
    the whole window up to step 5 gives at its last step (a NaN frame gave all zeros)."""
    from tcn_models import Spec, tcn_model
    length = 12
    path = tcn_model(tmp_path / "tcn.onnx", 1, length, [Spec(2, 4, 3, 1), Spec(4, 4, 3, 2)])
    x = _with_nans((1, 2, length), [(0, 1, 5)])
    stream = Network(str(path), engine=engine).streaming()
    steps = [stream.step(x[:, :, t])["y"] for t in range(length)]
    window = Network(str(path), engine=engine, fuse_temporal_blocks=False)
    full = window.infer({"x": x})["y"]
    for t in (4, 5, 9):
        np.testing.assert_array_equal(np.isnan(steps[t]).reshape(-1),
                                      np.isnan(full[:, :, t]).reshape(-1), err_msg=f"step {t}")
    assert not np.isnan(steps[4]).any() and np.isnan(steps[5]).any()


def test_hard_sigmoid_keeps_a_nan(tmp_path, engine):
    """HardSigmoid's clamp, fmax(0, fmin(1, a*x + b)), gave 1 for NaN; ONNX Runtime gives NaN
    (a reviewer's find)."""
    nodes = [helper.make_node("HardSigmoid", ["x"], ["y"], alpha=0.3, beta=0.4)]
    path = _save(tmp_path / "hs.onnx", nodes, (1, 2, 3, 4), (1, 2, 3, 4), {})
    x = _with_nans((1, 2, 3, 4), [(0, 1, 2, 3)])
    got = Network(str(path), engine=engine).infer({"x": x})["y"]
    want = _ort(path, x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(want).sum() == 1
    np.testing.assert_allclose(got[~np.isnan(want)], want[~np.isnan(want)], rtol=1e-6)


@pytest.mark.parametrize("op,attrs", [("HardSigmoid", dict(alpha=0.3, beta=0.4)),
                                      ("Clip", {})], ids=["HardSigmoid", "Clip"])
def test_a_streamed_clamp_keeps_a_nan_frame(tmp_path, engine, op, attrs):
    """The step kernel's HardSigmoid and Clip (a second review's find: clamp() gave 0 for a
    NaN frame where infer() and ONNX Runtime give NaN)."""
    from tcn_models import Spec, tcn_model
    length = 10
    path = tcn_model(tmp_path / "tcn.onnx", 1, length, [Spec(2, 4, 3, 1)])
    model = onnx.load(str(path))
    out = model.graph.output[0].name
    model.graph.node[-1].output[0] = "pre"
    inputs = ["pre"]
    if op == "Clip":
        model.graph.initializer.extend([numpy_helper.from_array(np.float32(-0.5), "lo"),
                                        numpy_helper.from_array(np.float32(0.5), "hi")])
        inputs += ["lo", "hi"]
    model.graph.node.append(helper.make_node(op, inputs, [out], **attrs))
    onnx.save(model, str(path))
    x = _with_nans((1, 2, length), [(0, 1, 5)])
    stream = Network(str(path), engine=engine).streaming()
    steps = [stream.step(x[:, :, t])["y"] for t in range(length)]
    full = _ort(path, x)
    for t in (4, 5, 8):
        np.testing.assert_array_equal(np.isnan(steps[t]).reshape(-1),
                                      np.isnan(full[:, :, t]).reshape(-1), err_msg=f"step {t}")
    assert np.isnan(steps[5]).any()
