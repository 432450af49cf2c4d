"""gemm.cl's float4 global reads (GEMM_VEC_A, GEMM_VEC_B), which the GPU front ends turn on
where every group of four along an operand's contiguous index is aligned and whole: every
tiling of MatMul (each transpose, a folded view's offset) and the convolutions' implicit GEMM
(weights always, a 1x1 window's input where planes hold a multiple of 4 pixels) against float64
numpy, with the flag checked on and off in the program text."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from customlayers.jit.launch import CompileContext
from customlayers.jit.tensor import TensorDesc
from customlayers.ops import get_op
from customlayers.ops.nn._variants import GemmVariant, gemm_variants
from customlayers.ops.view_steps import OperandViews, dense_view
from launch_runner import kernel_sample, run_launches
from test_ops_conv import attrs as conv_attrs, conv_ref


def _flags(launches) -> tuple[int, int]:
    src = launches[0].source
    return (int("#define GEMM_VEC_A 1" in src), int("#define GEMM_VEC_B 1" in src))


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("k,want_vec", [(40, 1), (30, 0)])
def test_matmul_tilings_read_float4_where_aligned(cl_env, ta, tb, k, want_vec):
    m, n = 36, 28
    rng = np.random.default_rng(k)
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    want = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b)
    op = get_op("MatMul")
    raw = {"transpose_a": str(ta).lower(), "transpose_b": str(tb).lower()}
    at = op.parse_attributes(raw, "mm")
    descs, out = [TensorDesc(a.shape), TensorDesc(b.shape)], [TensorDesc(want.shape)]
    for variant in kernel_sample(gemm_variants(m, n, k, 1, 8), 4):
        ctx = CompileContext(variant=variant)
        launches = op.launches(at, descs, out, {}, ctx)
        # A's contiguous extent is K (M when transposed: 36), B's N (K when transposed)
        assert _flags(launches) == ((1 if ta else want_vec), (want_vec if tb else 1))
        got = run_launches(cl_env, launches, [a, b], descs, out, shaped_for=ctx)[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4, err_msg=variant.name)


def test_matmul_reads_a_view_at_an_aligned_offset_in_float4(cl_env):
    """A is row 1 of a [3, 16, 24] tensor's first axis (offset 384), B a transposed view."""
    rng = np.random.default_rng(5)
    root = rng.standard_normal((3, 16, 24)).astype(np.float32)
    b_root = rng.standard_normal((12, 24)).astype(np.float32)
    va = dense_view(root.shape).select(0, 1)
    vb = dense_view(b_root.shape).transpose((1, 0))
    fact = OperandViews((va, vb), (root.shape, b_root.shape))
    op = get_op("MatMul")
    at = op.parse_attributes({}, "mm")
    descs, out = [TensorDesc(root.shape), TensorDesc(b_root.shape)], [TensorDesc((16, 12))]
    want = root[1].astype(np.float64) @ b_root.T
    for variant in kernel_sample(gemm_variants(16, 12, 24, 1, 8)):
        ctx = CompileContext(variant=variant, facts=(fact,))
        launches = op.launches(at, descs, out, {}, ctx)
        assert _flags(launches) == (1, 1)
        got = run_launches(cl_env, launches, [root, b_root], descs, out, shaped_for=ctx)[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4, err_msg=variant.name)


@pytest.mark.parametrize("x_shape,w_shape,pads,flags", [
    ((2, 8, 6, 6), (12, 8, 1, 1), (0, 0), (1, 1)),     # 1x1, planes of 36: both in float4
    ((1, 8, 7, 7), (12, 8, 1, 1), (0, 0), (1, 0)),     # planes of 49: the input in scalars
    ((1, 4, 9, 8), (10, 4, 3, 3), (1, 1), (1, 0)),     # K = 36: the weights in float4
    ((1, 3, 9, 8), (10, 3, 3, 3), (1, 1), (0, 0)),     # K = 27: scalars
])
def test_convolution_reads_float4_where_aligned(cl_env, x_shape, w_shape, pads, flags):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = (rng.standard_normal(w_shape) * 0.2).astype(np.float32)
    want = conv_ref(x, w, (1, 1), (1, 1), pads, pads)
    op = get_op("Convolution")
    at = op.parse_attributes(conv_attrs(pb=pads, pe=pads), "conv")
    descs, out = [TensorDesc(x.shape), TensorDesc(w.shape)], [TensorDesc(want.shape)]
    ctx = CompileContext()
    launches = op.launches(at, descs, out, {}, ctx)
    gemm = [l for l in launches if l.entry == "gemm_tiled"]
    assert gemm, [l.entry for l in launches]
    assert _flags(gemm) == flags
    got = run_launches(cl_env, launches, [x, w], descs, out, shaped_for=ctx)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("variant", [GemmVariant(128, 128, 16, 8, 1), GemmVariant(128, 128, 16, 8, 3),
                                     GemmVariant(64, 128, 8, 8, 2)],
                         ids=lambda v: v.name)
def test_the_large_blocks_and_wave_splits_match_float64(cl_env, variant):
    """The 16x8 register block (128 work items of 128 outputs) and a split-K taken to round the
    waves up (a long K): ragged edges on every side (M, N not multiples of the tile, K not of
    the slice)."""
    m, n, k = 150, 140, 1100
    rng = np.random.default_rng(3)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    want = a.astype(np.float64) @ b
    op = get_op("MatMul")
    at = op.parse_attributes({}, "mm")
    descs, out = [TensorDesc(a.shape), TensorDesc(b.shape)], [TensorDesc(want.shape)]
    ctx = CompileContext(variant=variant)
    launches = op.launches(at, descs, out, {}, ctx)
    assert len(launches) == (2 if variant.ksplit > 1 else 1)
    got = run_launches(cl_env, launches, [a, b], descs, out, shaped_for=ctx)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3, err_msg=variant.name)
