"""Issue 20, quantization: QuantizeLinear and DequantizeLinear (opsets 10-23: per-tensor,
per-axis, blocked; int8/uint8/int16/uint16, int32 to dequantize), DynamicQuantizeLinear,
MatMulInteger and ConvInteger (ops/quant/, graph/onnx/ops/quant.py) on small onnx.helper models
against ONNX Runtime: values at the saturation edges and at exact halves (round half to even),
integer sums past 2^24 (exact in int32); the forms not taken refused at load naming the node."""
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
ELEM = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int8): TensorProto.INT8,
        np.dtype(np.uint8): TensorProto.UINT8, np.dtype(np.int16): TensorProto.INT16,
        np.dtype(np.uint16): TensorProto.UINT16, np.dtype(np.int32): TensorProto.INT32}
QUANT = [np.int8, np.uint8, np.int16, np.uint16]


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def _model(path: Path, op: str, feeds: dict, consts: dict, inputs: list[str],
           outputs: dict, opset: int, **attrs) -> Path:
    """One `op` node named 'qnode': graph inputs `feeds`, initializers `consts`, outputs
    name -> ONNX element type."""
    node = helper.make_node(op, inputs, list(outputs), name="qnode", **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(k, ELEM[v.dtype], list(v.shape)) for k, v in feeds.items()],
        [helper.make_tensor_value_info(k, t, None) for k, t in outputs.items()],
        [numpy_helper.from_array(v, k) for k, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    onnx.save(model, str(path))
    return path


def _both(path: Path, feeds: dict, engine):
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = Network(read_onnx(path), engine=engine).infer(feeds)
    return want, got


def _edges(scale: float, lo: int, hi: int, n: int) -> np.ndarray:
    """x / scale at exact halves (either parity), at and past the type's range, and random."""
    halves = (np.arange(-6, 6) + 0.5) * scale
    edges = np.array([lo - 1, lo - 0.5, lo, lo + 0.5, hi - 0.5, hi, hi + 0.5, hi + 1,
                      hi * 4.0, lo * 4.0 - 9]) * scale
    rest = RNG.uniform(lo - 10, hi + 10, n) * scale
    return np.concatenate([halves, edges, rest])[:n].astype(np.float32)


@pytest.mark.parametrize("dtype", QUANT)
@pytest.mark.parametrize("opset", [10, 13, 19, 21, 23])
def test_quantize_per_tensor_saturates_and_rounds_half_to_even(tmp_path, engine, dtype, opset):
    if opset < 21 and dtype in (np.int16, np.uint16):
        pytest.skip("int16/uint16 are ONNX's from opset 21")
    info = np.iinfo(dtype)
    zp = np.array(3 if info.min < 0 else 7, dtype)
    scale = np.array(0.25, np.float32)
    x = _edges(0.25, int(info.min) - 3, int(info.max) - 7, 64).reshape(4, 16)
    path = _model(tmp_path / "q.onnx", "QuantizeLinear", {"x": x}, {"s": scale, "z": zp},
                  ["x", "s", "z"], {"y": ELEM[np.dtype(dtype)]}, opset)
    want, got = _both(path, {"x": x}, engine)
    assert got["y"].dtype == dtype
    np.testing.assert_array_equal(got["y"], want[0])
    assert got["y"].min() == info.min and got["y"].max() == info.max


@pytest.mark.parametrize("opset", [10, 21])
def test_quantize_without_zero_point_is_uint8_or_output_dtype(tmp_path, engine, opset):
    x = _edges(0.5, 0, 255, 48).reshape(3, 16)
    attrs = {"output_dtype": TensorProto.INT8} if opset >= 21 else {}
    out = TensorProto.INT8 if attrs else TensorProto.UINT8
    path = _model(tmp_path / "q.onnx", "QuantizeLinear", {"x": x},
                  {"s": np.array(0.5, np.float32)}, ["x", "s"], {"y": out}, opset, **attrs)
    want, got = _both(path, {"x": x}, engine)
    np.testing.assert_array_equal(got["y"], want[0])


@pytest.mark.parametrize("dtype", QUANT)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_quantize_and_dequantize_per_axis(tmp_path, engine, dtype, axis):
    x = (RNG.standard_normal((3, 4, 5)) * 300).astype(np.float32)
    x.reshape(-1)[:8] = [0.5, 1.5, 2.5, -0.5, -1.5, 1e9, -1e9, 0]
    d = x.shape[axis]
    scale = RNG.uniform(0.5, 2.0, d).astype(np.float32)
    zp = RNG.integers(0, 5, d).astype(dtype)
    q = _model(tmp_path / "q.onnx", "QuantizeLinear", {"x": x}, {"s": scale, "z": zp},
               ["x", "s", "z"], {"y": ELEM[np.dtype(dtype)]}, 21, axis=axis)
    want, got = _both(q, {"x": x}, engine)
    np.testing.assert_array_equal(got["y"], want[0])
    xq = want[0]
    dq = _model(tmp_path / "dq.onnx", "DequantizeLinear", {"x": xq}, {"s": scale, "z": zp},
                ["x", "s", "z"], {"y": TensorProto.FLOAT}, 21, axis=axis)
    want, got = _both(dq, {"x": xq}, engine)
    np.testing.assert_array_equal(got["y"], want[0])


@pytest.mark.parametrize("dtype", QUANT)
@pytest.mark.parametrize("axis,block", [(1, 2), (0, 3), (-1, 4)])
def test_quantize_and_dequantize_blocked(tmp_path, engine, dtype, axis, block):
    x = (RNG.standard_normal((5, 6, 7)) * 200).astype(np.float32)
    shape = list(x.shape)
    shape[axis] = -(-shape[axis] // block)
    scale = RNG.uniform(0.5, 2.0, shape).astype(np.float32)
    zp = RNG.integers(0, 5, shape).astype(dtype)
    q = _model(tmp_path / "q.onnx", "QuantizeLinear", {"x": x}, {"s": scale, "z": zp},
               ["x", "s", "z"], {"y": ELEM[np.dtype(dtype)]}, 21, axis=axis, block_size=block)
    want, got = _both(q, {"x": x}, engine)
    np.testing.assert_array_equal(got["y"], want[0])
    xq = want[0]
    dq = _model(tmp_path / "dq.onnx", "DequantizeLinear", {"x": xq}, {"s": scale, "z": zp},
                ["x", "s", "z"], {"y": TensorProto.FLOAT}, 21, axis=axis, block_size=block)
    want, got = _both(dq, {"x": xq}, engine)
    np.testing.assert_array_equal(got["y"], want[0])


@pytest.mark.parametrize("dtype", QUANT + [np.int32])
@pytest.mark.parametrize("opset", [10, 13, 21, 23])
def test_dequantize_per_tensor_every_type(tmp_path, engine, dtype, opset):
    if opset < 21 and dtype in (np.int16, np.uint16):
        pytest.skip("int16/uint16 are ONNX's from opset 21")
    info = np.iinfo(dtype)
    x = np.concatenate([[info.min, info.max, 0, 1], RNG.integers(info.min, info.max, 28,
                                                                 dtype=np.int64)])
    x = x.astype(dtype).reshape(4, 8)
    zp = np.array(0 if dtype == np.int32 else 5, dtype)
    path = _model(tmp_path / "dq.onnx", "DequantizeLinear", {"x": x},
                  {"s": np.array(0.125, np.float32), "z": zp}, ["x", "s", "z"],
                  {"y": TensorProto.FLOAT}, opset)
    want, got = _both(path, {"x": x}, engine)
    np.testing.assert_array_equal(got["y"], want[0])


def test_scale_and_zero_point_fed_as_graph_inputs(tmp_path, engine):
    feeds = {"x": _edges(0.5, -128, 127, 40).reshape(5, 8),
             "s": np.array(0.5, np.float32), "z": np.array(-2, np.int8)}
    path = _model(tmp_path / "q.onnx", "QuantizeLinear", feeds, {}, ["x", "s", "z"],
                  {"y": TensorProto.INT8}, 13)
    want, got = _both(path, feeds, engine)
    np.testing.assert_array_equal(got["y"], want[0])


@pytest.mark.parametrize("x", [
    RNG.standard_normal((3, 8)).astype(np.float32) * 4,
    np.abs(RNG.standard_normal((2, 5)).astype(np.float32)) + 1,      # min clamped to 0
    -np.abs(RNG.standard_normal((2, 5)).astype(np.float32)) - 1,     # max clamped to 0
    np.zeros((2, 3), np.float32),                                    # max == min
], ids=["mixed", "positive", "negative", "zeros"])
def test_dynamic_quantize_linear(tmp_path, engine, x):
    path = _model(tmp_path / "dq.onnx", "DynamicQuantizeLinear", {"x": x}, {}, ["x"],
                  {"y": TensorProto.UINT8, "s": TensorProto.FLOAT, "z": TensorProto.UINT8}, 11)
    want, got = _both(path, {"x": x}, engine)
    np.testing.assert_array_equal(got["y"], want[0])
    np.testing.assert_array_equal(got["s"], want[1])
    np.testing.assert_array_equal(got["z"], want[2])


@pytest.mark.parametrize("ta,tb", [(np.uint8, np.uint8), (np.int8, np.int8),
                                   (np.uint8, np.int8), (np.int8, np.uint8)])
def test_matmul_integer_with_zero_points(tmp_path, engine, ta, tb):
    a = RNG.integers(np.iinfo(ta).min, np.iinfo(ta).max + 1, (5, 7)).astype(ta)
    b = RNG.integers(np.iinfo(tb).min, np.iinfo(tb).max + 1, (7, 6)).astype(tb)
    consts = {"za": np.array(3, ta), "zb": np.array(2, tb)}
    path = _model(tmp_path / "m.onnx", "MatMulInteger", {"a": a, "b": b}, consts,
                  ["a", "b", "za", "zb"], {"y": TensorProto.INT32}, 10)
    want, got = _both(path, {"a": a, "b": b}, engine)
    np.testing.assert_array_equal(got["y"], want[0])


def test_matmul_integer_sums_past_two_to_the_24_exactly_and_batches(tmp_path, engine):
    """K = 3000 products of 255 * 255 sum to ~1.95e8 > 2^24: a float sum would round."""
    a = np.full((2, 3, 3000), 255, np.uint8)
    a[:, :, ::7] = 254
    b = np.full((3000, 4), 255, np.uint8)
    b[::5] = 1
    path = _model(tmp_path / "m.onnx", "MatMulInteger", {"a": a, "b": b}, {}, ["a", "b"],
                  {"y": TensorProto.INT32}, 10)
    want, got = _both(path, {"a": a, "b": b}, engine)
    exact = np.matmul(a.astype(np.int64), b.astype(np.int64))
    np.testing.assert_array_equal(want[0], exact)
    np.testing.assert_array_equal(got["y"], exact)


def test_matmul_integer_per_row_and_per_column_zero_points(tmp_path, engine):
    a = RNG.integers(0, 256, (4, 9)).astype(np.uint8)
    b = RNG.integers(-128, 128, (9, 3)).astype(np.int8)
    za = RNG.integers(0, 256, 4).astype(np.uint8)
    zb = RNG.integers(-128, 128, 3).astype(np.int8)
    path = _model(tmp_path / "m.onnx", "MatMulInteger", {"a": a, "b": b}, {"za": za, "zb": zb},
                  ["a", "b", "za", "zb"], {"y": TensorProto.INT32}, 10)
    got = Network(read_onnx(path), engine=engine).infer({"a": a, "b": b})["y"]
    want = (a.astype(np.int64) - za[:, None]) @ (b.astype(np.int64) - zb[None, :])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("attrs,xshape,wshape", [
    ({}, (1, 3, 6, 6), (4, 3, 3, 3)),
    ({"pads": [1, 1, 1, 1]}, (2, 2, 5, 5), (3, 2, 3, 3)),
    ({"strides": [2, 1], "dilations": [1, 2], "pads": [0, 2, 1, 0]}, (1, 4, 7, 8), (2, 4, 2, 3)),
    ({"group": 2, "pads": [1, 1, 1, 1]}, (1, 4, 5, 5), (6, 2, 3, 3)),
    ({"auto_pad": "SAME_UPPER", "strides": [2, 2]}, (1, 2, 7, 6), (2, 2, 3, 3)),
    ({"pads": [1, 2]}, (2, 3, 9), (2, 3, 4)),
])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_conv_integer(tmp_path, engine, attrs, xshape, wshape, dtype):
    info = np.iinfo(dtype)
    x = RNG.integers(info.min, info.max + 1, xshape).astype(dtype)
    w = RNG.integers(info.min, info.max + 1, wshape).astype(dtype)
    consts = {"w": w, "zx": np.array(9, dtype), "zw": np.array(-1 if info.min else 1, dtype)}
    path = _model(tmp_path / "c.onnx", "ConvInteger", {"x": x}, consts, ["x", "w", "zx", "zw"],
                  {"y": TensorProto.INT32}, 10, **attrs)
    try:
        want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
            None, {"x": x})[0]
    except Exception:                    # ONNX Runtime's ConvInteger takes uint8 x only
        pytest.skip("ONNX Runtime has no ConvInteger for this type")
    got = Network(read_onnx(path), engine=engine).infer({"x": x})["y"]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op,feeds,consts,inputs,outputs,attrs,message", [
    ("QuantizeLinear", {"x": np.zeros((2, 3), np.float32)},
     {"s": np.ones(2, np.float32)}, ["x", "s"], {"y": TensorProto.UINT8}, {"axis": 1},
     "must have shape [3]"),
    ("QuantizeLinear", {"x": np.zeros((4, 6), np.float32)},
     {"s": np.ones((4, 3), np.float32)}, ["x", "s"], {"y": TensorProto.UINT8},
     {"axis": 1, "block_size": 4}, "blocked (block_size 4)"),
    ("QuantizeLinear", {"x": np.zeros((2, 3), np.float32)},
     {"s": np.ones(3, np.float32), "z": np.zeros(2, np.uint8)}, ["x", "s", "z"],
     {"y": TensorProto.UINT8}, {"axis": 1}, "zero point's shape"),
    ("QuantizeLinear", {"x": np.zeros((2, 3), np.float32)},
     {"s": np.ones(3, np.float32)}, ["x", "s"], {"y": TensorProto.UINT8}, {"axis": 5},
     "axis 5"),
    ("QuantizeLinear", {"x": np.zeros((2, 3), np.float32)},
     {"s": np.array(1, np.float32)}, ["x", "s"], {"y": TensorProto.INT32},
     {"output_dtype": TensorProto.INT32}, "quantizing to i32"),
    ("DequantizeLinear", {"x": np.zeros((2, 3), np.int8)},
     {"s": np.array(1, np.float32)}, ["x", "s"], {"y": TensorProto.FLOAT16},
     {"output_dtype": TensorProto.FLOAT16}, "output_dtype f16"),
], ids=["per-axis-shape", "blocked-shape", "zp-shape", "axis", "int32-out", "half-out"])
def test_bad_forms_are_refused_naming_the_node(tmp_path, op, feeds, consts, inputs, outputs,
                                              attrs, message):
    path = _model(tmp_path / "bad.onnx", op, feeds, consts, inputs, outputs, 23, **attrs)
    with pytest.raises(ModelError) as err:
        read_onnx(path)
    assert "qnode" in str(err.value) and message in str(err.value), str(err.value)


