"""Issue 20: the reductions and normalizations ONNX models use that we lacked: ReduceProd,
Hardmax, LpNormalization, LpPool, GroupNormalization (opset 18 per group, 21 per channel) and
MeanVarianceNormalization, on small onnx.helper models against ONNX Runtime or a float64 numpy
reference; what they do not take is refused at load with a ModelError naming the node."""
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

RNG = np.random.default_rng(21)
ELEM = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE}


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def _model(path: Path, op: str, x: np.ndarray, opset: int, inits=None, extra_inputs=(),
           **attrs) -> Path:
    inits = inits or {}
    node = helper.make_node(op, ["x", *extra_inputs, *inits], ["y"], name="the_node", **attrs)
    elem = ELEM[x.dtype.type]
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", elem, x.shape)],
                              [helper.make_tensor_value_info("y", elem, None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _ours(path: Path, engine, x):
    return Network(read_onnx(path), engine=engine).infer({"x": x})["y"]


def _theirs(path: Path, x):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]


# -- ReduceProd -------------------------------------------------------------------------------
@pytest.mark.parametrize("opset,axes,keepdims", [(13, [1], 1), (13, [-1, 0], 0), (18, [2], 0),
                                                 (18, None, 1)])
def test_reduce_prod_matches_onnx_runtime(tmp_path, engine, opset, axes, keepdims):
    x = RNG.uniform(0.5, 1.5, (3, 4, 5)).astype(np.float32)
    inits, attrs = {}, {"keepdims": keepdims}
    if axes is not None and opset >= 18:
        inits["axes"] = np.array(axes, np.int64)
    elif axes is not None:
        attrs["axes"] = axes
    path = _model(tmp_path / "prod.onnx", "ReduceProd", x, opset, inits, **attrs)
    np.testing.assert_allclose(_ours(path, engine, x), _theirs(path, x), rtol=1e-5)


def test_reduce_prod_noop_with_empty_axes_passes_the_input_through(tmp_path, engine):
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    path = _model(tmp_path / "prod.onnx", "ReduceProd", x, 18, noop_with_empty_axes=1)
    np.testing.assert_array_equal(_ours(path, engine, x), x)


# -- Hardmax ----------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_hardmax_first_largest_wins(tmp_path, engine, axis):
    x = RNG.integers(0, 3, (3, 4, 5)).astype(np.float32)     # many ties
    path = _model(tmp_path / "hardmax.onnx", "Hardmax", x, 13, axis=axis)
    want = np.zeros_like(x)
    np.put_along_axis(want, np.expand_dims(x.argmax(axis=axis), axis), 1.0, axis=axis)
    np.testing.assert_array_equal(_ours(path, engine, x), want)


def test_hardmax_before_opset_13_flattens_at_the_axis(tmp_path, engine):
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    path = _model(tmp_path / "hardmax.onnx", "Hardmax", x, 11, axis=1)
    np.testing.assert_array_equal(_ours(path, engine, x), _theirs(path, x))


def test_hardmax_f64(tmp_path, engine):
    x = RNG.standard_normal((4, 6))
    x[1, 2] = x[1, 4] = 10.0 + 1e-12                       # equal in float, not in double
    x[1, 4] += 1e-11
    path = _model(tmp_path / "hardmax.onnx", "Hardmax", x, 13)
    got = _ours(path, engine, x)
    assert got.dtype == np.float64 and got[1, 4] == 1.0 and got[1].sum() == 1.0


# -- LpNormalization --------------------------------------------------------------------------
@pytest.mark.parametrize("p,axis,shape", [(2, -1, (2, 3, 4)), (1, 1, (2, 3, 4)),
                                          (2, 0, (5, 2)), (1, 2, (2, 2, 3, 2, 2))])
def test_lp_normalization_matches_onnx_runtime(tmp_path, engine, p, axis, shape):
    x = RNG.standard_normal(shape).astype(np.float32)
    path = _model(tmp_path / "lp.onnx", "LpNormalization", x, 13, p=p, axis=axis)
    np.testing.assert_allclose(_ours(path, engine, x), _theirs(path, x), rtol=1e-5, atol=1e-6)


def test_lp_normalization_f64_and_a_zero_row(tmp_path, engine):
    x = RNG.standard_normal((3, 4))
    x[1] = 0.0
    path = _model(tmp_path / "lp.onnx", "LpNormalization", x, 22, p=2, axis=1)
    want = x / np.where(x[:, :1] == 0, 1, np.linalg.norm(x, axis=1, keepdims=True))
    np.testing.assert_allclose(_ours(path, engine, x), want, rtol=1e-14)


# -- LpPool -----------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,attrs", [
    ((1, 2, 9), dict(kernel_shape=[3], p=3, strides=[2])),
    ((2, 3, 8, 7), dict(kernel_shape=[3, 2], p=2, pads=[1, 0, 1, 1])),
    ((1, 2, 7, 7), dict(kernel_shape=[2, 2], p=1, strides=[2, 2], auto_pad="SAME_UPPER")),
    ((1, 1, 9, 9), dict(kernel_shape=[2, 3], p=2, dilations=[2, 2], strides=[1, 2])),
    ((1, 2, 8, 8), dict(kernel_shape=[3, 3], p=2, strides=[2, 2], ceil_mode=1)),
    ((1, 2, 5, 6, 4), dict(kernel_shape=[2, 2, 2], p=3)),
])
def test_lp_pool_matches_onnx_runtime(tmp_path, engine, shape, attrs):
    x = RNG.standard_normal(shape).astype(np.float32)
    path = _model(tmp_path / "lppool.onnx", "LpPool", x, 18, **attrs)
    want = _theirs(path, x)
    got = _ours(path, engine, x)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_lp_pool_f64(tmp_path, engine):
    x = RNG.standard_normal((1, 2, 6, 6))
    path = _model(tmp_path / "lppool.onnx", "LpPool", x, 18, kernel_shape=[2, 2], p=2,
                  strides=[2, 2])
    windows = x.reshape(1, 2, 3, 2, 3, 2)
    want = np.sqrt((windows ** 2).sum(axis=(3, 5)))
    np.testing.assert_allclose(_ours(path, engine, x), want, rtol=1e-14)


