"""Issue 20: the index ops on data (ops/index/, graph/onnx/ops/index.py) against ONNX Runtime
on onnx.helper models: GatherElements/ND, ScatterElements/ND with every reduction and duplicate
indices, ArgMax/ArgMin, TopK (k a graph input), CumSum/CumProd, OneHot, Range on data,
EyeLike, Trilu with k as data, CastLike on data, ReverseSequence, Einsum, and the ops whose
output size is data's (folded when constant, refused otherwise). Negative indices wrap;
out-of-range ones read 0 or skip their update; bad inputs are refused naming the node."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper, numpy_helper  # noqa: E402

from customlayers.api import Network  # noqa: E402
from customlayers.errors import BindingError, ModelError  # noqa: E402
from customlayers.graph.onnx.reader import read_onnx  # noqa: E402

RNG = np.random.default_rng(20)
ELEM = {np.dtype(t): helper.np_dtype_to_tensor_dtype(np.dtype(t)) for t in
        (np.float32, np.float64, np.int8, np.uint8, np.int32, np.int64, np.bool_)}


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def _model(path: Path, nodes, feeds: dict, outputs, inits=(), opset=18) -> Path:
    """A model of `nodes`; the outputs' types are what ONNX shape inference gives them."""
    graph = helper.make_graph(
        list(nodes), "g",
        [helper.make_tensor_value_info(n, ELEM[v.dtype], v.shape) for n, v in feeds.items()],
        [], [numpy_helper.from_array(np.asarray(v), n) for n, v in dict(inits).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    inferred = {vi.name: vi for vi in onnx.shape_inference.infer_shapes(model).graph.value_info}
    for name in outputs:
        vi = model.graph.output.add()
        vi.name = name
        vi.type.tensor_type.elem_type = inferred[name].type.tensor_type.elem_type
    onnx.save(model, str(path))
    return path


def _check(tmp_path, engine, nodes, feeds: dict, outputs, inits=(), opset=18):
    """Our outputs equal ONNX Runtime's (exactly for integers, to 1e-6 for floats)."""
    path = _model(tmp_path / "m.onnx", nodes, feeds, outputs, inits, opset)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        outputs, feeds)
    got = Network(read_onnx(path), engine=engine).infer(feeds)
    for name, w in zip(outputs, want):
        g = np.asarray(got[name])
        assert g.shape == w.shape, (name, g.shape, w.shape)
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(g.astype(w.dtype), w, err_msg=name)
    return got


def _data(shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return RNG.integers(0, 2, shape).astype(bool)
    if dtype.kind == "f":
        return RNG.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return RNG.integers(max(info.min, -100), min(info.max, 100), shape).astype(dtype)


# -- gathers ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.uint8, np.int32,
                                   np.int64, np.bool_])
def test_gather_elements_with_negative_indices_every_type(tmp_path, engine, dtype):
    x = _data((3, 4, 5), dtype)
    idx = RNG.integers(-4, 4, (3, 2, 5)).astype(np.int64)
    node = helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1)
    _check(tmp_path, engine, [node], {"x": x, "i": idx}, ["y"])


def test_gather_nd_with_batch_dims(tmp_path, engine):
    x = _data((2, 3, 4, 5), np.float32)
    idx = np.array([[[0, -1], [2, 3]], [[1, 0], [-3, -4]]], np.int64)   # [2, 2, 2]
    node = helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=1)
    _check(tmp_path, engine, [node], {"x": x, "i": idx}, ["y"])


# -- scatters --------------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_scatter_elements_every_reduction_with_duplicates(tmp_path, engine, reduction, dtype):
    x = _data((4, 5), dtype)
    idx = np.array([[1, 1, -1, 0, 3], [1, 2, 2, 0, -4]], np.int64)      # duplicates on axis 0
    upd = _data((2, 5), dtype)
    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=0,
                            reduction=reduction)
    if reduction == "none":    # duplicates with none: ONNX leaves the order open; ORT's last wins
        idx = np.array([[1, 0, -1, 0, 3], [2, 2, 1, 3, -4]], np.int64)
    _check(tmp_path, engine, [node], {"x": x, "i": idx, "u": upd}, ["y"])


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd_every_reduction(tmp_path, engine, reduction):
    x = _data((4, 3, 2), np.float32)
    idx = np.array([[1], [-1], [1]] if reduction != "none" else [[1], [-1], [0]], np.int64)
    upd = _data((3, 3, 2), np.float32)
    node = helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction=reduction)
    _check(tmp_path, engine, [node], {"x": x, "i": idx, "u": upd}, ["y"])


