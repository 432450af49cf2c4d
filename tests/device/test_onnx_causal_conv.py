"""Issue 21 point 3: ONNX CausalConvWithState (opset 27) as a built-in op (ops/nn/causal_conv.py,
graph/onnx/ops/nn.py), on small onnx.helper models, against a float64 numpy reference written
here from the ONNX spec, ONNX's ReferenceEvaluator and ONNX Runtime (which knows opset 27 from
1.24 on; skipped where it does not): L = 1, L < K-1, L > K, with and without bias, past_state
and SiLU, batch 2, f32, f16 and f64. past_state and present_state as plain graph inputs and
outputs: feeding each chunk's present_state back as the next chunk's past_state equals one run
over the whole sequence. Bad forms refused naming the node."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from customlayers.api import Network  # noqa: E402
from customlayers.errors import BindingError, ModelError  # noqa: E402

RNG = np.random.default_rng(21)
ELEM = {np.float32: TensorProto.FLOAT, np.float16: TensorProto.FLOAT16,
        np.float64: TensorProto.DOUBLE}


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def model(path: Path, feeds: dict, *, activation: str | None = None, dims: dict | None = None,
          weight_init: np.ndarray | None = None) -> Path:
    """One CausalConvWithState node named 'ccs' over graph inputs `feeds` (input, weight, and
    bias and past_state where present; `weight_init`: the weight as an initializer instead),
    outputs y and present. `dims`: input name -> its declared dims (symbolic names allowed)."""
    order = ["input", "weight", "bias", "past_state"]
    names = [n if n in feeds or (n == "weight" and weight_init is not None) else ""
             for n in order]
    while names and not names[-1]:
        names.pop()
    attrs = {} if activation is None else {"activation": activation}
    node = helper.make_node("CausalConvWithState", names, ["y", "present"], name="ccs", **attrs)
    elem = ELEM[feeds["input"].dtype.type]
    dims = dims or {}
    inputs = [helper.make_tensor_value_info(n, elem, dims.get(n, list(a.shape)))
              for n, a in feeds.items()]
    inits = [] if weight_init is None else [onnx.numpy_helper.from_array(weight_init, "weight")]
    graph = helper.make_graph([node], "g", inputs,
                              [helper.make_tensor_value_info(o, elem, None)
                               for o in ("y", "present")], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 27)])
    m.ir_version = 10
    onnx.save(m, str(path))
    return path


def reference(x, w, bias=None, past=None, activation="none"):
    """(output, present_state) in float64, as the ONNX spec says."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    n, c, length = x.shape
    k = w.shape[2]
    pad = np.zeros((n, c, k - 1)) if past is None else np.asarray(past, np.float64)
    padded = np.concatenate([pad, x], axis=2)
    out = np.zeros((n, c, length))
    for m in range(k):
        out += w[None, :, 0, m, None] * padded[:, :, m:m + length]
    if bias is not None:
        out += np.asarray(bias, np.float64)[None, :, None]
    if activation in ("silu", "swish"):
        out = out / (1.0 + np.exp(-out))
    return out, padded[:, :, padded.shape[2] - (k - 1):]


def feeds_for(n, c, length, k, *, bias, past, dtype=np.float32) -> dict:
    feeds = {"input": RNG.standard_normal((n, c, length)).astype(dtype),
             "weight": RNG.standard_normal((c, 1, k)).astype(dtype)}
    if bias:
        feeds["bias"] = RNG.standard_normal(c).astype(dtype)
    if past:
        feeds["past_state"] = RNG.standard_normal((n, c, k - 1)).astype(dtype)
    return feeds


def ours(engine, path: Path, feeds: dict) -> tuple[np.ndarray, np.ndarray]:
    got = Network(path, engine=engine).infer(feeds)
    return got["y"], got["present"]


# L = 1 (a decode step), L = 2 < K - 1 = 4 (the state keeps part of the past), L = 9 > K
@pytest.mark.parametrize("length", [1, 2, 9])
@pytest.mark.parametrize("bias,past,activation", [
    (False, False, None), (True, False, "silu"), (False, True, "swish"), (True, True, None),
    (True, True, "silu")])
def test_matches_numpy_and_onnx_reference(tmp_path, engine, length, bias, past, activation):
    feeds = feeds_for(2, 3, length, 5, bias=bias, past=past)
    path = model(tmp_path / "ccs.onnx", feeds, activation=activation)
    y, present = ours(engine, path, feeds)
    ref_y, ref_present = reference(**{"x": feeds["input"], "w": feeds["weight"],
                                      "bias": feeds.get("bias"), "past": feeds.get("past_state"),
                                      "activation": activation or "none"})
    np.testing.assert_allclose(y, ref_y, rtol=1e-5, atol=1e-6)
    assert present.shape == (2, 3, 4) and present.dtype == np.float32
    np.testing.assert_array_equal(present, ref_present.astype(np.float32))   # a copy, exact
    want_y, want_present = ReferenceEvaluator(str(path)).run(None, feeds)
    np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(present, want_present)