@pytest.mark.parametrize("elem", [TensorProto.FLOAT8E4M3FN, TensorProto.INT4, TensorProto.UINT4])
def test_float8_and_int4_zero_points_are_refused_with_the_type(tmp_path, elem):
    zp = helper.make_tensor("z", elem, [], [0])
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], name="qnode")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", elem, None)],
        [numpy_helper.from_array(np.array(1, np.float32), "s"), zp])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    onnx.save(model, str(tmp_path / "f8.onnx"))
    with pytest.raises(ModelError) as err:
        read_onnx(tmp_path / "f8.onnx")
    assert "element type" in str(err.value) or "not held" in str(err.value), str(err.value)


def _qlinear_consts(prefix: str, dtype, per: int | None = None) -> dict:
    """A scale and zero point; with `per`, one each per output channel/column."""
    n = per or 1
    scale = RNG.uniform(0.01, 0.05, n).astype(np.float32)
    zp = RNG.integers(-3, 4, n) + (0 if np.iinfo(dtype).min else 128)
    return {f"{prefix}s": scale if per else scale.reshape(()),
            f"{prefix}z": zp.astype(dtype) if per else np.array(zp[0], dtype)}


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("ashape,bshape,per_column", [
    ((4, 9), (9, 5), False), ((2, 4, 9), (9, 5), False), ((2, 3, 6), (2, 6, 4), False),
    ((4, 9), (9, 5), True)])
