"""Issue 20 item 4: ONNX Resize (opset 10 to 19) and Upsample (7, 9) on the built-in Resize
(ops/image/resize.py, resample.cl), every mode, checked against onnx's reference evaluator (the
arithmetic the node suite's expected outputs come from) and ONNX Runtime where the two agree:
they differ for align_corners and half_pixel_symmetric when scale x length is not a whole
number (the reference divides by that product, ONNX Runtime by the output length), and the
reference has no Resize-10 or linear Upsample, where ONNX Runtime alone is the check. Scales
are exact binary fractions where nearest is compared: ONNX Runtime maps coordinates in float32,
the reference in float64, and a coordinate a rounding away from a tie rounds apart."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from customlayers.errors import BindingError, ModelError  # noqa: E402
from customlayers.graph.onnx.reader import read_onnx  # noqa: E402
from customlayers.runtime.compile.network import Network  # noqa: E402

F = TensorProto.FLOAT
RNG = np.random.default_rng(20)
X = RNG.standard_normal((2, 3, 7, 9)).astype(np.float32)


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def _resize_model(path: Path, attrs: dict, shape, *, scales=None, sizes=None, roi=None,
                  as_inputs: bool = False, opset: int = 19, op: str = "Resize") -> Path:
    """Resize(x, roi, scales, sizes) with the given operands as initializers, or (as_inputs)
    graph inputs."""
    values = {"roi": None if roi is None else np.array(roi, np.float32),
              "scales": None if scales is None else np.array(scales, np.float32),
              "sizes": None if sizes is None else np.array(sizes, np.int64)}
    order = ("scales",) if op == "Upsample" or opset == 10 else ("roi", "scales", "sizes")
    names = [n if values[n] is not None else "" for n in order]
    while names and not names[-1]:
        names.pop()
    inputs = [helper.make_tensor_value_info("x", F, shape)]
    inits = []
    for n in names:
        if not n:
            continue
        if as_inputs:
            inputs.append(helper.make_tensor_value_info(
                n, TensorProto.INT64 if n == "sizes" else F, [values[n].size]))
        else:
            inits.append(numpy_helper.from_array(values[n], n))
    node = helper.make_node(op, ["x", *names], ["y"], **attrs)
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", F, None)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _run(engine, path: Path, x: np.ndarray, feeds: dict | None = None) -> np.ndarray:
    return Network(read_onnx(path), engine=engine).infer({"x": x, **(feeds or {})})["y"]


def _reference(path: Path, x: np.ndarray, feeds: dict | None = None) -> np.ndarray:
    return ReferenceEvaluator(str(path)).run(None, {"x": x, **(feeds or {})})[0]


def _ort(path: Path, x: np.ndarray, feeds: dict | None = None) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x, **(feeds or {})})[0]


NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
COORDS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
          "asymmetric")


@pytest.mark.parametrize("nearest_mode", NEAREST)
@pytest.mark.parametrize("coords", COORDS)
@pytest.mark.parametrize("scales", [(1, 1, 2.5, 0.75), (1, 1, 0.5, 1.75)])
def test_nearest_every_rounding_and_coordinate_mode(tmp_path, engine, nearest_mode, coords,
                                                    scales):
    path = _resize_model(tmp_path / "r.onnx", {"mode": "nearest", "nearest_mode": nearest_mode,
                                               "coordinate_transformation_mode": coords},
                         X.shape, scales=scales)
    got = _run(engine, path, X)
    np.testing.assert_array_equal(got, _reference(path, X))
    if coords not in ("align_corners", "half_pixel_symmetric"):
        np.testing.assert_array_equal(got, _ort(path, X))


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("coords", COORDS)
@pytest.mark.parametrize("antialias", [0, 1])
@pytest.mark.parametrize("scales", [(1, 1, 2.5, 0.6), (1, 1, 0.5, 1.7)])
def test_linear_and_cubic_every_coordinate_mode(tmp_path, engine, mode, coords, antialias,
                                                scales):
    path = _resize_model(tmp_path / "r.onnx", {"mode": mode, "antialias": antialias,
                                               "coordinate_transformation_mode": coords},
                         X.shape, scales=scales)
    got = _run(engine, path, X)
    np.testing.assert_allclose(got, _reference(path, X), rtol=1e-5, atol=1e-5)
    if coords not in ("align_corners", "half_pixel_symmetric"):
        np.testing.assert_allclose(got, _ort(path, X), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("coords", ["align_corners", "half_pixel_symmetric", "half_pixel"])
def test_sizes_match_onnx_runtime(tmp_path, engine, mode, coords):
    path = _resize_model(tmp_path / "r.onnx", {"mode": mode,
                                               "coordinate_transformation_mode": coords},
                         X.shape, sizes=(2, 3, 16, 5))
    got = _run(engine, path, X)
    assert got.shape == (2, 3, 16, 5)
    np.testing.assert_allclose(got, _reference(path, X), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, _ort(path, X), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("a,exclude", [(-0.5, 1), (-0.75, 1), (-0.6, 0)])
def test_cubic_coefficient_and_exclude_outside(tmp_path, engine, a, exclude):
    path = _resize_model(tmp_path / "r.onnx", {"mode": "cubic", "cubic_coeff_a": a,
                                               "exclude_outside": exclude},
                         X.shape, scales=(1, 1, 1.6, 0.7))
    got = _run(engine, path, X)
    np.testing.assert_allclose(got, _reference(path, X), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, _ort(path, X), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape,scales", [((2, 3, 10), (1, 1, 2.2)),          # 1-D
                                          ((1, 2, 3, 4, 5), (1, 1, 2, 1.5, 0.8))])  # trilinear
def test_linear_one_and_three_dimensional(tmp_path, engine, shape, scales):
    x = RNG.standard_normal(shape).astype(np.float32)
    path = _resize_model(tmp_path / "r.onnx", {"mode": "linear"}, shape, scales=scales)
    got = _run(engine, path, x)
    np.testing.assert_allclose(got, _reference(path, x), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, _ort(path, x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("extrapolation", [0.0, 10.0])
def test_tf_crop_and_resize_with_roi_as_graph_input(tmp_path, engine, extrapolation):
    roi = [0, 0, -0.2, 0.3, 1, 1, 0.9, 1.4]           # reaches past the image on both sides
    attrs = {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize",
             "extrapolation_value": extrapolation}
    path = _resize_model(tmp_path / "r.onnx", attrs, X.shape, roi=roi, sizes=(2, 3, 6, 11),
                         as_inputs=True)
    feeds = {"roi": np.array(roi, np.float32), "sizes": np.array((2, 3, 6, 11), np.int64)}
    got = _run(engine, path, X, feeds)
    np.testing.assert_allclose(got, _reference(path, X, feeds), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, _ort(path, X, feeds), rtol=1e-4, atol=1e-5)


def test_axes_and_keep_aspect_ratio(tmp_path, engine):
    for policy in ("stretch", "not_larger", "not_smaller"):
        path = _resize_model(tmp_path / f"{policy}.onnx",
                             {"mode": "linear", "axes": [3, 2], "keep_aspect_ratio_policy": policy},
                             X.shape, sizes=(5, 13))
        got = _run(engine, path, X)
        np.testing.assert_allclose(got, _reference(path, X), rtol=1e-5, atol=1e-5,
                                   err_msg=policy)
        np.testing.assert_allclose(got, _ort(path, X), rtol=1e-4, atol=1e-5, err_msg=policy)


def test_scales_as_graph_input_compile_a_plan_per_value(tmp_path, engine):
    path = _resize_model(tmp_path / "r.onnx", {"mode": "nearest"}, X.shape,
                         scales=(1, 1, 2, 2), as_inputs=True)
    net = Network(read_onnx(path), engine=engine)
    assert list(net.value_inputs) == ["scales"]
    for scales in ((1, 1, 2, 2), (1, 1, 0.5, 3), (1, 1, 2, 2)):
        feeds = {"scales": np.array(scales, np.float32)}
        got = net.infer({"x": X, **feeds})["y"]
        np.testing.assert_array_equal(got, _reference(path, X, feeds))


@pytest.mark.parametrize("opset,op,attrs,scales", [
    (9, "Upsample", {"mode": "nearest"}, (1, 1, 2, 3)),
    (9, "Upsample", {"mode": "linear"}, (1, 1, 2.5, 1.5)),
    (10, "Resize", {"mode": "nearest"}, (1, 1, 0.5, 0.7)),     # shrinking: ceil
    (10, "Resize", {"mode": "linear"}, (1, 1, 1.5, 0.5)),
])
def test_upsample_and_resize_10_match_onnx_runtime(tmp_path, engine, opset, op, attrs, scales):
    path = _resize_model(tmp_path / "r.onnx", attrs, X.shape, scales=scales, opset=opset, op=op)
    np.testing.assert_allclose(_run(engine, path, X), _ort(path, X), rtol=1e-5, atol=1e-5)


def test_upsample_7_scales_attribute(tmp_path, engine):
    node = helper.make_node("Upsample", ["x"], ["y"], mode="nearest", scales=[1.0, 1.0, 2.0, 2.0])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", F, X.shape)],
                              [helper.make_tensor_value_info("y", F, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 7)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "u.onnx"))
    got = _run(engine, tmp_path / "u.onnx", X)
    np.testing.assert_array_equal(got, X.repeat(2, axis=2).repeat(2, axis=3))


# -- refusals --------------------------------------------------------------------------------
def _refusal(tmp_path, nodes, inputs, inits=(), opset=19, error=ModelError) -> str:
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", F, None)],
                              list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "bad.onnx"))
    with pytest.raises(error) as info:
        Network(read_onnx(tmp_path / "bad.onnx"))
    return str(info.value)


X_INFO = helper.make_tensor_value_info("x", F, [1, 1, 4, 4])


def test_scales_computed_at_run_time_are_refused(tmp_path):
    nodes = [helper.make_node("Relu", ["s"], ["s2"]),
             helper.make_node("Resize", ["x", "", "s2"], ["y"], name="up")]
    message = _refusal(tmp_path, nodes, [X_INFO, helper.make_tensor_value_info("s", F, [4])])
    assert "'up' (Resize)" in message
    assert "scales (input 2, 's2') must be a constant or a graph input" in message


@pytest.mark.parametrize("inputs,attrs,opset,op,expected", [
    (["x", "", "s", "z"], {}, 19, "Resize", "exactly one of scales and sizes must be given"),
    (["x", "", "s"], {"mode": "nearest", "antialias": 1}, 19, "Resize",
     "antialias applies to modes linear and cubic"),
    (["x", "s"], {"mode": "cubic"}, 9, "Upsample", "mode 'cubic' is not part of Upsample"),
    (["x", "", "s"], {"mode": "area"}, 19, "Resize", "mode='area' is not one of"),
    (["x", "", "s"], {"coordinate_transformation_mode": "centre"}, 19, "Resize",
     "coordinate_transformation_mode='centre' is not one of"),
])
def test_bad_forms_are_refused_naming_the_node(tmp_path, inputs, attrs, opset, op, expected):
    inits = [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "s"),
             numpy_helper.from_array(np.array([1, 1, 8, 8], np.int64), "z")]
    nodes = [helper.make_node(op, inputs, ["y"], name="up", **attrs)]
    message = _refusal(tmp_path, nodes, [X_INFO], inits, opset)
    assert f"'up' ({op})" in message and expected in message, message


@pytest.mark.parametrize("scales,expected", [
    ((1, 1, 0.1, 1), "the output shape would be [1, 1, 0, 4]"),
    ((1, 1, 2), "scales has 3 values; the input of rank 4"),
    ((1, 1, -2, 2), "scales must be positive"),
])
def test_bad_scales_are_refused(tmp_path, scales, expected):
    """Checked where the op is bound (a BindingError naming the node), as scales given per
    run are: a constant and a graph input's value take one path."""
    inits = [numpy_helper.from_array(np.array(scales, np.float32), "s")]
    nodes = [helper.make_node("Resize", ["x", "", "s"], ["y"], name="up")]
    message = _refusal(tmp_path, nodes, [X_INFO], inits, error=BindingError)
    assert "node 0 'up' (Resize)" in message and expected in message, message