@pytest.mark.parametrize("op", ["ScatterElements", "ScatterND"])
@pytest.mark.parametrize("reduction", ["max", "min"])
def test_scatter_min_max_with_nan_as_onnxruntime(tmp_path, engine, op, reduction):
    # an update replaces an old NaN; a NaN update replaces a number (ONNX Runtime's order)
    x = np.array([[np.nan, 1, 2], [3, np.nan, 0]], np.float32)
    if op == "ScatterElements":
        idx, upd = np.array([[0, 1], [1, 1]], np.int64), np.array([[5, np.nan], [2, 4]],
                                                                    np.float32)
    else:
        idx, upd = np.array([[0, 0], [0, 1], [1, 1]], np.int64), np.array([5, np.nan, 2],
                                                                          np.float32)
    node = helper.make_node(op, ["x", "i", "u"], ["y"], reduction=reduction)
    _check(tmp_path, engine, [node], {"x": x, "i": idx, "u": upd}, ["y"])


@pytest.mark.parametrize("mode,axis", [("linear", -2), ("circular", 2), ("circular", 1)])
def test_tensor_scatter_of_a_kv_cache(tmp_path, engine, mode, axis):
    """Against ONNX's reference evaluator (opset 24; ONNX Runtime may not have the op)."""
    from onnx.reference import ReferenceEvaluator
    cache = _data((2, 3, 6, 4), np.float32)
    shape = list(cache.shape)
    shape[axis] = 3
    update = _data(shape, np.float32)
    where = np.array([1, 4] if mode == "circular" else [0, 3], np.int64)
    node = helper.make_node("TensorScatter", ["c", "u", "w"], ["y"], mode=mode, axis=axis)
    feeds = {"c": cache, "u": update, "w": where}
    path = _model(tmp_path / "ts.onnx", [node], feeds, ["y"], opset=24)
    want = ReferenceEvaluator(str(path)).run(None, feeds)[0]
    got = Network(read_onnx(path), engine=engine).infer(feeds)["y"]
    np.testing.assert_array_equal(got, want)


