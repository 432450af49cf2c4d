"""gemm_async.cl: gemm.cl's tiled GEMM as a pipeline of __local copies, GEMM_STAGES k steps
ahead. On NVIDIA sm_80+ the copies are PTX cp.async (the device suite on the GPU machine runs
this file with the device's traits); elsewhere, as here on PoCL, plain float4 moves in the same
order, so the pipeline's tiles, stages and edges are checked on every device. Against float64
numpy: every listed tiling, A and B in both layouts, ragged edges (M, N, K not multiples of the
tile), split-K, two batch dims with a broadcast B, the epilogue (bias, residual, GELU), and a
1x1 convolution's implicit GEMM."""
from __future__ import annotations

import math

import numpy as np
import pytest

from customlayers.jit.launch import CompileContext, FusedEpilogue
from customlayers.jit.tensor import TensorDesc
from customlayers.ops import get_op
from customlayers.ops.nn._variants import ASYNC_TILINGS, GemmVariant
from customlayers.runtime.device.limits import device_traits
from launch_runner import run_launches

PIPELINES = [GemmVariant(tm, tn, rm, rn, split, stages)
             for tm, tn, rm, rn, stages in ASYNC_TILINGS for split in (1, 3)]


@pytest.fixture(scope="module")
def traits(test_device):
    """The test device's traits where it is a GPU (cp.async on NVIDIA sm_80+); None on a CPU
    device, whose own traits would pick its CPU kernels (the pipeline is a GPU tiling)."""
    found = device_traits(test_device)
    return None if found.kind == "CPU" else found


def _run(cl_env, traits, variant, a, b, attrs=None, extra=(), epilogue=None):
    op = get_op("MatMul")
    at = op.parse_attributes(attrs or {}, "mm")
    descs = [TensorDesc(t.shape) for t in (a, b, *extra)]
    out = [TensorDesc(s) for s, _ in op.infer_shapes(at, descs[:2], {})]
    ctx = CompileContext(device=traits, variant=variant, epilogue=epilogue)
    plan = op.plan(at, descs, out, ctx)
    assert variant.applies(plan), variant.name
    launches = op.launches(at, descs, out, {}, ctx)
    ptx = "#define GEMM_ASYNC_PTX 1" in launches[0].source
    assert ptx == bool(traits is not None and traits.async_copy)
    assert len(launches) == (2 if variant.ksplit > 1 else 1)
    return run_launches(cl_env, launches, [a, b, *extra], descs, out, shaped_for=ctx)[0]


@pytest.mark.parametrize("variant", PIPELINES, ids=lambda v: v.name)
@pytest.mark.parametrize("transpose_a,transpose_b", [(False, False), (True, False), (False, True),
                                                     (True, True)], ids=["AB", "AtB", "ABt", "AtBt"])
def test_every_pipeline_matches_float64(cl_env, traits, variant, transpose_a, transpose_b):
    m, n, k = (148, 141, 1100) if transpose_a else (150, 141, 1100)   # A^T: M in float4s
    n = n + 3 if not transpose_b else n                               # B: N in float4s
    rng = np.random.default_rng(11)
    a = rng.standard_normal((k, m) if transpose_a else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if transpose_b else (k, n)).astype(np.float32)
    want = (a.T if transpose_a else a).astype(np.float64) @ (b.T if transpose_b else b)
    got = _run(cl_env, traits, variant, a, b, {"transpose_a": str(transpose_a).lower(),
                                               "transpose_b": str(transpose_b).lower()})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3 * math.sqrt(k / 100),
                               err_msg=variant.name)


@pytest.mark.parametrize("variant", PIPELINES[:2], ids=lambda v: v.name)
def test_batches_and_the_epilogue_in_the_pipeline(cl_env, traits, variant):
    """[2, 3] batches of A against one B (a Linear's weights), then bias, residual and GELU
    where it stores; a K of 44 (less than one split slice: the split takes what K gives)."""
    rng = np.random.default_rng(12)
    a = rng.standard_normal((2, 3, 37, 44)).astype(np.float32)
    b = (rng.standard_normal((44, 68)) * 0.3).astype(np.float32)
    bias = rng.standard_normal(68).astype(np.float32)
    res = rng.standard_normal((2, 3, 37, 68)).astype(np.float32)
    pre = a.astype(np.float64) @ b + bias + res
    from math import erf
    want = pre * 0.5 * (1 + np.vectorize(erf)(pre / math.sqrt(2)))
    ep = FusedEpilogue(bias=True, residual=True, gelu="erf")
    got = _run(cl_env, traits, variant, a, b, extra=(bias, res), epilogue=ep)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=variant.name)


@pytest.mark.parametrize("plane,stride", [((6, 10), (1, 1)), ((7, 7), (1, 1)),
                                          ((11, 13), (2, 3))], ids=["60px", "49px", "strided"])