def test_qlinear_matmul(tmp_path, engine, dtype, ashape, bshape, per_column):
    info = np.iinfo(dtype)
    a = RNG.integers(info.min, info.max + 1, ashape).astype(dtype)
    b = RNG.integers(info.min, info.max + 1, bshape).astype(dtype)
    consts = {"b": b, **_qlinear_consts("a", dtype),
              **_qlinear_consts("b", dtype, bshape[-1] if per_column else None),
              **_qlinear_consts("y", dtype)}
    consts["ys"] = np.array(0.5, np.float32)         # sums of ~60 products land in range
    path = _model(tmp_path / "qm.onnx", "QLinearMatMul", {"a": a}, consts,
                  ["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
                  {"y": ELEM[np.dtype(dtype)]}, 21 if per_column else 10)
    want, got = _both(path, {"a": a}, engine)
    np.testing.assert_array_equal(got["y"], want[0])
    assert got["y"].min() < got["y"].max()


@pytest.mark.parametrize("per_channel,bias", [(False, False), (False, True), (True, True)])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_conv(tmp_path, engine, dtype, per_channel, bias):
    info = np.iinfo(dtype)
    x = RNG.integers(info.min, info.max + 1, (1, 4, 6, 6)).astype(dtype)
    w = RNG.integers(-20, 21, (6, 2, 3, 3)).astype(np.int8)
    consts = {"w": w, **_qlinear_consts("x", dtype), **_qlinear_consts("y", dtype)}
    ws = _qlinear_consts("w", np.int8, 6 if per_channel else None)
    consts.update(ws=ws["ws"], wz=np.zeros(ws["wz"].shape, np.int8))   # ONNX Runtime: 0
    consts["ys"] = np.array(0.3, np.float32)
    names = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    if bias:
        consts["B"] = RNG.integers(-2000, 2000, 6).astype(np.int32)
        names.append("B")
    path = _model(tmp_path / "qc.onnx", "QLinearConv", {"x": x}, consts, names,
                  {"y": ELEM[np.dtype(dtype)]}, 10, pads=[1, 0, 1, 2], group=2)
    try:
        want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
            None, {"x": x})[0]
    except Exception:
        pytest.skip("ONNX Runtime has no QLinearConv for this form")
    got = Network(read_onnx(path), engine=engine).infer({"x": x})["y"]
    np.testing.assert_array_equal(got, want)
    assert got.min() < got.max()