def test_out_of_range_indices_read_zero_and_skip_their_update(tmp_path, engine):
    """Documented choice (ops/index/_launch.py): never an access outside a buffer."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    idx = np.array([[0, 7, -9]], np.int64)
    nodes = [helper.make_node("GatherElements", ["x", "i"], ["g"], axis=1),
             helper.make_node("ScatterElements", ["x", "i", "u"], ["s"], axis=1)]
    path = _model(tmp_path / "oob.onnx", nodes, {"x": x, "i": idx}, ["g", "s"],
                  {"u": np.full((1, 3), 100, np.float32)})
    got = Network(read_onnx(path), engine=engine).infer({"x": x, "i": idx})
    np.testing.assert_array_equal(got["g"], [[0, 0, 0]])
    np.testing.assert_array_equal(got["s"], [[100, 1, 2], [3, 4, 5]])


# -- selections ------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("last,keepdims,dtype", [(0, 1, np.float32), (1, 0, np.float64),
                                                 (1, 1, np.int8), (0, 0, np.uint8)])
def test_arg_max_min_with_ties(tmp_path, engine, op, last, keepdims, dtype):
    x = RNG.integers(0, 4, (3, 6, 2)).astype(dtype)              # many ties
    node = helper.make_node(op, ["x"], ["y"], axis=-2, keepdims=keepdims,
                            select_last_index=last)
    _check(tmp_path, engine, [node], {"x": x}, ["y"])


@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("k,dtype", [(3, np.float32), (20, np.float32), (4, np.int8),
                                     (24, np.int64)])   # both kernels: k <= 16 and above
def test_top_k_with_k_a_graph_input_and_ties(tmp_path, engine, largest, k, dtype):
    x = RNG.integers(0, 5, (3, 30, 2)).astype(dtype)              # ties: lower index first
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1, largest=largest)
    _check(tmp_path, engine, [node], {"x": x, "k": np.array([k], np.int64)}, ["v", "i"])


@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("k", [3, 5, 20])             # both kernels: k <= 16 and above
def test_top_k_orders_nan_above_every_number(tmp_path, engine, largest, k):
    # ONNX Runtime's order (1.2x on this machine): NaN the largest, NaNs by index (a NaN once
    # made ranks collide and left slots of the output unwritten). The order is written here in
    # numpy, not asked of ONNX Runtime: the ONNX spec leaves NaN's place open, and the ONNX
    # Runtime of the GPU machine puts NaN elsewhere
    x = np.tile(np.array([[np.nan, 1, 2, np.nan, 0]], np.float32), (2, 4))
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1, largest=largest)
    path = _model(tmp_path / "m.onnx", [node], {"x": x, "k": np.array([k], np.int64)},
                  ["v", "i"], (), 18)
    got = Network(read_onnx(path), engine=engine).infer({"x": x, "k": np.array([k], np.int64)})
    nan = np.isnan(x)
    # sort keys: NaN first (largest) or last (smallest), then by value, then by index
    value = np.where(nan, 0, -x if largest else x)
    place = np.where(nan, 0 if largest else 1, 1 if largest else 0)
    index = np.broadcast_to(np.arange(x.shape[1]), x.shape)
    order = np.lexsort((index, value, place), axis=1)[:, :k]
    np.testing.assert_array_equal(got["i"], order)
    np.testing.assert_array_equal(got["v"], np.take_along_axis(x, order, axis=1))


# -- scans, one-hot, ranges, triangles -------------------------------------------------------
@pytest.mark.parametrize("op", ["CumSum", "CumProd"])
@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumulate(tmp_path, engine, op, exclusive, reverse):
    if op == "CumProd" and onnx.defs.onnx_opset_version() < 26:
        pytest.skip("CumProd needs onnx with opset 26")
    x = RNG.integers(1, 4, (3, 5)).astype(np.int64)
    node = helper.make_node(op, ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)
    opset = 26 if op == "CumProd" else 18
    try:
        _check(tmp_path, engine, [node], {"x": x}, ["y"], {"axis": np.array(-1, np.int64)},
               opset=opset)
    except Exception as e:          # ONNX Runtime without the op: compare with numpy
        if "CumProd" not in str(e) and "opset" not in str(e).lower():
            raise
        path = _model(tmp_path / "c.onnx", [node], {"x": x}, ["y"],
                      {"axis": np.array(-1, np.int64)}, opset=opset)
        got = Network(read_onnx(path), engine=engine).infer({"x": x})["y"]
        f = np.cumprod
        src = x[:, ::-1] if reverse else x
        want = f(np.concatenate([np.ones((3, 1), x.dtype), src[:, :-1]], 1)
                 if exclusive else src, axis=1)
        np.testing.assert_array_equal(got, want[:, ::-1] if reverse else want)


def test_one_hot_with_negative_indices_and_values_as_data(tmp_path, engine):
    idx = np.array([[0, -1, 2], [-3, 1, 4]], np.int64)            # 4 is past depth: all off
    values = np.array([-1.5, 2.5], np.float32)
    node = helper.make_node("OneHot", ["i", "depth", "values"], ["y"], axis=1)
    _check(tmp_path, engine, [node], {"i": idx, "values": values}, ["y"],
           {"depth": np.array(4, np.int64)})


def test_range_with_graph_inputs_decides_its_size(tmp_path, engine):
    node = helper.make_node("Range", ["a", "b", "c"], ["y"])
    feeds = {"a": np.array(2.0, np.float32), "b": np.array(9.0, np.float32),
             "c": np.array(1.5, np.float32)}
    _check(tmp_path, engine, [node], feeds, ["y"])


def test_eye_like_off_the_main_diagonal(tmp_path, engine):
    node = helper.make_node("EyeLike", ["x"], ["y"], k=-1, dtype=onnx.TensorProto.INT32)
    _check(tmp_path, engine, [node], {"x": _data((4, 6), np.float32)}, ["y"])


@pytest.mark.parametrize("upper", [0, 1])
def test_trilu_with_k_as_data_keeps_no_nan_from_inf(tmp_path, engine, upper):
    x = _data((2, 4, 5), np.float32)
    x[0, 0, 4] = x[1, 3, 0] = np.inf                 # a mask multiplied in gave 0 * inf = NaN
    node = helper.make_node("Trilu", ["x", "k"], ["y"], upper=upper)
    _check(tmp_path, engine, [node], {"x": x, "k": np.array(1, np.int64)}, ["y"])


def test_cast_like_on_data(tmp_path, engine):
    x = (RNG.standard_normal((3, 4)) * 10).astype(np.float32)
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("CastLike", ["r", "like"], ["y"])]
    _check(tmp_path, engine, nodes, {"x": x}, ["y"], {"like": np.array([1], np.int32)})


def test_reverse_sequence(tmp_path, engine):
    x = _data((4, 3, 2), np.float32)                  # time-major: [T, B, C]
    node = helper.make_node("ReverseSequence", ["x", "lens"], ["y"], time_axis=0,
                            batch_axis=1)
    _check(tmp_path, engine, [node], {"x": x, "lens": np.array([4, 1, 3], np.int64)}, ["y"])


# -- einsum ----------------------------------------------------------------------------------
@pytest.mark.parametrize("equation,shapes", [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("...ii->...i", [(3, 4, 4)]),
    ("ij->ji", [(3, 4)]), ("ij->", [(3, 4)]), ("i,j->ij", [(3,), (4,)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]), ("ii", [(4, 4)]),
    ("bqhd,bkhd->bhqk", [(2, 3, 2, 4), (2, 5, 2, 4)]), ("ij,jk->ki", [(3, 4), (4, 2)]),
    ("ij,j->i", [(3, 4), (4,)]), ("bij,bjk->bk", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk->...ik", [(1, 3, 4), (2, 4, 5)]),    # the batch broadcasts
])
def test_einsum_patterns(tmp_path, engine, equation, shapes):
    feeds = {f"x{k}": _data(s, np.float32) for k, s in enumerate(shapes)}
    node = helper.make_node("Einsum", list(feeds), ["y"], equation=equation)
    _check(tmp_path, engine, [node], feeds, ["y"])


@pytest.mark.parametrize("equation,shapes", [
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]), ("bqhd,bkhd->bhqk", [(2, 3, 2, 4),
                                                                          (2, 5, 2, 4)]),
    ("ij,jk->ik", [(3, 4), (4, 2)]), ("i,j->ij", [(3,), (4,)]),
])
def test_einsum_products_of_f32_run_on_matmul(tmp_path, equation, shapes):
    feeds = {f"x{k}": _data(s, np.float32) for k, s in enumerate(shapes)}
    node = helper.make_node("Einsum", list(feeds), ["y"], equation=equation)
    graph = read_onnx(_model(tmp_path / "e.onnx", [node], feeds, ["y"]))
    types = [n.type for n in graph.nodes.values()]
    assert "MatMul" in types and "Einsum" not in types, types


# -- data-sized outputs: folded when constant ------------------------------------------------
def test_non_zero_unique_and_compress_fold_when_constant(tmp_path, engine):
    c = np.array([[1, 0, 3], [0, 5, 1]], np.float32)
    nodes = [helper.make_node("NonZero", ["c"], ["nz"]),
             helper.make_node("Unique", ["c"], ["u", "first", "inv", "count"], sorted=0),
             helper.make_node("Compress", ["x", "cond"], ["cx"], axis=1),
             helper.make_node("Add", ["x", "x"], ["x2"]),
             helper.make_node("Compress", ["x2", "cond"], ["cx2"])]
    _check(tmp_path, engine, nodes, {"x": _data((2, 3), np.float32)},
           ["nz", "u", "first", "inv", "count", "cx", "cx2"],
           {"c": c, "cond": np.array([True, False, True])})


@pytest.mark.parametrize("axis", [None, 1, -3])
def test_compress_with_the_condition_a_graph_input(tmp_path, engine, axis):
    x = _data((3, 4, 2), np.float32)
    cond = np.array([True, False, True, True][:4 if axis == 1 else 3])
    kwargs = {} if axis is None else {"axis": axis}
    node = helper.make_node("Compress", ["x", "c"], ["y"], **kwargs)
    _check(tmp_path, engine, [node], {"x": x, "c": cond}, ["y"])


# -- index ops as shape arithmetic ----------------------------------------------------------
@pytest.mark.parametrize("batch", [2, 4])
def test_scatter_nd_of_a_shape_folds_for_a_symbolic_batch(tmp_path, engine, batch):
    """A BERT-like export: the target of a Reshape is a ScatterND of Shape(x): folded per input
    shape by the shape-folding pass, not run as a layer whose result Reshape could not take."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("ScatterND", ["s", "where", "dims"], ["t"]),
             helper.make_node("GatherElements", ["t", "pick"], ["t2"]),
             helper.make_node("Reshape", ["x", "t2"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 2, 3])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([[1], [-1]], np.int64), "where"),
         numpy_helper.from_array(np.array([3, 2], np.int64), "dims"),
         numpy_helper.from_array(np.array([0, 2, 1], np.int64), "pick")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    path = tmp_path / "shape.onnx"
    onnx.save(model, str(path))
    x = _data((batch, 2, 3), np.float32)
    got = Network(read_onnx(path), engine=engine).infer({"x": x})["y"]
    np.testing.assert_array_equal(got, x.reshape(batch, 2, 3))


