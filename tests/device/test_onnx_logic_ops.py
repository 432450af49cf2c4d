"""Issue 20, elementwise ops on data (ops/logic): comparisons, logic, Where, IsNaN/IsInf, the
bitwise ops and BitShift, and the math functions (Acos ... Tan, Round, Celu, ThresholdedRelu,
Swish). Small ONNX models built with onnx.helper, run by a Network on the test device and
compared with ONNX Runtime (and numpy), on every element type the op takes here, with numpy
broadcasting and NaN/Inf inputs; a boolean output comes back as numpy bool. (The IR side:
test_ir_logic_ops.py.)"""
from __future__ import annotations


import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

from customlayers.api import Network  # noqa: E402
from single_node_models import model_file, ours_and_onnxruntime as _both  # noqa: E402
from customlayers.errors import CustomLayersError  # noqa: E402

FLOATS = (np.float32, np.float64)
INTEGERS = (np.int8, np.uint8, np.int32, np.int64)
ALL = FLOATS + INTEGERS
# (shape of a, shape of b): same shape, a scalar, lower rank, both broadcast
BROADCASTS = [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), ()), ((2, 3, 4), (4,)),
              ((3, 1, 4), (5, 1))]


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)




def _values(dtype, shape, seed: int) -> np.ndarray:
    """Small values with repeats (so that equality happens); NaN, +-Inf and -0 among floats,
    the type's extremes among integers."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape, dtype=np.int64))
    if dtype in FLOATS:
        pool = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -2.0, 3.0], dtype)
    else:
        info = np.iinfo(dtype)
        pool = np.array([info.min, info.max, 0, 1, 3, info.max - 1], dtype)
    return rng.choice(pool, n).astype(dtype).reshape(shape)


# -- comparisons ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL, ids=lambda t: t.__name__)
@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_comparisons_match_onnx_runtime_on_every_type(tmp_path, engine, op, dtype):
    a, b = _values(dtype, (3, 1, 4), 1), _values(dtype, (5, 1), 2)
    path = model_file(tmp_path / "m.onnx", [helper.make_node(op, ["a", "b"], ["y"])],
                  {"a": a, "b": b})
    got, want = _both(engine, path, {"a": a, "b": b})
    assert got.dtype == np.bool_ and got.shape == want.shape == (3, 5, 4)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shapes", BROADCASTS, ids=str)
def test_a_comparison_broadcasts_as_numpy_does(tmp_path, engine, shapes):
    a, b = _values(np.float32, shapes[0], 3), _values(np.float32, shapes[1], 4)
    path = model_file(tmp_path / "m.onnx", [helper.make_node("Less", ["a", "b"], ["y"])],
                  {"a": a, "b": b})
    got, want = _both(engine, path, {"a": a, "b": b})
    np.testing.assert_array_equal(got, np.less(a, b))
    np.testing.assert_array_equal(got, want)


def test_a_mask_compared_with_a_constant_feeds_the_next_layer(tmp_path, engine):
    """Less(x, 0) as a Cast to float: the u8 mask is data for the layers after it."""
    x = _values(np.float32, (2, 6), 5)
    zero = helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])
    nodes = [helper.make_node("Constant", [], ["z"], value=zero),
             helper.make_node("Less", ["x", "z"], ["m"]),
             helper.make_node("Cast", ["m"], ["y"], to=TensorProto.FLOAT)]
    got, want = _both(engine, model_file(tmp_path / "m.onnx", nodes, {"x": x}), {"x": x})
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)


# -- logic ------------------------------------------------------------------------------------
@pytest.mark.parametrize("shapes", BROADCASTS, ids=str)
@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logic_on_booleans_matches_numpy(tmp_path, engine, op, shapes):
    rng = np.random.default_rng(6)
    a, b = np.asarray(rng.random(shapes[0]) < 0.5), np.asarray(rng.random(shapes[1]) < 0.5)
    path = model_file(tmp_path / "m.onnx", [helper.make_node(op, ["a", "b"], ["y"])],
                  {"a": a, "b": b})
    got, want = _both(engine, path, {"a": a, "b": b})
    expected = {"And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor}[op](a, b)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got, want)


def test_not_of_a_comparison(tmp_path, engine):
    x = _values(np.float32, (4, 5), 7)
    nodes = [helper.make_node("Greater", ["x", "x2"], ["m"]),
             helper.make_node("Not", ["m"], ["y"])]
    feeds = {"x": x, "x2": x[::-1].copy()}
    got, want = _both(engine, model_file(tmp_path / "m.onnx", nodes, feeds), feeds)
    np.testing.assert_array_equal(got, ~(x > x[::-1]))
    np.testing.assert_array_equal(got, want)


# -- Where ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL + (np.bool_,), ids=lambda t: t.__name__)
def test_where_matches_onnx_runtime_on_every_type(tmp_path, engine, dtype):
    rng = np.random.default_rng(8)
    cond = rng.random((2, 1, 4)) < 0.5
    x = rng.random((3, 1)) < 0.5 if dtype is np.bool_ else _values(dtype, (3, 1), 9)
    y = rng.random((4,)) < 0.5 if dtype is np.bool_ else _values(dtype, (4,), 10)
    feeds = {"c": cond, "x": x, "y0": y}
    path = model_file(tmp_path / "m.onnx", [helper.make_node("Where", ["c", "x", "y0"], ["y"])],
                  feeds)
    got = Network(path, engine=engine).infer(feeds)["y"]
    assert got.shape == (2, 3, 4) and got.dtype == dtype
    np.testing.assert_array_equal(got, np.where(cond, x, y))
    try:            # ONNX Runtime too, where its build has a Where of this type (not of bool;
        #             some builds lack int8 and others)
        want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
            ["y"], feeds)[0]
    except Exception as e:                      # noqa: BLE001 - its NOT_IMPLEMENTED
        assert dtype is np.bool_ or "NOT_IMPLEMENTED" in str(e), e
        return
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shapes", [((2, 3), (2, 3), (2, 3)), ((), (2, 3), ()),
                                    ((2, 1, 1), (1, 3, 1), (1, 1, 4)),
                                    ((5, 1, 3), (3,), (4, 1))], ids=str)
def test_where_broadcasts_three_ways(tmp_path, engine, shapes):
    rng = np.random.default_rng(11)
    cond = np.asarray(rng.random(shapes[0]) < 0.5)
    x, y = _values(np.float32, shapes[1], 12), _values(np.float32, shapes[2], 13)
    feeds = {"c": cond, "x": x, "y0": y}
    path = model_file(tmp_path / "m.onnx", [helper.make_node("Where", ["c", "x", "y0"], ["y"])],
                  feeds)
    got, want = _both(engine, path, feeds)
    np.testing.assert_array_equal(got, np.where(cond, x, y))
    np.testing.assert_array_equal(got, want)


def test_an_attention_style_mask_runs(tmp_path, engine):
    """Where(Equal(mask, 0), -inf, scores): the pattern a BERT-like export emits."""
    rng = np.random.default_rng(14)
    scores = rng.standard_normal((2, 3, 4)).astype(np.float32)
    mask = rng.integers(0, 2, (2, 1, 4)).astype(np.int64)
    zero = helper.make_tensor("zero", TensorProto.INT64, [], [0])
    ninf = helper.make_tensor("ninf", TensorProto.FLOAT, [], [-np.inf])
    nodes = [helper.make_node("Constant", [], ["z"], value=zero),
             helper.make_node("Constant", [], ["n"], value=ninf),
             helper.make_node("Equal", ["mask", "z"], ["m"]),
             helper.make_node("Where", ["m", "n", "scores"], ["y"])]
    feeds = {"scores": scores, "mask": mask}
    got, want = _both(engine, model_file(tmp_path / "m.onnx", nodes, feeds), feeds)
    np.testing.assert_array_equal(got, want)


# -- IsNaN, IsInf -----------------------------------------------------------------------------
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -3.5, 1e30]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda t: t.__name__)
@pytest.mark.parametrize("flags", [{}, {"detect_negative": 0}, {"detect_positive": 0},
                                   {"detect_negative": 0, "detect_positive": 0}], ids=str)
def test_is_inf_detects_the_infinities_asked_for(tmp_path, engine, dtype, flags):
    x = np.array(SPECIAL, dtype).reshape(2, 4)
    path = model_file(tmp_path / "m.onnx", [helper.make_node("IsInf", ["x"], ["y"], **flags)],
                  {"x": x}, opset=20)
    got, want = _both(engine, path, {"x": x})
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda t: t.__name__)
def test_is_nan(tmp_path, engine, dtype):
    x = np.array(SPECIAL, dtype)
    path = model_file(tmp_path / "m.onnx", [helper.make_node("IsNaN", ["x"], ["y"])], {"x": x})
    got, want = _both(engine, path, {"x": x})
    np.testing.assert_array_equal(got, np.isnan(x))
    np.testing.assert_array_equal(got, want)


# -- bitwise ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", INTEGERS, ids=lambda t: t.__name__)
@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
def test_bitwise_ops_match_numpy(tmp_path, engine, op, dtype):
    a, b = _values(dtype, (3, 4), 15), _values(dtype, (4,), 16)
    path = model_file(tmp_path / "m.onnx", [helper.make_node(op, ["a", "b"], ["y"])],
                  {"a": a, "b": b}, opset=18)
    got, want = _both(engine, path, {"a": a, "b": b})
    fn = {"BitwiseAnd": np.bitwise_and, "BitwiseOr": np.bitwise_or,
          "BitwiseXor": np.bitwise_xor}[op]
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, fn(a, b))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", INTEGERS, ids=lambda t: t.__name__)
def test_bitwise_not(tmp_path, engine, dtype):
    a = _values(dtype, (3, 4), 17)
    path = model_file(tmp_path / "m.onnx", [helper.make_node("BitwiseNot", ["a"], ["y"])],
                  {"a": a}, opset=18)
    got, want = _both(engine, path, {"a": a})
    np.testing.assert_array_equal(got, np.invert(a))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bit_shift_of_bytes(tmp_path, engine, direction):
    a = np.array([[1, 2, 255, 128], [7, 0, 64, 3]], np.uint8)
    b = np.array([0, 1, 7, 3], np.uint8)
    path = model_file(tmp_path / "m.onnx",
                  [helper.make_node("BitShift", ["a", "b"], ["y"], direction=direction)],
                  {"a": a, "b": b})
    got, want = _both(engine, path, {"a": a, "b": b})
    fn = np.left_shift if direction == "LEFT" else np.right_shift
    np.testing.assert_array_equal(got, fn(a, b))
    np.testing.assert_array_equal(got, want)


def test_a_shift_by_the_width_or_more_gives_zero_as_numpy(cl_env):
    """ONNX leaves it open; C leaves it undefined; numpy (the reference) gives 0."""
    from op_harness import run_op
    a = np.array([1, 255, 9, 200], np.uint8)
    b = np.array([8, 9, 200, 255], np.uint8)
    for op, fn in (("BitwiseLeftShift", np.left_shift), ("BitwiseRightShift", np.right_shift)):
        [got] = run_op(cl_env, op, [a, b])
        np.testing.assert_array_equal(got, fn(a, b))


# -- math functions ---------------------------------------------------------------------------
UNARY = {"Acos": (np.arccos, 0.99), "Acosh": (np.arccosh, None), "Asin": (np.arcsin, 0.99),
         "Asinh": (np.arcsinh, 3.0), "Atan": (np.arctan, 5.0), "Atanh": (np.arctanh, 0.99),
         "Cosh": (np.cosh, 5.0), "Sinh": (np.sinh, 5.0), "Tan": (np.tan, 1.5)}


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda t: t.__name__)
@pytest.mark.parametrize("op", sorted(UNARY))
def test_math_functions_match_numpy_in_float64(tmp_path, engine, op, dtype):
    fn, scale = UNARY[op]
    rng = np.random.default_rng(18)
    x = (1.0 + 4 * rng.random((3, 7)) if scale is None else
         scale * (2 * rng.random((3, 7)) - 1)).astype(dtype)
    path = model_file(tmp_path / "m.onnx", [helper.make_node(op, ["x"], ["y"])], {"x": x})
    if dtype == np.float32:
        got, want = _both(engine, path, {"x": x})
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
    else:                                       # ONNX Runtime has them for float only
        got = Network(path, engine=engine).infer({"x": x})["y"]
    tol = 2e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got, fn(x.astype(np.float64)), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda t: t.__name__)
def test_round_takes_halves_to_even(tmp_path, engine, dtype):
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, -2.6, np.nan, np.inf], dtype)
    path = model_file(tmp_path / "m.onnx", [helper.make_node("Round", ["x"], ["y"])], {"x": x})
    got, want = _both(engine, path, {"x": x})
    np.testing.assert_array_equal(got, np.round(x))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op, attrs", [("Celu", {"alpha": 2.0}), ("Celu", {}),
                                       ("ThresholdedRelu", {"alpha": 0.5}),
                                       ("ThresholdedRelu", {}), ("Swish", {"alpha": 0.7})],
                         ids=str)
def test_activations_with_alpha(tmp_path, engine, op, attrs):
    x = np.linspace(-4, 4, 24, dtype=np.float32).reshape(4, 6)
    opset = 24 if op == "Swish" else 17
    path = model_file(tmp_path / "m.onnx", [helper.make_node(op, ["x"], ["y"], **attrs)],
                  {"x": x}, opset=opset)
    got = Network(path, engine=engine).infer({"x": x})["y"]
    alpha = attrs.get("alpha", 1.0)
    x64 = x.astype(np.float64)
    want = {"Celu": np.maximum(0, x64) + np.minimum(0, alpha * np.expm1(x64 / alpha)),
            "ThresholdedRelu": np.where(x64 > alpha, x64, 0),
            "Swish": x64 / (1 + np.exp(-alpha * x64))}[op]
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-7)


# -- refusals ---------------------------------------------------------------------------------
def test_bitwise_ops_on_floats_are_refused_naming_the_layer(cl_env):
    from op_harness import run_op
    x = np.ones(3, np.float32)
    with pytest.raises(CustomLayersError, match=r"BitwiseAnd: input of type f32 is not "
                                                r"supported; expected an integer"):
        run_op(cl_env, "BitwiseAnd", [x, x])


# -- CastLike on data -----------------------------------------------------------------------------
@pytest.mark.parametrize("like_type", [np.float64, np.int32, np.uint8, np.bool_],
                         ids=lambda t: t.__name__)
def test_cast_like_of_a_value_computed_at_run_time(tmp_path, engine, like_type):
    """A Convert to the like's type; to bool a comparison with 0 (not a truncation to u8)."""
    x = np.array([[0.0, 0.25, -1.5, 2.75], [3.0, -0.0, 200.5, 7.0]], np.float32)
    like = np.zeros((1,), like_type)
    nodes = [helper.make_node("Abs", ["x"], ["a"]),
             helper.make_node("CastLike", ["a", "like"], ["y"])]
    feeds = {"x": x, "like": like}
    got, want = _both(engine, model_file(tmp_path / "m.onnx", nodes, feeds, opset=19), feeds)
    assert got.dtype == want.dtype == like_type
    np.testing.assert_array_equal(got, want)


