"""The wider element types on the test device, through ONNX models: int16, uint16, uint32 and
uint64 through Cast (from and to every type, bool and double included) and the elementwise ops
with ONNX's integer semantics (wrapping, division toward zero, Mod with and without fmod),
checked against ONNX Runtime where it has the kernel and numpy where it has none; MaxPool on
int8 and uint8; float16 as a storage type (vload_half/vstore_half around float kernels on a
device without cl_khr_fp16) against numpy's float16 of a float32 computation; and a custom layer
on half tensors, which the contract cannot run on float copies, refused naming the node."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T, helper

from customlayers.errors import CustomLayersError
from customlayers.graph.onnx.reader import read_onnx
from customlayers.runtime.compile.network import Network
from customlayers.runtime.device.limits import has_fp16

WIDE = (np.int16, np.uint16, np.uint32, np.uint64)
EVERY = WIDE + (np.int8, np.uint8, np.int32, np.int64, np.float16, np.float32, np.float64,
                np.bool_)


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def _code(dtype) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def _save(path: Path, nodes, inputs: dict, outputs: dict, opset=17) -> Path:
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, _code(a.dtype), a.shape)
                     for n, a in inputs.items()],
        [helper.make_tensor_value_info(n, _code(t), None) for n, t in outputs.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _run(engine, path: Path, feed: dict) -> dict:
    return Network(read_onnx(path), engine=engine).infer(feed)


def _onnxruntime(path: Path, feed: dict) -> dict | None:
    """ONNX Runtime's outputs, or None where it has no kernel for one of the nodes."""
    ort = pytest.importorskip("onnxruntime")
    try:
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception:                           # noqa: BLE001 - NOT_IMPLEMENTED for the type
        return None
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feed)))


def _values(dtype, shape=(3, 5), seed=0):
    """Values of `dtype` that every cast takes without overflow: small, and not negative where a
    cast to an unsigned type would be out of range (ONNX leaves that undefined)."""
    rng = np.random.default_rng(seed)
    if dtype is np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.dtype(dtype).kind == "f":
        return (rng.random(shape) * 120).astype(dtype)
    return rng.integers(0, 120, shape).astype(dtype)


def _same(got, want):
    assert got.dtype == want.dtype or (want.dtype == np.bool_ and got.dtype == np.uint8)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("src", EVERY, ids=lambda t: np.dtype(t).name)
def test_cast_between_every_pair_with_a_wide_integer(tmp_path, engine, src):
    targets = EVERY if src in WIDE else WIDE
    nodes = [helper.make_node("Cast", ["x"], [f"y{k}"], to=_code(t))
             for k, t in enumerate(targets)]
    x = _values(src)
    path = _save(tmp_path / "cast.onnx", nodes, {"x": x},
                 {f"y{k}": t for k, t in enumerate(targets)})
    got, want = _run(engine, path, {"x": x}), _onnxruntime(path, {"x": x})
    for k, t in enumerate(targets):
        _same(got[f"y{k}"], want[f"y{k}"] if want else x.astype(t))


def _trunc_div(a, b):
    """Integer division toward zero (C, ONNX Runtime)."""
    q = np.abs(a.astype(object)) // np.abs(b.astype(object))
    return np.where((a < 0) != (b < 0), -q, q).astype(a.dtype)


def _arith(dtype):
    """(ONNX op, attributes, numpy reference) of the elementwise ops ONNX gives the type."""
    signed = np.dtype(dtype).kind == "i"
    ops = [("Add", {}, np.add), ("Sub", {}, np.subtract), ("Mul", {}, np.multiply),
           ("Div", {}, _trunc_div), ("Mod", {}, np.mod),
           ("Mod", {"fmod": 1}, np.fmod), ("Max", {}, np.maximum), ("Min", {}, np.minimum)]
    unary = [("Abs", {}, np.abs)] + ([("Neg", {}, np.negative), ("Sign", {}, np.sign)]
                                     if signed else [("Sign", {}, np.sign)])
    return ops, unary