# -- GroupNormalization -----------------------------------------------------------------------
def _group_norm(x, groups, scale, bias, eps, per_channel):
    n, c = x.shape[:2]
    g = x.astype(np.float64).reshape(n, groups, -1)
    g = (g - g.mean(axis=2, keepdims=True)) / np.sqrt(g.var(axis=2, keepdims=True) + eps)
    if not per_channel:
        return (g * scale[:, None] + bias[:, None]).reshape(x.shape)
    view = (c,) + (1,) * (x.ndim - 2)
    return g.reshape(x.shape) * scale.reshape(view) + bias.reshape(view)


@pytest.mark.parametrize("opset,shape,groups", [(21, (2, 6, 4, 3), 3), (21, (3, 4, 5), 4),
                                                (18, (2, 6, 4, 3), 2)])
def test_group_normalization_matches_numpy(tmp_path, engine, opset, shape, groups):
    x = RNG.standard_normal(shape).astype(np.float32) * 2 + 1
    k = shape[1] if opset >= 21 else groups
    scale = RNG.standard_normal(k).astype(np.float32)
    bias = RNG.standard_normal(k).astype(np.float32)
    path = _model(tmp_path / "gn.onnx", "GroupNormalization", x, opset,
                  {"scale": scale, "bias": bias}, num_groups=groups, epsilon=1e-3)
    want = _group_norm(x, groups, scale, bias, 1e-3, opset >= 21)
    np.testing.assert_allclose(_ours(path, engine, x), want, rtol=1e-4, atol=1e-5)


def test_group_normalization_matches_onnx_runtime(tmp_path, engine):
    x = RNG.standard_normal((2, 4, 3, 3)).astype(np.float32)
    scale, bias = np.array([1, 2, 3, 4], np.float32), np.array([0, 1, 0, -1], np.float32)
    path = _model(tmp_path / "gn.onnx", "GroupNormalization", x, 21,
                  {"scale": scale, "bias": bias}, num_groups=2)
    np.testing.assert_allclose(_ours(path, engine, x), _theirs(path, x), rtol=1e-4, atol=1e-5)


