"""The CPU-shaped convolution kernel (chosen when the network's device is a CPU): every case of
the GEMM kernel's tests, with a fused epilogue too, against the numpy reference."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.jit.tensor import TensorDesc
from customlayers.ops import get_op
from customlayers.jit.launch import CompileContext, DeviceTraits, FusedEpilogue
from launch_runner import run_launches
from test_ops_conv import CASES, attrs, conv_ref

CPU = DeviceTraits("CPU", compute_units=2, max_work_group_size=4096)


@pytest.mark.parametrize("epilogue", [False, True])
@pytest.mark.parametrize("case", CASES, ids=[str(c[1]) for c in CASES])
def test_cpu_kernel_matches_reference(cl_env, case, epilogue):
    xs, ws, strides, dilations, pb, pe = case
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    op = get_op("Convolution")
    a = op.parse_attributes(attrs(strides, dilations, pb, pe), "conv")
    ctx = CompileContext(CPU, FusedEpilogue(bias=True, relu=True) if epilogue else None)
    arrays = [x, w]
    if epilogue:
        arrays.append(rng.standard_normal(ws[0]).astype(np.float32))
    descs = [TensorDesc(v.shape) for v in arrays]
    (shape, dtype), = op.infer_shapes(a, descs[:2], {})
    out = [TensorDesc(shape, dtype)]
    launches = op.launches(a, descs, out, {}, ctx)
    assert [l.entry for l in launches] == ["conv_cpu"]
    got = run_launches(cl_env, launches, arrays, descs, out)[0]
    want = conv_ref(x, w, strides, dilations, pb, pe)
    if epilogue:
        want = np.maximum(want + arrays[2].reshape(1, -1, 1, 1), 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_grouped_cpu_kernel(cl_env):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 12, 9, 7)).astype(np.float32)
    w = rng.standard_normal((3, 5, 4, 3, 3)).astype(np.float32)     # G=3, OG=5, CG=4
    op = get_op("GroupConvolution")
    a = op.parse_attributes(attrs((2, 1), (1, 1), (1, 1), (1, 1)), "gconv")
    descs = [TensorDesc(x.shape), TensorDesc(w.shape)]
    (shape, dtype), = op.infer_shapes(a, descs, {})
    out = [TensorDesc(shape, dtype)]
    got = run_launches(cl_env, op.launches(a, descs, out, {}, CompileContext(CPU)), [x, w], descs,
                       out)[0]
    want = conv_ref(x, w.reshape(15, 4, 3, 3), (2, 1), (1, 1), (1, 1), (1, 1), groups=3)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


DEPTHWISE_CASES = [
    # (x shape, groups, OG per group, kernel, strides, dilations, pads_begin, pads_end)
    ((1, 6, 28, 28), 6, 1, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),       # ShuffleNet's shape
    ((2, 5, 13, 11), 5, 1, (3, 3), (2, 2), (1, 1), (1, 1), (1, 1)),       # stride 2, odd sizes
    ((1, 4, 17, 19), 4, 2, (5, 3), (3, 2), (2, 1), (3, 0), (1, 2)),       # multiplier 2, all odd
    ((1, 3, 7, 7), 3, 1, (3, 3), (1, 1), (2, 2), (0, 2), (2, 0)),         # dilation, lopsided pads
    ((1, 2, 4, 3000), 2, 1, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),      # rows too wide to stage
    ((1, 1, 9, 9), 1, 4, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),         # plain conv, 1 input
]


@pytest.mark.parametrize("fused", ["none", "bias_relu", "residual"])
@pytest.mark.parametrize("case", DEPTHWISE_CASES, ids=[str(c[0]) for c in DEPTHWISE_CASES])
def test_depthwise_cpu_kernel(cl_env, case, fused):
    """One input channel per group runs conv_cpu_depthwise.cl (staged rows, float8 runs), with
    every epilogue it can carry; rows too wide for its private block fall back to conv_cpu."""
    xs, groups, og, k, strides, dilations, pb, pe = case
    rng = np.random.default_rng(3)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal((groups, og, 1) + k).astype(np.float32)
    op = get_op("GroupConvolution")
    a = op.parse_attributes(attrs(strides, dilations, pb, pe), "dw")
    descs = [TensorDesc(x.shape), TensorDesc(w.shape)]
    (shape, dtype), = op.infer_shapes(a, descs, {})
    want = conv_ref(x, w.reshape(groups * og, 1, *k), strides, dilations, pb, pe, groups=groups)
    arrays = [x, w]
    epilogue = None
    if fused != "none":
        bias = rng.standard_normal(groups * og).astype(np.float32)
        arrays.append(bias)
        want = want + bias.reshape(1, -1, 1, 1)
        if fused == "residual":
            res = rng.standard_normal(shape).astype(np.float32)
            arrays.append(res)
            want = want + res
            epilogue = FusedEpilogue(bias=True, residual=True)
        else:
            epilogue = FusedEpilogue(bias=True, relu=True)
        want = np.maximum(want, 0) if fused == "bias_relu" else want
    descs = [TensorDesc(v.shape) for v in arrays]
    out = [TensorDesc(shape, dtype)]
    launches = op.launches(a, descs, out, {}, CompileContext(CPU, epilogue))
    wide = xs[3] > 2000
    assert [l.entry for l in launches] == ["conv_cpu" if wide else "conv_cpu_depthwise"]
    got = run_launches(cl_env, launches, arrays, descs, out)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