@pytest.mark.parametrize("variant", PIPELINES[:4], ids=lambda v: v.name)
def test_a_one_by_one_convolution_in_the_pipeline(cl_env, traits, variant, plane, stride):
    """A 1x1 convolution's implicit GEMM (weights x the input as a matrix, three images side
    by side along N) in the pipeline, with bias, residual and ReLU, against float64: planes of
    60 pixels (the input copied in float4s), of 49 (one value at a time, GEMM_VEC_B 0), and a
    stride of (2, 3) over 11x13 planes (a downsampling shortcut: 6x5 outputs, each read from
    its own address)."""
    from test_ops_conv import attrs as conv_attrs, conv_ref
    rng = np.random.default_rng(13)
    x = rng.standard_normal((3, 40) + plane).astype(np.float32)
    w = (rng.standard_normal((70, 40, 1, 1)) * 0.2).astype(np.float32)
    out_plane = tuple(-(-p // s) for p, s in zip(plane, stride))
    bias = rng.standard_normal((1, 70, 1, 1)).astype(np.float32)
    res = rng.standard_normal((3, 70) + out_plane).astype(np.float32)
    want = np.maximum(conv_ref(x, w, stride, (1, 1), (0, 0), (0, 0)) + bias + res, 0)
    assert want.shape[2:] == out_plane
    op = get_op("Convolution")
    at = op.parse_attributes(conv_attrs(strides=stride), "conv")
    descs = [TensorDesc(t.shape) for t in (x, w, bias, res)]
    out = [TensorDesc(want.shape)]
    ctx = CompileContext(device=traits, variant=variant,
                         epilogue=FusedEpilogue(bias=True, residual=True, relu=True))
    assert variant.applies(op.plan(at, descs, out, {1: w}, ctx)), variant.name
    launches = op.launches(at, descs, out, {1: w}, ctx)
    assert ("#define GEMM_ASYNC_PTX 1" in launches[0].source) == \
        bool(traits is not None and traits.async_copy)
    assert ("#define GEMM_VEC_B 1" in launches[0].source) == (plane == (6, 10))
    assert ("#define CONV_1X1_STRIDED 1" in launches[0].source) == (stride != (1, 1))
    got = run_launches(cl_env, launches, [x, w, bias, res], descs, out, shaped_for=ctx)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=variant.name)


@pytest.mark.parametrize("stride", [(1, 1), (2, 2), (1, 2)])
@pytest.mark.parametrize("variant", [GemmVariant(32, 64, 2, 4, 1), PIPELINES[0]],
                         ids=lambda v: v.name)
def test_a_one_by_one_window_with_pads_end_reads_zeros_past_the_input(cl_env, traits, variant,
                                                                      stride):
    """A 1x1 window with pads_end (1, 1): the last output row and column lie in the padding and
    are the bias alone. The plain-matrix forms (CONV_1X1, CONV_1X1_STRIDED) read without
    bounds checks, so such a layer goes through the window's patches (found by a review: the
    strided form read the next row, or past the buffer, for 30% of the outputs), and the
    pipeline does not take it."""
    from test_ops_conv import attrs as conv_attrs, conv_ref
    rng = np.random.default_rng(15)
    x = rng.standard_normal((2, 8, 10, 10)).astype(np.float32)
    w = rng.standard_normal((16, 8, 1, 1)).astype(np.float32)
    bias = rng.standard_normal((1, 16, 1, 1)).astype(np.float32)
    want = conv_ref(x, w, stride, (1, 1), (0, 0), (1, 1)) + bias
    op = get_op("Convolution")
    at = op.parse_attributes(conv_attrs(strides=stride, pe=(1, 1)), "conv")
    descs = [TensorDesc(t.shape) for t in (x, w, bias)]
    out = [TensorDesc(want.shape)]
    ctx = CompileContext(device=traits, variant=variant, epilogue=FusedEpilogue(bias=True))
    plan = op.plan(at, descs, out, {1: w}, ctx)
    assert not plan.unpadded_point and not plan.one_by_one
    assert variant.applies(plan) == (variant.stages == 0)
    if variant.stages:
        return
    launches = op.launches(at, descs, out, {1: w}, ctx)
    assert "#define CONV_1X1 1" not in launches[0].source
    assert "#define CONV_1X1_STRIDED 1" not in launches[0].source
    got = run_launches(cl_env, launches, [x, w, bias], descs, out, shaped_for=ctx)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=str(stride))


@pytest.mark.parametrize("variant", [GemmVariant(64, 64, 8, 8, 1), GemmVariant(32, 64, 4, 8, 3)],
                         ids=lambda v: v.name)
def test_a_cpu_device_builds_the_tiled_gemm_rolled_with_the_same_bits(cl_env, traits, variant):
    """On a CPU device gemm.cl's loops are built rolled (GEMM_ROLLED: PoCL compiles a variant in
    a third of the time); unrolling changes no arithmetic, so the bits are those of the build
    for a GPU's traits (on NVIDIA, unrolled; on PoCL both rolled by the target's macros)."""
    from customlayers.jit.launch import DeviceTraits
    cpu = DeviceTraits("CPU", compute_units=2, max_work_group_size=4096)
    rng = np.random.default_rng(7)
    a = rng.standard_normal((70, 96)).astype(np.float32)
    b = rng.standard_normal((96, 130)).astype(np.float32)
    op = get_op("MatMul")
    at = op.parse_attributes({}, "mm")
    descs = [TensorDesc(a.shape), TensorDesc(b.shape)]
    out = [TensorDesc((70, 130))]
    results = []
    for device in (cpu, traits):
        ctx = CompileContext(device=device, variant=variant)
        launches = op.launches(at, descs, out, {}, ctx)
        assert ("#define GEMM_ROLLED 1" in launches[0].source) == (device is cpu)
        results.append(run_launches(cl_env, launches, [a, b], descs, out)[0])
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_allclose(results[0], a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