# -- MeanVarianceNormalization ----------------------------------------------------------------
@pytest.mark.parametrize("axes", [None, [1], [0, 2, 3], [2, 3]])
def test_mean_variance_normalization_matches_onnx_runtime(tmp_path, engine, axes):
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32) * 3 + 2
    attrs = {} if axes is None else {"axes": axes}
    path = _model(tmp_path / "mvn.onnx", "MeanVarianceNormalization", x, 13, **attrs)
    np.testing.assert_allclose(_ours(path, engine, x), _theirs(path, x), rtol=1e-4, atol=1e-5)


# -- refusals ---------------------------------------------------------------------------------
@pytest.mark.parametrize("op,opset,inits,attrs,what", [
    ("LpNormalization", 13, {}, dict(p=3), r"p=3 is not 1 or 2"),
    ("LpPool", 18, {}, dict(kernel_shape=[2, 2], p=0), r"p=0 must be 1 or more"),
    ("GroupNormalization", 21, {"scale": np.ones(4, np.float32), "bias": np.ones(4, np.float32)},
     dict(num_groups=3), r"num_groups=3 does not divide the 4 channels"),
    ("GroupNormalization", 21, {"scale": np.ones(2, np.float32), "bias": np.ones(4, np.float32)},
     dict(num_groups=2), r"input 1 \(scale\) has shape \[2\]; expected \[4\] \(one per channel"),
    ("GroupNormalization", 18, {"scale": np.ones(4, np.float32), "bias": np.ones(2, np.float32)},
     dict(num_groups=2), r"input 1 \(scale\) has shape \[4\]; expected \[2\] \(one per group"),
])
def test_unsupported_forms_are_refused_naming_the_node(tmp_path, op, opset, inits, attrs, what):
    x = np.zeros((1, 4, 3, 3), np.float32)
    path = _model(tmp_path / "bad.onnx", op, x, opset, inits, **attrs)
    with pytest.raises(ModelError, match=r"'the_node' \(" + op + r"\).*" + what):
        read_onnx(path)


def _nodes_model(path: Path, x: np.ndarray, nodes, outputs, opset: int = 18) -> Path:
    elem = ELEM[x.dtype.type]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", elem, x.shape)],
                              [helper.make_tensor_value_info(o, elem, None) for o in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_p_shares_one_program(tmp_path, test_device, dtype):
    """p is a kernel argument: LpPool of p 1, 2, 3 and 4 (and of two shapes) is one program,
    LpNormalization of p 1 and 2 another (a fresh program cache misses twice), each p right:
    against ONNX Runtime in float32 and a float64 numpy reference in float64."""
    from customlayers.runtime.device.cache import ProgramCache
    from customlayers.runtime.device.device import Engine
    x = RNG.standard_normal((1, 2, 6, 6)).astype(dtype)
    pools = [helper.make_node("LpPool", ["x"], [f"pool{p}"], kernel_shape=[2, 2], p=p,
                              strides=[2, 2] if p < 4 else [1, 1]) for p in (1, 2, 3, 4)]
    norms = [helper.make_node("LpNormalization", ["x"], [f"norm{p}"], p=p, axis=1)
             for p in (1, 2)]
    outputs = [n.output[0] for n in pools + norms]
    path = _nodes_model(tmp_path / "lp.onnx", x, pools + norms, outputs)
    engine = Engine(test_device, cache=ProgramCache(tmp_path / "cache"))
    got = Network(read_onnx(path), engine=engine, tuning="off").infer({"x": x})
    assert engine.cache.misses == 2
    x64 = x.astype(np.float64)
    for p in (1, 2, 3, 4):
        step = 2 if p < 4 else 1
        windows = np.lib.stride_tricks.sliding_window_view(np.abs(x64), (2, 2), axis=(2, 3))
        want = ((windows[:, :, ::step, ::step] ** p).sum(axis=(4, 5))) ** (1 / p)
        np.testing.assert_allclose(got[f"pool{p}"], want, rtol=1e-12 if dtype == np.float64
                                   else 1e-5, err_msg=f"LpPool p={p}")
    for p in (1, 2):
        want = x64 / np.linalg.norm(x64, ord=p, axis=1, keepdims=True)
        np.testing.assert_allclose(got[f"norm{p}"], want, rtol=1e-12 if dtype == np.float64
                                   else 1e-5, err_msg=f"LpNormalization p={p}")
    if dtype == np.float32:
        theirs = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
            None, {"x": x})
        for name, want in zip(outputs, theirs):
            np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-6, err_msg=name)