@pytest.mark.parametrize("dtype", WIDE, ids=lambda t: np.dtype(t).name)
def test_elementwise_integer_semantics(tmp_path, engine, dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(3)
    # the extremes too: sums and products wrap, as in ONNX Runtime (and numpy)
    a = rng.integers(info.min, info.max, (4, 6), dtype=dtype, endpoint=True)
    b = rng.integers(info.min, info.max, (6,), dtype=dtype, endpoint=True)
    a[0, :3], b[:3] = (info.min, info.max, 7), (info.max, 1, 3)
    b[b == 0] = 1                       # a zero divisor is undefined in ONNX
    binary, unary = _arith(dtype)
    nodes = [helper.make_node(op, ["a", "b"], [f"y{k}"], **attrs)
             for k, (op, attrs, _) in enumerate(binary)]
    nodes += [helper.make_node(op, ["a"], [f"u{k}"], **attrs)
              for k, (op, attrs, _) in enumerate(unary)]
    outs = {**{f"y{k}": dtype for k in range(len(binary))},
            **{f"u{k}": dtype for k in range(len(unary))}}
    path = _save(tmp_path / "arith.onnx", nodes, {"a": a, "b": b}, outs)
    got = _run(engine, path, {"a": a, "b": b})
    with np.errstate(over="ignore"):
        for k, (op, attrs, ref) in enumerate(binary):
            want = ref(a, np.broadcast_to(b, a.shape)).astype(dtype)
            np.testing.assert_array_equal(got[f"y{k}"], want, err_msg=f"{op} {attrs}")
        for k, (op, attrs, ref) in enumerate(unary):
            np.testing.assert_array_equal(got[f"u{k}"], ref(a).astype(dtype), err_msg=op)


@pytest.mark.parametrize("dtype", WIDE, ids=lambda t: np.dtype(t).name)
def test_views_concat_and_reductions_keep_the_type(tmp_path, engine, dtype):
    a = _values(dtype, (2, 3, 4), seed=5)
    consts = [helper.make_node("Constant", [], [name], value=helper.make_tensor(
        name, T.INT64, [1], [v])) for name, v in (("s0", 1), ("s1", 3), ("axes", 1))]
    nodes = consts + [
        helper.make_node("Transpose", ["a"], ["t"], perm=[2, 0, 1]),
        helper.make_node("Concat", ["a", "a"], ["c"], axis=1),
        helper.make_node("Slice", ["a", "s0", "s1"], ["s"]),
        helper.make_node("Flatten", ["a"], ["f"], axis=2),
        helper.make_node("ReduceSum", ["a", "axes"], ["rs"], keepdims=0),
        helper.make_node("ReduceMax", ["a"], ["rx"], axes=[1], keepdims=0),
        helper.make_node("ReduceMin", ["a"], ["rn"], axes=[1], keepdims=0)]
    path = _save(tmp_path / "views.onnx", nodes, {"a": a},
                 {n: dtype for n in ("t", "c", "s", "f", "rs", "rx", "rn")}, opset=17)
    got = _run(engine, path, {"a": a})
    _same(got["t"], a.transpose(2, 0, 1))
    _same(got["c"], np.concatenate([a, a], 1))
    _same(got["s"], a[1:3])
    _same(got["f"], a.reshape(6, 4))
    _same(got["rs"], a.sum(1, dtype=dtype))
    _same(got["rx"], a.max(1))
    _same(got["rn"], a.min(1))


@pytest.mark.parametrize("dtype", (np.int8, np.uint8), ids=lambda t: np.dtype(t).name)
def test_maxpool_on_bytes(tmp_path, engine, dtype):
    info = np.iinfo(dtype)
    x = np.random.default_rng(2).integers(info.min, info.max, (1, 2, 6, 7), dtype=dtype,
                                          endpoint=True)
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                            strides=[2, 2])
    path = _save(tmp_path / "pool.onnx", [node], {"x": x}, {"y": dtype})
    got = _run(engine, path, {"x": x})["y"]
    _same(got, _onnxruntime(path, {"x": x})["y"])     # was: "this built-in runs f32 only"


# -- float16 as storage ------------------------------------------------------------------------
def _f16_ref(fn, *args):
    """numpy's float16 of the float32 computation (what one rounding per op gives)."""
    with np.errstate(over="ignore"):
        return np.asarray(fn(*(a.astype(np.float32) for a in args))).astype(np.float16)