def test_matches_onnx_runtime(tmp_path, engine):
    ort = pytest.importorskip("onnxruntime")
    feeds = feeds_for(3, 4, 7, 3, bias=True, past=True)
    path = model(tmp_path / "ccs.onnx", feeds, activation="silu")
    try:
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as e:          # an ONNX Runtime older than opset 27
        pytest.skip(f"ONNX Runtime {ort.__version__} does not run CausalConvWithState: {e}")
    want_y, want_present = session.run(["y", "present"], feeds)
    y, present = ours(engine, path, feeds)
    np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(present, want_present)


@pytest.mark.parametrize("dtype,rtol", [(np.float16, 2e-3), (np.float64, 1e-12)])
def test_half_and_double(tmp_path, engine, dtype, rtol):
    if dtype is np.float64 and "cl_khr_fp64" not in engine.device.extensions:
        pytest.skip("the device has no cl_khr_fp64")
    feeds = feeds_for(2, 3, 6, 4, bias=True, past=True, dtype=dtype)
    path = model(tmp_path / "ccs.onnx", feeds, activation="silu")
    y, present = ours(engine, path, feeds)
    ref_y, ref_present = reference(feeds["input"], feeds["weight"], feeds["bias"],
                                   feeds["past_state"], "silu")
    assert y.dtype == dtype and present.dtype == dtype
    np.testing.assert_allclose(y, ref_y, rtol=rtol, atol=rtol)
    np.testing.assert_array_equal(present, ref_present.astype(dtype))


@pytest.mark.parametrize("past", [False, True])
def test_kernel_size_one_has_an_empty_state(tmp_path, engine, past):
    feeds = feeds_for(2, 3, 5, 1, bias=True, past=past)     # a past_state (2, 3, 0) or none
    path = model(tmp_path / "ccs.onnx", feeds)
    y, present = ours(engine, path, feeds)
    np.testing.assert_allclose(y, reference(feeds["input"], feeds["weight"], feeds["bias"])[0],
                               rtol=1e-5, atol=1e-6)
    assert present.shape == (2, 3, 0)