def test_a_padding_mask_from_a_symbolic_length_and_data_runs(tmp_path, engine):
    """Less(Range(0, T), lengths): the positions are shape arithmetic (folded per input shape),
    the lengths are data; the comparison reads both, at every sequence length."""
    one = helper.make_tensor("one", TensorProto.INT64, [], [1])
    zero = helper.make_tensor("zero", TensorProto.INT64, [], [0])
    fill = helper.make_tensor("fill", TensorProto.FLOAT, [], [0.0])
    nodes = [helper.make_node("Constant", [], ["c1"], value=one),
             helper.make_node("Constant", [], ["c0"], value=zero),
             helper.make_node("Constant", [], ["f"], value=fill),
             helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "c1"], ["t"], axis=0),
             helper.make_node("Range", ["c0", "t", "c1"], ["pos"]),
             helper.make_node("Less", ["pos", "lengths"], ["m"]),
             helper.make_node("Where", ["m", "x", "f"], ["y"])]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "T"])
    lengths = helper.make_tensor_value_info("lengths", TensorProto.INT64, ["N", 1])
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph(nodes, "g", [x, lengths], [out]),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "mask.onnx"
    onnx.save(model, str(path))
    net = Network(path, engine=engine)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(20)
    for n, t in ((2, 5), (3, 7)):
        feeds = {"x": rng.standard_normal((n, t)).astype(np.float32),
                 "lengths": rng.integers(0, t + 1, (n, 1)).astype(np.int64)}
        got = net.infer(feeds)["y"]
        np.testing.assert_array_equal(got, session.run(["y"], feeds)[0])


def test_a_bool_input_given_as_numbers_is_true_where_they_are_not_0(tmp_path, engine):
    # held as u8: a plain conversion would make 0.5 (and 256) false
    path = model_file(tmp_path / "m.onnx", [helper.make_node("Not", ["c"], ["y"])],
                  {"c": np.array([True, False, True, False])})
    got = Network(path, engine=engine).infer({"c": np.array([0.5, 0.0, 256.0, -0.0])})["y"]
    np.testing.assert_array_equal(got, [False, True, False, True])
