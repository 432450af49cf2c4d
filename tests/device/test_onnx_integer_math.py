"""Issue 18, wrong numbers of the integer elementwise ops: ONNX models built with onnx.helper,
run by a Network on the test device and compared with ONNX Runtime. Clip's missing bounds
mean "no bound" in every element type, Div truncates, Mod keeps the sign fmod asks for, an
integer Pow is exact, a divisor of 0 or -1 never traps the device."""
from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper, numpy_helper  # noqa: E402

from customlayers.api import Network  # noqa: E402
from single_node_models import model_file, ours_and_onnxruntime as _both  # noqa: E402


def _model(path: Path, node, feeds: dict, inits=(), opset: int = 17) -> Path:
    return model_file(path, [node], feeds, inits, opset)

INTEGERS = (np.int8, np.uint8, np.int32, np.int64)


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)




# -- Clip -----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", INTEGERS + (np.float32,), ids=lambda t: t.__name__)
@pytest.mark.parametrize("given", [(), ("lo",), ("", "hi"), ("lo", "hi")],
                         ids=["no-bounds", "min-only", "max-only", "both"])
def test_clip_without_a_bound_clamps_nothing_on_that_side(tmp_path, engine, dtype, given):
    info = np.iinfo(dtype) if dtype in INTEGERS else np.finfo(dtype)
    x = np.array([info.min, info.min + 1, 0, 1, 5, info.max], dtype)
    if dtype == np.float32:
        x = np.concatenate([x, np.array([np.inf, -np.inf, np.nan], dtype)])
    bounds = [numpy_helper.from_array(np.array(v, dtype), n) for v, n in ((1, "lo"), (4, "hi"))]
    node = helper.make_node("Clip", ["x", *given], ["y"])
    got, want = _both(engine, _model(tmp_path / "clip.onnx", node, {"x": x},
                                     [b for b in bounds if b.name in given]), {"x": x})
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_clip_of_int64_keeps_bounds_past_2_to_the_53_exact(tmp_path, engine):
    big = 2 ** 53 + 1                    # no double holds it
    x = np.array([big - 3, big, big + 4], np.int64)
    inits = [numpy_helper.from_array(np.array(big, np.int64), "hi")]
    node = helper.make_node("Clip", ["x", "", "hi"], ["y"])
    got, want = _both(engine, _model(tmp_path / "clip.onnx", node, {"x": x}, inits), {"x": x})
    np.testing.assert_array_equal(got, want)
    assert got[-1] == big


def test_clip_of_a_double_tensor_without_max_keeps_large_values(tmp_path, engine):
    if "cl_khr_fp64" not in engine.device.extensions.split():
        pytest.skip("the test device has no fp64")
    x = np.array([-1e300, 0.5, 1e300], np.float64)
    inits = [numpy_helper.from_array(np.array(0, np.float64), "lo")]
    node = helper.make_node("Clip", ["x", "lo"], ["y"])
    got, want = _both(engine, _model(tmp_path / "clip.onnx", node, {"x": x}, inits), {"x": x})
    np.testing.assert_array_equal(got, want)
    assert got[-1] == 1e300


def _clamp_ir(path: Path, dtype: str, n: int, low: str, high: str) -> Path:
    """An OpenVINO IR: Parameter x (`dtype`, [n]) -> Clamp(min=low, max=high) -> y."""
    precision = dtype.upper()
    dims = f"<dim>{n}</dim>"
    path.write_text(
        f'<?xml version="1.0"?>\n<net name="clamp" version="11"><layers>'
        f'<layer id="0" name="x" type="Parameter" version="opset1"><data shape="{n}" '
        f'element_type="{dtype}"/><output><port id="0" precision="{precision}" names="x">'
        f'{dims}</port></output></layer>'
        f'<layer id="1" name="y" type="Clamp" version="opset1"><data min="{low}" max="{high}"/>'
        f'<input><port id="0" precision="{precision}">{dims}</port></input><output>'
        f'<port id="1" precision="{precision}" names="y">{dims}</port></output></layer>'
        f'<layer id="2" name="y/sink" type="Result" version="opset1"><input>'
        f'<port id="0" precision="{precision}">{dims}</port></input></layer>'
        f'</layers><edges><edge from-layer="0" from-port="0" to-layer="1" to-port="0"/>'
        f'<edge from-layer="1" from-port="1" to-layer="2" to-port="0"/></edges></net>\n')
    return path