def test_chunked_run_with_the_state_fed_back_equals_one_run(tmp_path, engine):
    """past_state a graph input, present_state a graph output: the user carries the state.
    The time axis is symbolic, so chunks of 1, 3 and 7 steps run on one network."""
    n, c, k, total = 2, 4, 4, 24
    weight = RNG.standard_normal((c, 1, k)).astype(np.float32)
    bias = RNG.standard_normal(c).astype(np.float32)
    x = RNG.standard_normal((n, c, total)).astype(np.float32)
    feeds = {"input": x, "bias": bias, "past_state": np.zeros((n, c, k - 1), np.float32)}
    path = model(tmp_path / "ccs.onnx", feeds, activation="silu", weight_init=weight,
                 dims={"input": [n, c, "time"]})
    net = Network(path, engine=engine)
    whole = net.infer(feeds)
    state, pieces, start = feeds["past_state"], [], 0
    for size in (1, 3, 7, 1, 2, 7, 3):
        got = net.infer({"input": x[:, :, start:start + size], "bias": bias,
                         "past_state": state})
        pieces.append(got["y"])
        state = got["present"]
        start += size
    assert start == total
    np.testing.assert_allclose(np.concatenate(pieces, axis=2), whole["y"], rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(state, whole["present"])
    np.testing.assert_allclose(whole["y"], reference(x, weight, bias, None, "silu")[0],
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("change,words", [
    ({"activation": "relu"}, "activation='relu' is not one of 'none', 'silu', 'swish'"),
    ({"weight": (3, 2, 4)}, "weight (C, 1, K)"),
    ({"past_state": (2, 3, 2)}, "past_state must be [2, 3, 3]"),
])
def test_bad_forms_are_refused_naming_the_node(tmp_path, engine, change, words):
    feeds = feeds_for(2, 3, 5, 4, bias=True, past=True)
    for name, shape in change.items():
        if name in feeds:
            feeds[name] = RNG.standard_normal(shape).astype(np.float32)
    path = model(tmp_path / "bad.onnx", feeds, activation=change.get("activation"))
    # the attribute at load (ModelError), the shapes where the plan is compiled (BindingError)
    with pytest.raises((ModelError, BindingError)) as info:
        Network(path, engine=engine).infer(feeds)
    assert "'ccs'" in str(info.value) and words in str(info.value), str(info.value)


def _bound_network(engine, path: Path, shapes=None):
    """The model with its past_state/present_state pair bound to a state of the request."""
    from customlayers.graph.onnx.reader import read_onnx
    from customlayers.passes.state import bind_state_inputs
    graph, notes = bind_state_inputs(read_onnx(path), shapes=shapes)
    assert len(notes) == 1 and "bound to state 'past_state'" in notes[0], notes
    return Network(graph, engine=engine)


@pytest.mark.parametrize("dynamic", [False, True])
def test_bound_state_runs_chunk_after_chunk_on_one_request(tmp_path, engine, dynamic):
    """The state on the device: chunks of 4 steps on one request, the state passed by no one,
    equal one run over the whole sequence; reset_state starts the sequence again. `dynamic`:
    the model's batch and time are symbolic (as torch exports them), the state's batch given
    to the binding and the chunks' shape to the request."""
    n, c, k, chunk, total = 2, 3, 4, 4, 20
    weight = RNG.standard_normal((c, 1, k)).astype(np.float32)
    bias = RNG.standard_normal(c).astype(np.float32)
    x = RNG.standard_normal((n, c, total)).astype(np.float32)
    zeros = np.zeros((n, c, k - 1), np.float32)
    dims = {"input": ["N", c, "T"], "past_state": ["N", c, k - 1]} if dynamic else None
    path = model(tmp_path / "ccs.onnx", {"input": x[:, :, :chunk], "bias": bias,
                                         "past_state": zeros},
                 activation="silu", weight_init=weight, dims=dims)
    whole_path = model(tmp_path / "whole.onnx", {"input": x, "bias": bias, "past_state": zeros},
                       activation="silu", weight_init=weight)
    whole = Network(whole_path, engine=engine).infer({"input": x, "bias": bias,
                                                      "past_state": zeros})
    net = _bound_network(engine, path, {"past_state": zeros.shape} if dynamic else None)
    assert net.input_names == ["input", "bias"]            # no past_state to feed
    shapes = {"input": (n, c, chunk), "bias": (c,)} if dynamic else None
    request = net.create_request(shapes)
    for attempt in range(2):                    # the second time after reset_state
        pieces = []
        for start in range(0, total, chunk):
            got = request.infer({"input": x[:, :, start:start + chunk], "bias": bias})
            assert set(got) == {"y"}            # the state stays on the device
            pieces.append(got["y"])
        np.testing.assert_allclose(np.concatenate(pieces, axis=2), whole["y"], rtol=1e-6,
                                   atol=1e-6)
        (state,) = request.query_state()
        assert state.name == "past_state"
        np.testing.assert_array_equal(state.state, whole["present"])
        request.reset_state()
    # after the reset the state is zeros again: the first chunk gives the whole run's first
    # steps; a second request has its own state, untouched by the first one's runs
    first = request.infer({"input": x[:, :, :chunk], "bias": bias})["y"]
    np.testing.assert_allclose(first, whole["y"][:, :, :chunk], rtol=1e-6, atol=1e-6)
    other = net.create_request(shapes)
    np.testing.assert_array_equal(other.query_state()[0].state, zeros)
    np.testing.assert_array_equal(other.infer({"input": x[:, :, :chunk], "bias": bias})["y"],
                                  first)


def test_streaming_binds_the_state_and_steps_chunk_after_chunk(tmp_path, engine):
    """Network.streaming() on a model whose CausalConvWithState state is an input/output pair:
    the pair bound to a variable, each step one chunk on the stream's request; equal to one
    run over the whole sequence; reset() starts it again; a chunk of another shape refused."""
    from customlayers.errors import TensorError
    n, c, k, chunk, total = 1, 2, 3, 5, 15
    weight = RNG.standard_normal((c, 1, k)).astype(np.float32)
    x = RNG.standard_normal((n, c, total)).astype(np.float32)
    zeros = np.zeros((n, c, k - 1), np.float32)
    path = model(tmp_path / "ccs.onnx", {"input": x[:, :, :chunk], "past_state": zeros},
                 weight_init=weight)
    whole = reference(x, weight, past=zeros)[0]
    stream = Network(path, engine=engine).streaming()
    for _ in range(2):                          # the second time after reset()
        steps = [stream.step({"input": x[:, :, s:s + chunk]})["y"]
                 for s in range(0, total, chunk)]
        np.testing.assert_allclose(np.concatenate(steps, axis=2), whole, rtol=1e-5, atol=1e-6)
        assert stream.t == total // chunk and [s.name for s in stream.query_state()] == \
            ["past_state"]
        stream.reset()
    with pytest.raises(TensorError, match=r"input \[1, 2, 5\].*its state holds one shape"):
        stream.step({"input": x[:, :, :chunk]})
        stream.step({"input": x[:, :, :2]})
