"""Issue 20: ONNX's losses, NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (ops/reduce/
loss.py), on small onnx.helper models: every reduction, ignore_index (in and out of the class
range, negative), per-class weights, N-D targets, the optional log_prob output, f32 against ONNX
Runtime and f64 against a float64 numpy reference; what they do not take is refused at load,
naming the node."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

from customlayers.api import Network  # noqa: E402
from customlayers.errors import CustomLayersError, ModelError  # noqa: E402
from customlayers.graph.onnx.reader import read_onnx  # noqa: E402

RNG = np.random.default_rng(20)
ELEM = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE,
        np.int64: TensorProto.INT64, np.int32: TensorProto.INT32}


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def _model(path: Path, op: str, feeds: dict, outputs: list[str], opset: int = 13,
           **attrs) -> Path:
    node = helper.make_node(op, list(feeds), outputs, name="the_loss", **attrs)
    inputs = [helper.make_tensor_value_info(k, ELEM[v.dtype.type], list(v.shape))
              for k, v in feeds.items()]
    graph = helper.make_graph([node], "g", inputs,
                              [helper.make_tensor_value_info(o, ELEM[next(iter(feeds.values()))
                                                                     .dtype.type], None)
                               for o in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _feeds(shape, dtype=np.float32, weight=False, ignore=None, target_dtype=np.int64):
    n, c, rest = shape[0], shape[1], shape[2:]
    feeds = {"x": RNG.standard_normal(shape).astype(dtype),
             "t": RNG.integers(0, c, (n, *rest)).astype(target_dtype)}
    if ignore is not None:               # a few targets are the ignored index
        flat = feeds["t"].reshape(-1)
        flat[::3] = ignore
    if weight:
        feeds["w"] = RNG.uniform(0.2, 2.0, c).astype(dtype)
    return feeds


def _reference(feeds, reduction, ignore=None, softmax=False):
    """The spec's NLL in float64: (loss, log_prob)."""
    x = feeds["x"].astype(np.float64)
    if softmax:
        m = x.max(axis=1, keepdims=True)
        x = x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))
    t = feeds["t"].astype(np.int64)
    c = x.shape[1]
    w = feeds["w"].astype(np.float64) if "w" in feeds else np.ones(c)
    keep = np.ones(t.shape, bool) if ignore is None else t != ignore
    safe = np.where(keep, t, 0)
    picked = np.take_along_axis(x, safe[:, None], axis=1)[:, 0]
    weights = np.where(keep, w[safe], 0.0)
    loss = -picked * weights
    if reduction == "sum":
        loss = loss.sum()
    elif reduction == "mean":
        loss = loss.sum() / weights.sum()
    return loss, x


CASES = [  # (shape, reduction, weight, ignore_index)
    ((3, 5), "none", False, None),
    ((3, 5), "sum", True, None),
    ((3, 5), "mean", False, None),
    ((4, 5, 6), "mean", True, 1),          # N-D target, weights and an ignored class
    ((2, 4, 3, 5), "sum", False, -1),      # a negative ignore_index outside the classes
    ((2, 3, 4, 2, 3), "none", True, 10),   # ignore_index past the classes
    ((130, 7), "mean", True, 2),           # more elements than the work-group that sums
]


@pytest.mark.parametrize("op", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
@pytest.mark.parametrize("shape,reduction,weight,ignore", CASES)
def test_losses_match_onnx_runtime(tmp_path, engine, op, shape, reduction, weight, ignore):
    feeds = _feeds(shape, weight=weight, ignore=ignore)
    attrs = {"reduction": reduction}
    if ignore is not None:
        attrs["ignore_index"] = ignore
    path = _model(tmp_path / "loss.onnx", op, feeds, ["loss"], **attrs)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = Network(read_onnx(path), engine=engine).infer(feeds)["loss"]
    assert got.shape == want[0].shape
    np.testing.assert_allclose(got, want[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
def test_losses_at_opset_12(tmp_path, engine, op):
    feeds = _feeds((4, 3, 2), weight=True, ignore=1)
    path = _model(tmp_path / "loss.onnx", op, feeds, ["loss"], opset=12, reduction="mean",
                  ignore_index=1)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = Network(read_onnx(path), engine=engine).infer(feeds)["loss"]
    np.testing.assert_allclose(got, want[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_softmax_cross_entropy_log_prob_output_and_f64(tmp_path, engine, reduction):
    feeds = _feeds((3, 6, 4), np.float64, weight=True, ignore=2, target_dtype=np.int32)
    path = _model(tmp_path / "sce.onnx", "SoftmaxCrossEntropyLoss", feeds, ["loss", "log_prob"],
                  reduction=reduction, ignore_index=2)
    got = Network(read_onnx(path), engine=engine).infer(feeds)
    loss, log_prob = _reference(feeds, reduction, ignore=2, softmax=True)
    assert got["loss"].dtype == np.float64 and got["log_prob"].dtype == np.float64
    np.testing.assert_allclose(got["loss"], loss, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got["log_prob"], log_prob, rtol=1e-12, atol=1e-12)


def test_nll_f64_mean_divides_by_the_counted_weights(tmp_path, engine):
    feeds = _feeds((5, 4, 3), np.float64, weight=True, ignore=0)
    path = _model(tmp_path / "nll.onnx", "NegativeLogLikelihoodLoss", feeds, ["loss"],
                  reduction="mean", ignore_index=0)
    got = Network(read_onnx(path), engine=engine).infer(feeds)["loss"]
    np.testing.assert_allclose(got, _reference(feeds, "mean", ignore=0)[0], rtol=1e-12)


def test_a_target_outside_the_classes_gives_nan_not_a_stray_read(tmp_path, engine):
    feeds = _feeds((3, 5))
    feeds["t"][1] = 7
    path = _model(tmp_path / "nll.onnx", "NegativeLogLikelihoodLoss", feeds, ["loss"],
                  reduction="none")
    got = Network(read_onnx(path), engine=engine).infer(feeds)["loss"]
    assert np.isnan(got[1]) and np.isfinite(got[[0, 2]]).all()


def test_an_unknown_reduction_is_refused_naming_the_node(tmp_path):
    feeds = _feeds((3, 5))
    path = _model(tmp_path / "nll.onnx", "NegativeLogLikelihoodLoss", feeds, ["loss"],
                  reduction="average")
    with pytest.raises(ModelError, match=r"the_loss.*reduction='average' is not one of"):
        read_onnx(path)


def test_a_float_target_is_refused_naming_the_node(tmp_path):
    feeds = _feeds((3, 5))
    feeds["t"] = feeds["t"].astype(np.float32)
    path = _model(tmp_path / "nll.onnx", "NegativeLogLikelihoodLoss", feeds, ["loss"])
    with pytest.raises(CustomLayersError, match=r"the_loss.*target"):
        Network(read_onnx(path))


@pytest.mark.parametrize("name,shape,what", [("t", (3, 1), r"input 1 \(target\) has shape \[3, 1\]"),
                                             ("w", (4,), r"input 2 \(weight\) has shape \[4\]")])
def test_a_target_or_weight_of_the_wrong_shape_is_refused_naming_the_node(tmp_path, name,
                                                                          shape, what):
    feeds = _feeds((3, 5, 2), weight=True)
    feeds[name] = np.zeros(shape, feeds[name].dtype)
    path = _model(tmp_path / "sce.onnx", "SoftmaxCrossEntropyLoss", feeds, ["loss"])
    with pytest.raises(ModelError, match=r"the_loss.*" + what):
        read_onnx(path)