@pytest.mark.parametrize("dtype", INTEGERS, ids=lambda t: t.__name__)
def test_ir_clamp_of_integers_with_limits_past_the_type_clamps_nothing_there(tmp_path, engine,
                                                                           dtype):
    """The same class in the op itself: an IR's Clamp with the float +-3.4e38 of a missing
    bound (or a -1 on an unsigned tensor) on an integer tensor."""
    short = {np.int8: "i8", np.uint8: "u8", np.int32: "i32", np.int64: "i64"}[dtype]
    info = np.iinfo(dtype)
    x = np.array([info.min, 0, 1, 2, info.max], dtype)
    for low, high, want in (("-3.4e+38", "3.4e+38", x),
                            ("-1", "1e30", np.maximum(x, -1) if info.min < 0 else x),
                            ("1", "3.4e+38", np.maximum(x, 1)),
                            ("-3.4e+38", "1.5", np.minimum(x, 1))):
        path = _clamp_ir(tmp_path / f"clamp{low}{high}.xml", short, x.size, low, high)
        got = Network(path, engine=engine).infer({"x": x})["y"]
        np.testing.assert_array_equal(got, want, err_msg=f"min={low} max={high}")


# -- Div, Mod, Pow --------------------------------------------------------------------------
def _pairs(dtype, values) -> tuple[np.ndarray, np.ndarray]:
    """Every (a, b) of `values`, b never 0 (ONNX Runtime refuses an integer division by 0)."""
    pairs = [(a, b) for a, b in itertools.product(values, values) if b != 0]
    return (np.array([a for a, _ in pairs], dtype), np.array([b for _, b in pairs], dtype))


SIGNED = [-128, -7, -3, -2, -1, 0, 1, 2, 3, 7, 127]
UNSIGNED = [0, 1, 2, 3, 7, 128, 200, 255]


@pytest.mark.parametrize("dtype", INTEGERS + (np.float32,), ids=lambda t: t.__name__)
@pytest.mark.parametrize("op,attrs", [("Div", {}), ("Mod", {"fmod": 0}), ("Mod", {"fmod": 1})],
                         ids=["Div", "Mod-fmod0", "Mod-fmod1"])
def test_integer_division_and_remainder_match_onnxruntime(tmp_path, engine, dtype, op, attrs):
    if dtype == np.float32 and attrs.get("fmod") == 0:
        pytest.skip("ONNX Runtime refuses fmod=0 on floats before opset 28")
    a, b = _pairs(dtype, UNSIGNED if dtype == np.uint8 else SIGNED)
    node = helper.make_node(op, ["a", "b"], ["y"], **attrs)
    got, want = _both(engine, _model(tmp_path / "m.onnx", node, {"a": a, "b": b}),
                      {"a": a, "b": b})
    if dtype == np.float32 and op == "Div":
        # OpenCL's float division may be off by 2.5 ulp (NVIDIA's is, unless built with
        # -cl-fp32-correctly-rounded-divide-sqrt); integers are exact everywhere
        np.testing.assert_allclose(got, want, rtol=4e-7, atol=0)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", (np.int32, np.int64), ids=lambda t: t.__name__)
def test_integer_pow_is_exact(tmp_path, engine, dtype):
    # 0 ** -n is left out: ONNX Runtime casts an infinity to the integer type (undefined in C)
    base = np.array([3, -3, 2, 7, 5, 1, -1, -1, 2, 0, 4, -2], dtype)
    exp = np.array([19, 19, 30, 10, -2, -5, -5, -4, 0, 3, 1, 3], dtype)
    if dtype == np.int64:
        base = np.concatenate([base, np.array([3, -3, 2, 7], dtype)])
        exp = np.concatenate([exp, np.array([33, 33, 52, 18], dtype)])   # past float's 2**24
    node = helper.make_node("Pow", ["a", "b"], ["y"])
    got, want = _both(engine, _model(tmp_path / "pow.onnx", node, {"a": base, "b": exp}),
                      {"a": base, "b": exp})
    np.testing.assert_array_equal(got, want)


def test_integer_pow_with_a_float_exponent_truncates(tmp_path, engine):
    base = np.array([2, 3, 2, 3, 2, 10], np.int32)
    exp = np.array([0.5, 2.0, 2.5, 3.0, -1.0, 9.0], np.float32)
    node = helper.make_node("Pow", ["a", "b"], ["y"])
    got, want = _both(engine, _model(tmp_path / "pow.onnx", node, {"a": base, "b": exp}),
                      {"a": base, "b": exp})
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", (np.int8, np.int32, np.int64), ids=lambda t: t.__name__)
def test_the_most_negative_value_divided_by_minus_one_does_not_trap(tmp_path, engine, dtype):
    """x86 traps on INT_MIN / -1 (and its remainder); the result wraps, as numpy's does."""
    low = np.iinfo(dtype).min
    a = np.array([low, low, 7, -7], dtype)
    b = np.array([-1, 1, -1, -1], dtype)
    for op, attrs, want in (("Div", {}, [low, low, -7, 7]), ("Mod", {"fmod": 0}, [0, 0, 0, 0]),
                            ("Mod", {"fmod": 1}, [0, 0, 0, 0])):
        path = _model(tmp_path / f"{op}{attrs}.onnx", helper.make_node(op, ["a", "b"], ["y"],
                                                                      **attrs), {"a": a, "b": b})
        got = Network(path, engine=engine).infer({"a": a, "b": b})["y"]
        np.testing.assert_array_equal(got, np.array(want, dtype))