def test_half_scales_are_refused_naming_the_node(tmp_path):
    a = np.zeros((2, 3), np.uint8)
    consts = {"b": np.zeros((3, 2), np.uint8), "as": np.array(1, np.float16),
              "az": np.array(0, np.uint8), "bs": np.array(1, np.float16),
              "bz": np.array(0, np.uint8), "ys": np.array(1, np.float16),
              "yz": np.array(0, np.uint8)}
    ELEM.setdefault(np.dtype(np.float16), TensorProto.FLOAT16)
    path = _model(tmp_path / "qm.onnx", "QLinearMatMul", {"a": a}, consts,
                  ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], {"y": TensorProto.UINT8}, 21)
    with pytest.raises(ModelError, match="qnode.*input 1 \\(a scale\\) is f16"):
        read_onnx(path)


def test_conv_integer_per_channel_weight_zero_points_against_numpy(tmp_path, engine):
    """ONNX Runtime's ConvInteger takes one weight zero point; ONNX allows one per output
    channel: checked against an int64 numpy convolution."""
    x = RNG.integers(0, 256, (2, 3, 5, 6)).astype(np.uint8)
    w = RNG.integers(0, 256, (4, 3, 2, 3)).astype(np.uint8)
    zw = RNG.integers(0, 256, 4).astype(np.uint8)
    path = _model(tmp_path / "c.onnx", "ConvInteger", {"x": x},
                  {"w": w, "zx": np.array(200, np.uint8), "zw": zw}, ["x", "w", "zx", "zw"],
                  {"y": TensorProto.INT32}, 10, pads=[1, 0, 0, 1])
    got = Network(read_onnx(path), engine=engine).infer({"x": x})["y"]
    xp = np.pad(x.astype(np.int64) - 200, ((0, 0), (0, 0), (1, 0), (0, 1)))
    wd = w.astype(np.int64) - zw[:, None, None, None]
    oh, ow = xp.shape[2] - 1, xp.shape[3] - 2
    want = np.zeros((2, 4, oh, ow), np.int64)
    for ky in range(2):
        for kx in range(3):
            want += np.einsum("nchw,oc->nohw", xp[:, :, ky:ky + oh, kx:kx + ow], wd[:, :, ky, kx])
    np.testing.assert_array_equal(got, want)
