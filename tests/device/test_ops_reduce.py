"""ReduceMean / ReduceSum / ReduceMax built-ins on a real device against numpy."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.errors import BindingError
from customlayers.jit.tensor import TensorDesc
from customlayers.ops import get_op
from launch_runner import run_launches


def run_reduce(cl_env, op_type, x, axes, keep_dims):
    op = get_op(op_type)
    attrs = op.parse_attributes({"keep_dims": str(keep_dims).lower()}, "red")
    consts = {1: np.array(axes, np.int64)}
    descs = [TensorDesc(x.shape), TensorDesc((max(len(axes), 1),), "i64")]
    out_descs = [TensorDesc(s, d) for s, d in op.infer_shapes(attrs, descs, consts)]
    launches = op.launches(attrs, descs, out_descs, consts)
    arrays = [x, consts[1] if axes else np.zeros(1, np.int64)]
    return run_launches(cl_env, launches, arrays, descs, out_descs)[0]


NUMPY = {"ReduceMean": np.mean, "ReduceSum": np.sum, "ReduceMax": np.max}


@pytest.mark.parametrize("op_type", sorted(NUMPY))
@pytest.mark.parametrize("shape,axes,keep", [
    ((2, 16, 7, 7), [2, 3], True),        # global average pooling, as in the models
    ((2, 16, 7, 7), [2, 3], False),
    ((3, 5, 4), [0, 2], False),
    ((3, 5, 4), [-2], True),
    ((2, 3, 4, 5), [0, 1, 2, 3], False),  # everything -> a rank-0 scalar
    ((6, 5), [1], False),
])
def test_reduce_matches_numpy(cl_env, op_type, shape, axes, keep):
    x = np.random.default_rng(19).standard_normal(shape).astype(np.float32)
    out = run_reduce(cl_env, op_type, x, axes, keep)
    ref = NUMPY[op_type](x.astype(np.float64), axis=tuple(axes), keepdims=keep)
    assert out.shape == ref.shape
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_reduce_all_keep_dims(cl_env):
    x = np.random.default_rng(20).standard_normal((2, 3, 4, 5)).astype(np.float32)
    out = run_reduce(cl_env, "ReduceSum", x, [0, 1, 2, 3], True)
    np.testing.assert_allclose(out, x.sum(keepdims=True), rtol=1e-5)


def test_matches_openvino_cpu(cl_env):
    ov = pytest.importorskip("openvino")
    ops = pytest.importorskip("openvino.opset13")
    x = np.random.default_rng(21).standard_normal((1, 24, 7, 7)).astype(np.float32)
    p = ops.parameter(x.shape, np.float32)
    node = ops.reduce_mean(p, ops.constant(np.array([2, 3], np.int64)), True)
    compiled = ov.Core().compile_model(ov.Model([node.output(0)], [p]), "CPU",
                                       {"INFERENCE_PRECISION_HINT": "f32"})
    out = run_reduce(cl_env, "ReduceMean", x, [2, 3], True)
    np.testing.assert_allclose(out, compiled([x])[compiled.output(0)], rtol=1e-5, atol=1e-6)


def test_errors_name_the_layer():
    op = get_op("ReduceMean")
    attrs = op.parse_attributes({"keep_dims": "true"}, "gap")
    with pytest.raises(BindingError, match="layer 'gap' \\(ReduceMean\\): axis -5 is out of"):
        op.infer_shapes(attrs, [TensorDesc((1, 2, 3, 4))], {1: np.array([-5])})
    with pytest.raises(BindingError, match="'keep_dims'='yes' is not a valid bool"):
        op.parse_attributes({"keep_dims": "yes"}, "gap")