F16_BINARY = [("Add", {}, np.add), ("Sub", {}, np.subtract), ("Mul", {}, np.multiply),
              ("Div", {}, np.divide), ("Max", {}, np.maximum), ("Min", {}, np.minimum),
              ("Mod", {"fmod": 1}, np.fmod)]
F16_UNARY = [("Relu", {}, lambda a: np.maximum(a, 0)), ("Neg", {}, np.negative),
             ("Abs", {}, np.abs), ("Exp", {}, np.exp), ("Tanh", {}, np.tanh),
             ("Sigmoid", {}, lambda a: 1 / (1 + np.exp(-a))),
             ("Softmax", {"axis": -1}, lambda a: np.exp(a) / np.exp(a).sum(-1, keepdims=True)),
             ("Transpose", {"perm": [1, 0]}, lambda a: a.T),
             ("ReduceSum", {"keepdims": 0}, lambda a: a.sum()),
             ("Cast", {"to": T.FLOAT}, lambda a: a)]


def test_float16_through_elementwise_views_and_reductions(tmp_path, engine):
    rng = np.random.default_rng(4)
    a = (rng.standard_normal((4, 6)) * 2).astype(np.float16)
    b = (rng.standard_normal((4, 6)) * 2).astype(np.float16)
    nodes = [helper.make_node(op, ["a", "b"], [f"y{k}"], **attrs)
             for k, (op, attrs, _) in enumerate(F16_BINARY)]
    nodes += [helper.make_node("Abs", ["a"], ["abs_a"]),
              helper.make_node("Pow", ["abs_a", "b"], ["pow"])]
    nodes += [helper.make_node(op, ["a"], [f"u{k}"], **attrs)
              for k, (op, attrs, _) in enumerate(F16_UNARY)]
    nodes += [helper.make_node("Constant", [], ["idx"], value=helper.make_tensor(
                  "idx", T.INT64, [3], [3, 0, 3])),
              helper.make_node("Gather", ["b", "idx"], ["gat"], axis=0),
              helper.make_node("Concat", ["a", "b"], ["cat"], axis=0),
              helper.make_node("Transpose", ["b"], ["bt"], perm=[1, 0]),
              helper.make_node("MatMul", ["a", "bt"], ["mm"])]
    outs = {**{f"y{k}": np.float16 for k in range(len(F16_BINARY))},
            **{f"u{k}": np.float32 if op == "Cast" else np.float16
               for k, (op, _, _) in enumerate(F16_UNARY)},
            "cat": np.float16, "gat": np.float16, "mm": np.float16, "pow": np.float16}
    path = _save(tmp_path / "half.onnx", nodes, {"a": a, "b": b}, outs)
    got = _run(engine, path, {"a": a, "b": b})
    for k, (op, _, fn) in enumerate(F16_BINARY):
        assert got[f"y{k}"].dtype == np.float16, op
        np.testing.assert_allclose(got[f"y{k}"].astype(np.float32),
                                   _f16_ref(fn, a, b).astype(np.float32), rtol=1e-3, atol=1e-4,
                                   err_msg=op)
    for k, (op, _, fn) in enumerate(F16_UNARY):
        want = _f16_ref(fn, a)
        if op == "Cast":
            want = a.astype(np.float32)
        np.testing.assert_allclose(got[f"u{k}"].astype(np.float32), want.astype(np.float32),
                                   rtol=2e-3, atol=1e-3, err_msg=op)
    np.testing.assert_allclose(got["pow"].astype(np.float32),
                               _f16_ref(np.power, np.abs(a), b).astype(np.float32), rtol=2e-3)
    _same(got["cat"], np.concatenate([a, b]))
    _same(got["gat"], b[[3, 0, 3]])
    np.testing.assert_allclose(got["mm"].astype(np.float32),
                               _f16_ref(np.matmul, a, b.T).astype(np.float32), rtol=2e-3,
                               atol=2e-3)


