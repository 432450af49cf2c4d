"""LRN built-in on a real device against a numpy reference and OpenVINO CPU."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from customlayers.errors import BindingError
from customlayers.jit.launch import DEFAULT_CONTEXT, CompileContext, DeviceTraits
from customlayers.jit.tensor import TensorDesc
from customlayers.ops import get_op
from launch_runner import run_launches


CPU = CompileContext(DeviceTraits("CPU", compute_units=2, max_work_group_size=4096))


@pytest.fixture(params=[DEFAULT_CONTEXT, CPU], ids=["any", "cpu"])
def ctx(request):
    """Every case runs lrn and, with a CPU DeviceTraits, lrn_cpu where it applies."""
    return request.param


def run_lrn(cl_env, raw, x, axes, ctx=DEFAULT_CONTEXT):
    op = get_op("LRN")
    attrs = op.parse_attributes(raw, "norm1")
    consts = {1: np.array(axes, np.int64)}
    descs = [TensorDesc(x.shape), TensorDesc((len(axes),), "i64")]
    out_descs = [TensorDesc(s, d) for s, d in op.infer_shapes(attrs, descs, consts)]
    launches = op.launches(attrs, descs, out_descs, consts, ctx)
    return run_launches(cl_env, launches, [x, consts[1]], descs, out_descs)[0]


def lrn_ref(x, axes, alpha, beta, bias, size):
    """Per element: sum of squares over [i-h, i+h] along each axis in `axes`, h=(size-1)//2."""
    x64 = x.astype(np.float64)
    h = (size - 1) // 2
    axes = [a % x.ndim for a in axes]
    sq = np.zeros_like(x64)
    for idx in itertools.product(*[range(n) for n in x.shape]):
        sl = tuple(slice(max(i - h, 0), i + h + 1) if a in axes else slice(i, i + 1)
                   for a, i in enumerate(idx))
        sq[idx] = (x64[sl] ** 2).sum()
    return x64 / (bias + alpha / size ** len(axes) * sq) ** beta


def raw(alpha, beta, bias, size):
    return {"alpha": repr(alpha), "beta": repr(beta), "bias": repr(bias), "size": str(size)}


@pytest.mark.parametrize("shape,axes,size", [
    ((1, 9, 4, 5), [1], 5),          # across channels, as in AlexNet / GoogLeNet
    ((2, 7, 3, 3), [1], 4),          # even size: window of 3
    ((1, 3, 6, 7), [2, 3], 3),       # spatial
    ((2, 5, 6), [-1], 3),            # rank 3, negative axis
    ((3, 8), [1], 5),                # rank 2
    ((1, 6, 3, 21), [1], 5),         # CPU: two float8 runs, a last one moved back over 3
    ((1, 6, 2, 16), [1], 5),         # CPU: two whole float8 runs
    ((1, 5, 2, 8), [1], 3),          # CPU: one
    ((1, 5, 2, 9), [1], 3),          # CPU: a run moved back over 7 of the first's
    ((1, 5, 2, 15), [1], 5),
])
@pytest.mark.parametrize("beta", [0.75, 0.6])   # 0.75: the CPU kernel's rsqrt form
def test_lrn_matches_reference(cl_env, ctx, shape, axes, size, beta):
    x = np.random.default_rng(15).standard_normal(shape).astype(np.float32)
    out = run_lrn(cl_env, raw(0.3, beta, 2.0, size), x, axes, ctx)
    np.testing.assert_allclose(out, lrn_ref(x, axes, 0.3, beta, 2.0, size), rtol=1e-5,
                               atol=1e-6)


def test_alpha_keeps_full_precision(cl_env, ctx):
    # the models write alpha="9.9999997473787516e-05"; rounding it to 6 decimals would be wrong
    x = np.full((1, 5, 1, 1), 30.0, np.float32)
    out = run_lrn(cl_env, raw(9.9999997473787516e-05, 0.75, 1.0, 5), x, [1], ctx)
    np.testing.assert_allclose(out, lrn_ref(x, [1], 9.9999997473787516e-05, 0.75, 1.0, 5),
                               rtol=1e-6)


@pytest.mark.parametrize("size", [11, 2**63 - 1])
def test_a_window_wider_than_its_axis_covers_the_axis(cl_env, ctx, size):
    """The model campaign's one KernelBuildError in 10,000: a size of 2**63 - 1 made the
    window's bounds longs the kernel could not build; the sum is that of the whole axis, and
    alpha is still divided by the size given."""
    x = np.random.default_rng(17).standard_normal((1, 4, 3, 5)).astype(np.float32)
    out = run_lrn(cl_env, raw(0.3, 0.75, 2.0, size), x, [1], ctx)
    np.testing.assert_allclose(out, lrn_ref(x, [1], 0.3, 0.75, 2.0, size), rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("axes,size", [([1], 5), ([1], 4), ([2, 3], 3)])
def test_matches_openvino_cpu(cl_env, axes, size):
    ov = pytest.importorskip("openvino")
    ops = pytest.importorskip("openvino.opset13")
    x = np.random.default_rng(16).random((1, 7, 5, 4)).astype(np.float32)
    p = ops.parameter(x.shape, np.float32)
    node = ops.lrn(p, ops.constant(np.array(axes, np.int64)), 0.5, 0.75, 2.0, size)
    compiled = ov.Core().compile_model(ov.Model([node.output(0)], [p]), "CPU",
                                       {"INFERENCE_PRECISION_HINT": "f32"})
    ref = compiled([x])[compiled.output(0)]
    np.testing.assert_allclose(run_lrn(cl_env, raw(0.5, 0.75, 2.0, size), x, axes), ref,
                               rtol=1e-5, atol=1e-6)


def test_errors_name_the_layer():
    op = get_op("LRN")
    with pytest.raises(BindingError, match="layer 'n1' \\(LRN\\): attribute 'beta' is required"):
        op.parse_attributes({"alpha": "1", "bias": "1", "size": "3"}, "n1")
    a = op.parse_attributes(raw(1.0, 0.5, 1.0, 3), "n1")
    with pytest.raises(BindingError, match="layer 'n1' \\(LRN\\): axis 4 is out of range"):
        op.infer_shapes(a, [TensorDesc((1, 2, 3, 3))], {1: np.array([4])})
    with pytest.raises(BindingError, match="input 1 \\(axes\\) must be a constant"):
        op.infer_shapes(a, [TensorDesc((1, 2, 3, 3))], {})


@pytest.mark.parametrize("length", range(1, 25))
def test_a_row_of_any_length_gives_the_columns_of_a_longer_one(cl_env, length):
    """lrn_cpu's last float8 run of a row moves back over outputs already stored: every
    output still depends on its own column only, so a row of any length gives, bit for bit,
    the first columns of the same data in a row of 32."""
    x = np.random.default_rng(length).standard_normal((1, 7, 3, 32)).astype(np.float32)
    cpu = CompileContext(DeviceTraits("CPU", compute_units=2, max_work_group_size=4096))
    r = raw(0.3, 0.75, 2.0, 5)
    short = run_lrn(cl_env, r, np.ascontiguousarray(x[..., :length]), [1], cpu)
    whole = run_lrn(cl_env, r, x, [1], cpu)
    np.testing.assert_array_equal(short, whole[..., :length])