@pytest.mark.parametrize("attrs,sizes", [
    ({"mode": "nearest", "coordinate_transformation_mode": "tf_half_pixel_for_nn"}, None),
    ({"mode": "linear", "coordinate_transformation_mode": "half_pixel"}, (2, 3, 10, 4)),
    ({"mode": "cubic", "coordinate_transformation_mode": "align_corners"}, (2, 3, 10, 4)),
])
@pytest.mark.parametrize("opset", [11, 13])
def test_opset_11_and_13_with_empty_roi_and_scales_constants(tmp_path, engine, attrs, sizes,
                                                              opset):
    """As torch.onnx exported them: roi (and, with sizes, scales) given as empty constants."""
    empty = np.zeros(0, np.float32)
    inits = [numpy_helper.from_array(empty, "roi"),
             numpy_helper.from_array(np.array((1, 1, 1.5, 0.75), np.float32)
                                     if sizes is None else empty, "scales")]
    inputs = ["x", "roi", "scales"]
    if sizes is not None:
        inits.append(numpy_helper.from_array(np.array(sizes, np.int64), "sizes"))
        inputs.append("sizes")
    graph = helper.make_graph([helper.make_node("Resize", inputs, ["y"], **attrs)], "g",
                              [helper.make_tensor_value_info("x", F, X.shape)],
                              [helper.make_tensor_value_info("y", F, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "r.onnx"))
    np.testing.assert_allclose(_run(engine, tmp_path / "r.onnx", X), _ort(tmp_path / "r.onnx", X),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("elem,dtype", [(TensorProto.UINT8, np.uint8),
                                        (TensorProto.INT64, np.int64)])
def test_nearest_on_integers_is_an_exact_copy(tmp_path, engine, elem, dtype):
    x = RNG.integers(0, 255, (1, 3, 5, 6)).astype(dtype)
    if dtype == np.int64:
        x = x * (1 << 40) + 7                  # beyond float precision: no float on the way
    inits = [numpy_helper.from_array(np.array((1, 1, 2.5, 0.75), np.float32), "scales")]
    graph = helper.make_graph([helper.make_node("Resize", ["x", "", "scales"], ["y"],
                                                mode="nearest")], "g",
                              [helper.make_tensor_value_info("x", elem, x.shape)],
                              [helper.make_tensor_value_info("y", elem, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "r.onnx"))
    got = _run(engine, tmp_path / "r.onnx", x)
    assert got.dtype == dtype
    # ONNX Runtime has no int64 Resize; the reference's float64 holds these values exactly
    check = _ort if dtype == np.uint8 else _reference
    np.testing.assert_array_equal(got, check(tmp_path / "r.onnx", x))


def test_linear_on_integers_is_refused(tmp_path):
    inits = [numpy_helper.from_array(np.array((1, 1, 2, 2), np.float32), "s")]
    nodes = [helper.make_node("Resize", ["x", "", "s"], ["y"], name="up", mode="linear")]
    message = _refusal(tmp_path, nodes, [helper.make_tensor_value_info(
        "x", TensorProto.UINT8, [1, 1, 4, 4])], inits, error=BindingError)
    assert "'up' (Resize)" in message and "mode linear on element type u8 is not supported" \
        in message, message


def test_antialiased_volume_with_more_taps_than_the_kernel_caches(tmp_path, engine):
    """Cubic antialias at 1/4 on two outer axes: 16 x 16 taps per row, past resample.cl's
    MAX_OUTER (64), which it then works out per element."""
    x = RNG.standard_normal((1, 2, 12, 12, 10)).astype(np.float32)
    path = _resize_model(tmp_path / "r.onnx", {"mode": "cubic", "antialias": 1}, x.shape,
                         scales=(1, 1, 0.25, 0.25, 0.5))
    np.testing.assert_allclose(_run(engine, path, x), _reference(path, x), rtol=1e-4, atol=1e-5)


def test_sizes_computed_from_the_input_shape_with_a_dynamic_batch(tmp_path, engine):
    """The older torch.onnx pattern: sizes = Concat(Shape(x)[:2], Shape(x)[2:] * 2), folded per
    input shape by the shape pass; a new batch re-plans."""
    i64 = lambda n, v: numpy_helper.from_array(np.array(v, np.int64), n)  # noqa: E731
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Slice", ["shape", "zero", "two"], ["nc"]),
             helper.make_node("Slice", ["shape", "two", "four"], ["hw"]),
             helper.make_node("Mul", ["hw", "twos"], ["hw2"]),
             helper.make_node("Concat", ["nc", "hw2"], ["sizes"], axis=0),
             helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="nearest")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, ["N", 3, 5, 6])],
                              [helper.make_tensor_value_info("y", F, None)],
                              [i64("zero", [0]), i64("two", [2]), i64("four", [4]),
                               i64("twos", [2, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "r.onnx"))
    net = Network(read_onnx(tmp_path / "r.onnx"), engine=engine)
    for batch in (1, 3):
        x = RNG.standard_normal((batch, 3, 5, 6)).astype(np.float32)
        np.testing.assert_array_equal(net.infer({"x": x})["y"],
                                      x.repeat(2, axis=2).repeat(2, axis=3))
