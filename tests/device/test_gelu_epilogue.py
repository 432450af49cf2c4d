"""A Gelu after a MatMul (+ bias) or a convolution runs in the layer's epilogue
(passes/fusion.py, conv_epilogue.cl's FUSED_GELU): every kernel of both ops against float64
references of both approximations, and through a model against ONNX Runtime."""
from __future__ import annotations

import math

import numpy as np
import pytest

from customlayers.jit.launch import CompileContext, DeviceTraits, FusedEpilogue
from customlayers.jit.tensor import TensorDesc
from customlayers.ops import get_op
from launch_runner import kernel_sample, run_launches

CPU = DeviceTraits("CPU", compute_units=2, max_work_group_size=4096, float_vector_width=8)


def gelu(x: np.ndarray, mode: str) -> np.ndarray:
    x = x.astype(np.float64)
    if mode == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def _launch(cl_env, op_type, attrs, inputs, out_shape, ctx):
    op = get_op(op_type)
    a = op.parse_attributes(attrs, "layer")
    descs = [TensorDesc(x.shape) for x in inputs]
    launches = op.launches(a, descs, [TensorDesc(out_shape)], {}, ctx)
    return run_launches(cl_env, launches, inputs, descs, [TensorDesc(out_shape)],
                        shaped_for=ctx)[0]


@pytest.mark.parametrize("mode", ["erf", "tanh"])
@pytest.mark.parametrize("device", [None, CPU], ids=["gpu-kernels", "cpu-kernels"])
def test_matmul_bias_gelu_in_every_kernel(cl_env, mode, device):
    from customlayers.ops.nn.matmul import matmul_variants
    rng = np.random.default_rng(0)
    for m in (1, 9):                        # the matrix-vector kernel and the GEMMs
        x = rng.standard_normal((2, m, 24)).astype(np.float32)
        w = rng.standard_normal((24, 13)).astype(np.float32) * 0.5
        bias = rng.standard_normal(13).astype(np.float32)
        want = gelu(x.astype(np.float64) @ w + bias, mode)
        ep = FusedEpilogue(bias=True, gelu=mode)
        op = get_op("MatMul")
        descs = [TensorDesc(x.shape), TensorDesc(w.shape), TensorDesc(bias.shape)]
        plan = op.plan(op.parse_attributes({}, "mm"), descs, [TensorDesc(want.shape)],
                       CompileContext(device=device, epilogue=ep))
        for variant in kernel_sample(matmul_variants(plan)):
            ctx = CompileContext(device=device, epilogue=ep, variant=variant)
            got = _launch(cl_env, "MatMul", {}, [x, w, bias], want.shape, ctx)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=str(variant))


@pytest.mark.parametrize("device", [None, CPU], ids=["gpu-kernels", "cpu-kernels"])
def test_convolution_bias_gelu(cl_env, device):
    from test_ops_conv import attrs, conv_ref
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 8, 6, 7)).astype(np.float32)
    w = rng.standard_normal((5, 8, 3, 3)).astype(np.float32) * 0.2
    bias = rng.standard_normal((1, 5, 1, 1)).astype(np.float32)
    want = gelu(conv_ref(x, w, (1, 1), (1, 1), (1, 1), (1, 1)) + bias, "erf")
    ctx = CompileContext(device=device, epilogue=FusedEpilogue(bias=True, gelu="erf"))
    got = _launch(cl_env, "Convolution", attrs(pb=(1, 1), pe=(1, 1)), [x, w, bias], want.shape,
                  ctx)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["erf", "tanh"])
@pytest.mark.parametrize("device", [None, CPU], ids=["gpu-kernels", "cpu-kernels"])
@pytest.mark.parametrize("case", ["dense", "depthwise", "grouped", "1x1"])
def test_convolution_gelu_in_every_kernel(cl_env, mode, device, case):
    """Every kernel a convolution has, including those that apply the epilogue to a vector of
    outputs (conv_cpu_depthwise.cl's whole runs of 8): a Gelu there did not build (its
    function takes one float)."""
    from customlayers.ops.nn._conv_variants import conv_variants
    from test_ops_conv import attrs, conv_ref
    rng = np.random.default_rng(2)
    groups, c, o, k = {"dense": (1, 8, 6, 3), "depthwise": (8, 8, 8, 3),
                       "grouped": (2, 8, 6, 3), "1x1": (1, 8, 6, 1)}[case]
    x = rng.standard_normal((1, c, 9, 19)).astype(np.float32)
    w = rng.standard_normal((o, c // groups, k, k)).astype(np.float32) * 0.3
    bias = rng.standard_normal((1, o, 1, 1)).astype(np.float32)
    pad = (k // 2, k // 2)
    want = gelu(conv_ref(x, w, (1, 1), (1, 1), pad, pad, groups=groups) + bias, mode)
    op_type = "Convolution" if groups == 1 else "GroupConvolution"
    wk = w if groups == 1 else w.reshape((groups, o // groups) + w.shape[1:])
    op = get_op(op_type)
    a = op.parse_attributes(attrs(pb=pad, pe=pad), "conv")
    descs = [TensorDesc(t.shape) for t in (x, wk, bias)]
    ep = FusedEpilogue(bias=True, gelu=mode)
    plan = op.plan(a, descs, [TensorDesc(want.shape)], {1: wk},
                   CompileContext(device=device, epilogue=ep))
    for variant in conv_variants(plan):
        ctx = CompileContext(device=device, epilogue=ep, variant=variant)
        launches = op.launches(a, descs, [TensorDesc(want.shape)], {1: wk}, ctx)
        got = run_launches(cl_env, launches, [x, wk, bias], descs, [TensorDesc(want.shape)],
                           shaped_for=ctx)[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=str(variant))