# -- refusals --------------------------------------------------------------------------------
@pytest.mark.parametrize("nodes,feeds,inits,words", [
    ([helper.make_node("NonZero", ["x"], ["y"])], {"x": np.ones((2, 2), np.float32)}, {},
     "node 0 'y' (NonZero): NonZero's output size depends on the values of input 0"),
    ([helper.make_node("Einsum", ["x", "x", "x"], ["y"], equation="i,i,i->i")],
     {"x": np.ones(3, np.float32)}, {}, "Einsum 'i,i,i->i' of 3 operands is not supported"),
    ([helper.make_node("ReduceMax", ["x"], ["m"], keepdims=0),
      helper.make_node("Cast", ["m"], ["k"], to=onnx.TensorProto.INT64),
      helper.make_node("Reshape", ["k", "one"], ["k1"]),
      helper.make_node("TopK", ["x", "k1"], ["v", "y"])],
     {"x": np.ones(3, np.float32)}, {"one": np.array([1], np.int64)},
     "(TopK): the k (input 1, 'k1') must be a constant or a graph input"),
    ([helper.make_node("ReduceMax", ["x"], ["m"], keepdims=0),
      helper.make_node("Range", ["z", "m", "d"], ["y"])],
     {"x": np.ones(3, np.float32)}, {"z": np.float32(0), "d": np.float32(1)},
     "(Range): input 1 ('m') is computed at run time by a layer"),
    ([helper.make_node("Relu", ["x"], ["r"]),
      helper.make_node("Cast", ["r"], ["c"], to=onnx.TensorProto.BOOL),
      helper.make_node("Compress", ["x", "c"], ["y"])],
     {"x": np.ones(3, np.float32)}, {},
     "(Compress): Compress's output size depends on the values of the condition (input 1, "
     "'c')"),
])
def test_what_we_cannot_run_is_refused_naming_the_node(tmp_path, nodes, feeds, inits, words):
    path = _model(tmp_path / "bad.onnx", nodes, feeds, [nodes[-1].output[-1]], inits)
    with pytest.raises(ModelError) as e:
        read_onnx(path)
    assert words in str(e.value)


def test_bad_shapes_are_refused_naming_the_layer(tmp_path, engine):
    node = helper.make_node("GatherElements", ["x", "i"], ["y"], axis=0)
    feeds = {"x": np.ones((2, 3), np.float32), "i": np.zeros((2, 4), np.int64)}
    path = _model(tmp_path / "bad.onnx", [node], feeds, ["y"])
    with pytest.raises(BindingError, match=r"layer 'y' \(GatherElements\): the indices \[2, 4\] "
                                           r"are larger than the data \[2, 3\]"):
        Network(read_onnx(path), engine=engine, input_shapes=None)