def test_float_to_half_rounds_to_nearest_even(tmp_path, engine):
    # halfway cases and values past half's range: round to nearest even, inf past 65504
    x = np.array([1 + 2 ** -11, 1 + 3 * 2 ** -11, 65519.0, 65520.0, -1e-8, 3e-8, np.nan,
                  -np.inf], np.float32)
    path = _save(tmp_path / "cast16.onnx", [helper.make_node("Cast", ["x"], ["y"],
                                                             to=T.FLOAT16)],
                 {"x": x}, {"y": np.float16})
    got = _run(engine, path, {"x": x})["y"]
    assert got.dtype == np.float16
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(got, x.astype(np.float16))


LAYER_XML = """<CustomLayer name="HalfCopy" type="SimpleGPU" version="1">
  <Kernel entry="copy_kernel">
    <Source filename="copy.cl"/>
  </Kernel>
  <Buffers>
    <Tensor arg-index="0" type="input" port-index="0" format="BFYX"/>
    <Tensor arg-index="1" type="output" port-index="0" format="BFYX"/>
  </Buffers>
</CustomLayer>
"""
COPY_CL = """__kernel void copy_kernel(const __global INPUT0_TYPE* src, __global OUTPUT0_TYPE* dst)
{
    const uint i = get_global_id(0);
    dst[i] = src[i];
}
"""


def test_a_custom_layer_on_half_tensors_is_refused_naming_the_node(tmp_path, engine):
    if has_fp16(engine.device):
        pytest.skip("the test device has cl_khr_fp16")
    from customlayers.runtime.layers.registry import Registry
    registry = Registry(engine)
    registry.load_string(LAYER_XML, {"copy.cl": COPY_CL}, name="layer.xml")
    x = np.ones((1, 2, 3, 4), np.float16)
    node = helper.make_node("HalfCopy", ["x"], ["y"], name="hc", domain="com.example")
    graph = helper.make_graph([node], "g",
                              [helper.make_tensor_value_info("x", T.FLOAT16, x.shape)],
                              [helper.make_tensor_value_info("y", T.FLOAT16, x.shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.example", 1)])
    onnx.save(model, str(tmp_path / "m.onnx"))
    with pytest.raises(CustomLayersError, match=r"(?s)hc.*tensor type f16, which needs half "
                                                r"precision \(cl_khr_fp16\)"):
        Network(str(tmp_path / "m.onnx"), registry, engine).infer({"x": x})


@pytest.mark.parametrize("dtype", WIDE, ids=lambda t: np.dtype(t).name)
def test_initializers_of_the_wide_types_as_raw_data_and_typed_fields(tmp_path, engine, dtype):
    from onnx import numpy_helper
    info = np.iinfo(dtype)
    c = np.array([info.min, info.max, 5], dtype)
    raw = numpy_helper.from_array(c, "c_raw")
    typed = helper.make_tensor("c_typed", _code(dtype), [3], c.tolist())   # int32/uint64_data
    assert not typed.HasField("raw_data")
    x = np.array([1, 2, 3], dtype)
    nodes = [helper.make_node("Add", ["x", "c_raw"], ["y_raw"]),
             helper.make_node("Sub", ["x", "c_typed"], ["y_typed"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", _code(dtype), [3])],
                              [helper.make_tensor_value_info(n, _code(dtype), [3])
                               for n in ("y_raw", "y_typed")], [raw, typed])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "c.onnx"))
    got = _run(engine, tmp_path / "c.onnx", {"x": x})
    with np.errstate(over="ignore"):
        _same(got["y_raw"], x + c)
        _same(got["y_typed"], x - c)


def test_a_custom_layer_on_a_wide_integer_is_refused_with_the_contracts_types(tmp_path, engine):
    from customlayers.runtime.layers.registry import Registry
    registry = Registry(engine)
    registry.load_string(LAYER_XML, {"copy.cl": COPY_CL}, name="layer.xml")
    x = np.ones((1, 2, 3, 4), np.uint16)
    node = helper.make_node("HalfCopy", ["x"], ["y"], name="wc", domain="com.example")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", T.UINT16, x.shape)],
                              [helper.make_tensor_value_info("y", T.UINT16, x.shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.example", 1)])
    onnx.save(model, str(tmp_path / "m.onnx"))
    with pytest.raises(CustomLayersError, match=r"(?s)wc.*input 0 is u16; a custom layer takes "
                                                r"f32, f16, i8, u8, i32, i64"):
        Network(str(tmp_path / "m.onnx"), registry, engine).infer({"x": x})
