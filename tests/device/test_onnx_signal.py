"""Issue 20: ONNX's signal ops. DFT (opsets 17, 19 and 20: the axis an attribute or an input;
forward, inverse, one-sided, the inverse of a one-sided spectrum; real or complex input;
dft_length shorter and longer than the axis; f32 and f64) and STFT (frame step, window, frame
length, onesided) on the direct-sum kernels of ops/signal/, against numpy.fft in float64 and
ONNX Runtime; HannWindow, HammingWindow, BlackmanWindow and MelWeightMatrix folded on the host
(their size a constant or a graph input compiled in per value), against ONNX Runtime; bad
forms refused naming the node."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from customlayers.api import Network  # noqa: E402
from customlayers.errors import BindingError, ModelError  # noqa: E402
from customlayers.graph.onnx.reader import read_onnx  # noqa: E402

RNG = np.random.default_rng(17)


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def _model(path: Path, node, feeds: dict, out_type=None, inits=(), opset=20) -> Path:
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for n, v in feeds.items()],
        [helper.make_tensor_value_info(node.output[0], out_type or TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(v), n) for n, v in dict(inits).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    onnx.save(model, str(path))
    return path


def _run(path: Path, engine, feeds: dict) -> np.ndarray:
    return np.asarray(Network(read_onnx(path), engine=engine).infer(feeds)["y"])


def _complex(x: np.ndarray) -> np.ndarray:
    return x[..., 0].astype(np.float64) + (1j * x[..., 1] if x.shape[-1] == 2 else 0)


def _pairs(z: np.ndarray) -> np.ndarray:
    return np.stack([z.real, z.imag], -1)


def _close(got, want, dtype):
    """float64 sums, rounded once: f32 to its precision of the largest bin, f64 to ~1e-12."""
    scale = max(1.0, float(np.abs(want).max()))
    tol = 1e-6 if dtype == np.float32 else 1e-12
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=0, atol=tol * scale)


# (shape, axis, dft_length, inverse, onesided)
DFT_CASES = [
    ((2, 8, 1), 1, None, 0, 0),          # real, full
    ((2, 8, 1), 1, None, 0, 1),          # real, one-sided (rfft)
    ((3, 7, 2), 1, None, 0, 0),          # complex, odd length
    ((3, 7, 2), 1, None, 1, 0),          # inverse
    ((2, 5, 4, 2), 2, None, 0, 0),       # an inner axis
    ((2, 5, 4, 1), -3, None, 0, 1),      # negative axis, one-sided
    ((2, 12, 1), 1, 8, 0, 0),            # dft_length shorter than the axis: truncated
    ((2, 6, 2), 1, 10, 0, 0),            # longer: zero-padded
    ((2, 6, 2), 1, 9, 1, 0),             # inverse, zero-padded
    ((2, 5, 2), 1, None, 1, 1),          # irfft: 2 * (5 - 1) real values
    ((2, 5, 2), 1, 9, 1, 1),             # irfft of an odd length
    ((2, 6, 1), 1, 4, 1, 1),             # irfft of a real spectrum, truncated
]


def _numpy_dft(x, axis, length, inverse, onesided):
    z = _complex(x)
    axis %= x.ndim
    if inverse and onesided:
        n = length or 2 * (x.shape[axis] - 1)
        return np.fft.irfft(z, n=n, axis=axis)[..., None]
    n = length or x.shape[axis]
    out = (np.fft.ifft if inverse else np.fft.fft)(z, n=n, axis=axis)
    if onesided:
        out = np.take(out, range(n // 2 + 1), axis=axis)
    return _pairs(out)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,axis,length,inverse,onesided", DFT_CASES)
def test_dft_matches_numpy(tmp_path, engine, shape, axis, length, inverse, onesided, dtype):
    x = RNG.standard_normal(shape).astype(dtype)
    inits = {"axis": np.array(axis, np.int64)}
    if length:
        inits["n"] = np.array(length, np.int64)
    node = helper.make_node("DFT", ["x", "n" if length else "", "axis"], ["y"],
                            inverse=inverse, onesided=onesided)
    path = _model(tmp_path / "m.onnx", node, {"x": x},
                  helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), inits)
    _close(_run(path, engine, {"x": x}), _numpy_dft(x, axis, length, inverse, onesided), dtype)


@pytest.mark.parametrize("opset", [17, 19])
def test_dft_axis_attribute_matches_onnx_runtime(tmp_path, engine, opset):
    x = RNG.standard_normal((2, 6, 5, 1)).astype(np.float32)
    node = helper.make_node("DFT", ["x", "n"], ["y"], axis=2, onesided=1)
    path = _model(tmp_path / "m.onnx", node, {"x": x}, inits={"n": np.array(6, np.int64)},
                  opset=opset)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    got = _run(path, engine, {"x": x})
    assert got.shape == (2, 6, 4, 2)   # 6 // 2 + 1 bins of a 6-point DFT
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_dft_axis_and_length_as_graph_inputs_are_compiled_per_value(tmp_path, engine):
    x = RNG.standard_normal((2, 6, 4, 1)).astype(np.float32)
    node = helper.make_node("DFT", ["x", "n", "axis"], ["y"])
    path = _model(tmp_path / "m.onnx", node, {"x": x, "n": np.array(5, np.int64),
                                               "axis": np.array(1, np.int64)})
    net = Network(read_onnx(path), engine=engine)
    for n, axis in ((5, 1), (8, 2)):
        feeds = {"x": x, "n": np.array(n, np.int64), "axis": np.array(axis, np.int64)}
        _close(np.asarray(net.infer(feeds)["y"]), _numpy_dft(x, axis, n, 0, 0), np.float32)


@pytest.mark.parametrize("window,frame,onesided,width",
                         [(True, None, 1, 1), (False, 16, 1, 1), (True, 16, 0, 1),
                          (True, None, 0, 2)])
def test_stft_matches_numpy_and_onnx_runtime(tmp_path, engine, window, frame, onesided, width):
    signal = RNG.standard_normal((2, 100, width)).astype(np.float32)
    feeds = {"signal": signal, "step": np.array(6, np.int64)}
    w = np.hanning(16).astype(np.float32)
    if window:
        feeds["window"] = w
    inits = {"frame": np.array(frame, np.int64)} if frame else {}
    node = helper.make_node("STFT", ["signal", "step", "window" if window else "",
                                     "frame" if frame else ""], ["y"], onesided=onesided)
    path = _model(tmp_path / "m.onnx", node, feeds, inits=inits, opset=17)
    got = _run(path, engine, feeds)
    frames = (100 - 16) // 6 + 1
    z = _complex(signal)
    segments = np.stack([z[:, f * 6:f * 6 + 16] * (w if window else 1)
                         for f in range(frames)], 1)
    want = np.fft.fft(segments, axis=-1)[..., :9 if onesided else 16]
    _close(got, _pairs(want), np.float32)
    if width == 1:                          # ONNX Runtime's STFT takes a real signal only
        ort_out = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
            None, feeds)[0]
        np.testing.assert_allclose(got, ort_out, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
def test_windows_match_onnx_runtime(tmp_path, engine, op, periodic):
    size = np.array(10, np.int32)
    node = helper.make_node(op, ["size"], ["y"], periodic=periodic)
    fed = _model(tmp_path / "fed.onnx", node, {"size": size}, opset=17)
    want = ort.InferenceSession(str(fed), providers=["CPUExecutionProvider"]).run(
        None, {"size": size})[0]
    net = Network(read_onnx(fed), engine=engine)
    np.testing.assert_allclose(np.asarray(net.infer({"size": size})["y"]), want, atol=1e-6)
    # another size given: another plan, compiled for that value
    other = np.asarray(net.infer({"size": np.array(7, np.int32)})["y"])
    assert other.shape == (7,)
    # the size a constant: the window is a constant of the model
    const = _model(tmp_path / "const.onnx", node, {}, inits={"size": size}, opset=17)
    np.testing.assert_allclose(np.asarray(Network(read_onnx(const), engine=engine).infer({})["y"]),
                               want, atol=1e-6)


def test_window_in_double_and_times_a_signal(tmp_path, engine):
    node = helper.make_node("HannWindow", ["size"], ["y"], output_datatype=TensorProto.DOUBLE)
    path = _model(tmp_path / "m.onnx", node, {}, TensorProto.DOUBLE,
                  inits={"size": np.array(12, np.int64)}, opset=17)
    got = np.asarray(Network(read_onnx(path), engine=engine).infer({})["y"])
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, np.sin(np.arange(12) * np.pi / 12) ** 2, atol=1e-15)


def test_mel_weight_matrix_matches_onnx_runtime(tmp_path, engine):
    feeds = {"bins": np.array(8, np.int64), "n": np.array(32, np.int64),
             "rate": np.array(16000, np.int64), "low": np.array(20.0, np.float32),
             "high": np.array(7000.0, np.float32)}
    node = helper.make_node("MelWeightMatrix", list(feeds), ["y"])
    path = _model(tmp_path / "m.onnx", node, feeds, opset=17)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, feeds)[0]
    got = np.asarray(Network(read_onnx(path), engine=engine).infer(feeds)["y"])
    assert got.shape == (17, 8)
    np.testing.assert_allclose(got, want, atol=1e-6)


@pytest.mark.parametrize("node,feeds,inits,words", [
    (helper.make_node("DFT", ["x", "", "axis"], ["y"]), {"x": np.zeros((2, 8, 3), np.float32)},
     {"axis": np.array(1, np.int64)}, "last dim must be 1 (real) or 2"),
    (helper.make_node("DFT", ["x", "", "axis"], ["y"]), {"x": np.zeros((2, 8, 1), np.float32)},
     {"axis": np.array(2, np.int64)}, "axis 2 is out of range"),
    (helper.make_node("DFT", ["x", "", "axis"], ["y"], onesided=1),
     {"x": np.zeros((2, 8, 2), np.float32)}, {"axis": np.array(1, np.int64)},
     "one-sided forward DFT of a real input only"),
    (helper.make_node("DFT", ["x", "", "axis"], ["y"]), {"x": np.zeros((2, 8, 1), np.int32)},
     {"axis": np.array(1, np.int64)}, "the input is i32"),
    (helper.make_node("STFT", ["x", "step"], ["y"]), {"x": np.zeros((8, 1), np.float32)},
     {"step": np.array(2, np.int64)}, "the signal must be [batch, length, 1 or 2]"),
    (helper.make_node("HannWindow", ["size"], ["y"], output_datatype=TensorProto.INT32), {},
     {"size": np.array(8, np.int64)}, "output_datatype 6"),
    (helper.make_node("HannWindow", ["size"], ["y"]), {}, {"size": np.array(0, np.int64)},
     "the size 0 is not in 1.."),
])
def test_bad_forms_are_refused_at_load_naming_the_node(tmp_path, node, feeds, inits, words):
    node.name = "the_node"
    path = _model(tmp_path / "m.onnx", node, feeds, inits=inits, opset=20)
    with pytest.raises(ModelError) as e:
        read_onnx(path)
    assert "the_node" in str(e.value) and words in str(e.value), str(e.value)


def test_bad_values_given_are_refused_naming_the_layer(tmp_path, engine):
    x = np.zeros((1, 20, 1), np.float32)
    node = helper.make_node("STFT", ["x", "step", "", "frame"], ["y"], name="spec")
    path = _model(tmp_path / "m.onnx", node, {"x": x, "step": np.array(4, np.int64),
                                               "frame": np.array(32, np.int64)}, opset=17)
    net = Network(read_onnx(path), engine=engine, input_shapes=None)
    with pytest.raises((BindingError, ModelError), match=r"spec.*frame_length 32 at most"):
        net.infer({"x": x, "step": np.array(4, np.int64), "frame": np.array(32, np.int64)})
