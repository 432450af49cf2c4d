"""f64 (ONNX DOUBLE) tensors on the dtype-generic built-ins: elementwise arithmetic (with the
opset < 7 legacy broadcast), activations, views, Concat, Transpose, Convert and f64 constants,
run on the test device and compared with numpy in double precision, at tolerances that float
arithmetic (or float-rounded constants) would fail. Custom layers and devices without
cl_khr_fp64 get a clear error."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from customlayers.errors import BindingError
from customlayers.graph.onnx.reader import read_onnx
from customlayers.runtime.compile import network as network_module
from customlayers.runtime.compile.network import Network

ROOT = Path(__file__).resolve().parents[2]
D = TensorProto.DOUBLE


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def _save(path: Path, nodes, inputs, outputs, inits=(), opset=13) -> Path:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8 if opset >= 7 else 3
    onnx.save(model, str(path))
    return path


def _vi(name, shape, elem=D):
    return helper.make_tensor_value_info(name, elem, shape)


def _rng():
    return np.random.default_rng(11)


def test_the_test_device_has_fp64(engine):
    assert network_module.has_fp64(engine.device)


def test_add_with_a_double_constant_keeps_double_precision(tmp_path, engine):
    c = numpy_helper.from_array(np.array([1.0 + 1e-12, 2.0, -3.0]), "c")
    path = _save(tmp_path / "add.onnx", [helper.make_node("Add", ["x", "c"], ["y"])],
                 [_vi("x", [2, 3])], [_vi("y", [2, 3])], [c])
    x = _rng().standard_normal((2, 3))
    got = Network(read_onnx(path), engine=engine).infer({"x": x})["y"]
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, x + numpy_helper.to_array(c))


@pytest.mark.parametrize("b_shape,axis,aligned", [((3,), 1, (1, 3)), ((2, 1), 0, (2, 1)),
                                                  ((2,), 0, (2, 1)), ((3,), None, (1, 3))])
def test_legacy_broadcast_aligns_b_at_axis(tmp_path, engine, b_shape, axis, aligned):
    attrs = {"broadcast": 1} if axis is None else {"broadcast": 1, "axis": axis}
    path = _save(tmp_path / "legacy.onnx", [helper.make_node("Mul", ["a", "b"], ["y"], **attrs)],
                 [_vi("a", [2, 3]), _vi("b", list(b_shape))], [_vi("y", [2, 3])], opset=6)
    a, b = _rng().standard_normal((2, 3)), _rng().standard_normal(b_shape) + 1e-13
    got = Network(read_onnx(path), engine=engine).infer({"a": a, "b": b})["y"]
    np.testing.assert_array_equal(got, a * b.reshape(aligned))


def test_activations_compute_in_double(tmp_path, engine):
    """Elu's alpha 0.1 and Sigmoid's 1.0 stay double literals (0.1f is off by 1.5e-9)."""
    nodes = [helper.make_node("Elu", ["x"], ["e"], alpha=0.1),
             helper.make_node("Sigmoid", ["x"], ["s"]),
             helper.make_node("Exp", ["x"], ["x_exp"])]
    path = _save(tmp_path / "act.onnx", nodes, [_vi("x", [4, 5])],
                 [_vi("e", [4, 5]), _vi("s", [4, 5]), _vi("x_exp", [4, 5])])
    x = _rng().standard_normal((4, 5)) * 3
    got = Network(read_onnx(path), engine=engine).infer({"x": x})
    # the float32 attribute reaches the op as its shortest text, 0.1, read as a double; the
    # kernel keeps that (a 0.1f literal would be float32(0.1), 1.5e-9 away)
    alpha = 0.1
    np.testing.assert_allclose(got["e"], np.where(x > 0, x, alpha * np.expm1(x)), rtol=1e-13)
    np.testing.assert_allclose(got["s"], 1 / (1 + np.exp(-x)), rtol=1e-13)
    np.testing.assert_allclose(got["x_exp"], np.exp(x), rtol=1e-13)


def test_views_concat_transpose_and_slice_move_doubles_exactly(tmp_path, engine):
    ints = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)  # noqa: E731
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
             helper.make_node("Concat", ["t", "t"], ["c"], axis=1),
             helper.make_node("Slice", ["c", "starts", "ends"], ["s"]),
             helper.make_node("Reshape", ["s", "shape"], ["r"]),
             helper.make_node("Tile", ["r", "reps"], ["y"])]
    inits = [ints("starts", [1, 1]), ints("ends", [3, 5]), ints("shape", [8]), ints("reps", [2])]
    path = _save(tmp_path / "move.onnx", nodes, [_vi("x", [3, 4])], [_vi("y", [16])], inits)
    x = _rng().standard_normal((3, 4)) + 1e-14
    got = Network(read_onnx(path), engine=engine).infer({"x": x})["y"]
    c = np.concatenate([x.T, x.T], axis=1)
    np.testing.assert_array_equal(got, np.tile(c[1:3, 1:5].reshape(8), 2))


def test_cast_to_and_from_double(tmp_path, engine):
    nodes = [helper.make_node("Cast", ["x"], ["d"], to=D),
             helper.make_node("Mul", ["d", "k"], ["p"]),
             helper.make_node("Cast", ["p"], ["y"], to=TensorProto.FLOAT)]
    k = numpy_helper.from_array(np.array(1.0 + 2 ** -40), "k")
    path = _save(tmp_path / "cast.onnx", nodes, [_vi("x", [5], TensorProto.FLOAT)],
                 [_vi("p", [5]), _vi("y", [5], TensorProto.FLOAT)], [k])
    x = _rng().standard_normal(5).astype(np.float32)
    got = Network(read_onnx(path), engine=engine).infer({"x": x})
    np.testing.assert_array_equal(got["p"], x.astype(np.float64) * (1.0 + 2 ** -40))
    np.testing.assert_array_equal(got["y"], (x.astype(np.float64) * (1.0 + 2 ** -40))
                                  .astype(np.float32))


def test_a_device_without_fp64_refuses_double_tensors(tmp_path, engine, monkeypatch):
    path = _save(tmp_path / "relu.onnx", [helper.make_node("Relu", ["x"], ["y"])],
                 [_vi("x", [2])], [_vi("y", [2])])
    monkeypatch.setattr(network_module, "has_fp64", lambda device: False)
    with pytest.raises(BindingError, match=r"node 0 'y' \(Relu\).*f64 \(double\) tensors need "
                                           r"a device with cl_khr_fp64; .* has none"):
        Network(read_onnx(path), engine=engine)


def test_a_custom_layer_is_not_given_doubles(tmp_path, engine):
    from customlayers.runtime.layers.registry import Registry
    path = _save(tmp_path / "relu.onnx", [helper.make_node("Relu", ["x"], ["y"])],
                 [_vi("x", [2])], [_vi("y", [2])])
    registry = Registry(engine)
    registry.load(ROOT / "examples" / "layers" / "relu" / "relu.xml")   # overrides ReLU
    with pytest.raises(BindingError, match=r"input 0 is f64; a custom layer takes f32, f16, "
                                           r"i8, u8, i32, i64"):
        Network(read_onnx(path), registry, engine)


def test_other_element_types_are_still_named_and_refused(tmp_path):
    """What tests/unit/test_onnx_reader.py and test_tensor.py pinned for DOUBLE/f64 before
    f64 existed, on types that stay unsupported."""
    from customlayers.errors import ModelError, TensorError
    from customlayers.jit.tensor import TensorDesc
    path = _save(tmp_path / "m.onnx", [helper.make_node("Relu", ["x"], ["y"])],
                 [_vi("x", [2], TensorProto.BFLOAT16)], [_vi("y", [2], TensorProto.BFLOAT16)])
    with pytest.raises(ModelError, match=r"m\.onnx: graph input 'x' has element type BFLOAT16, "
                                         r"which is not supported; supported: FLOAT, FLOAT16, "
                                         r"DOUBLE, INT64"):
        read_onnx(path)
    with pytest.raises(TensorError, match="element type 'bf16' is not one of f32, f16, i8, u8, "
                                          "i16, u16, i32, u32, i64, u64, f64"):
        TensorDesc((1,), "bf16")
