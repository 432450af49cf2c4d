"""gemm.cl's float4 stores (GEMM_VEC_OUT): where a GPU MatMul's output rows hold its columns in
aligned groups of four (N and the strides multiples of 4) and the fused residual is laid out as
the output, each work item stores four columns and reads their residual at once. Every sampled
tiling (split-K's partial sums too, and the copy pipeline's) against float64 numpy, with the
flag checked on and off in the program text: dense outputs with bias, residual and ReLU, and an
output stored through a view whose rows land in two levels (torch's out-projection: rows in
(sequence, batch) order stored to [batch, sequence, N])."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.jit.launch import CompileContext, FusedEpilogue
from customlayers.jit.tensor import TensorDesc
from customlayers.ops import get_op
from customlayers.ops.nn._variants import ASYNC_TILINGS, GemmVariant, gemm_variants
from customlayers.ops.view_steps import OperandViews, dense_view
from launch_runner import kernel_sample, run_launches

EPILOGUE = FusedEpilogue(bias=True, residual=True, relu=True, label="bias+residual+relu")


def _variants(m: int, n: int, k: int) -> list:
    listed = list(kernel_sample(gemm_variants(m, n, k, 1, 8), 4))
    split = [v for v in gemm_variants(m, n, k, 1, 8) if v.ksplit > 1][:1]
    tm, tn, rm, rn, stages = ASYNC_TILINGS[0]
    # the copy pipeline reads B in float4s: N a multiple of 4
    return listed + split + ([GemmVariant(tm, tn, rm, rn, 1, stages)] if n % 4 == 0 else [])


def _run(cl_env, a, b, bias, res, variant, facts=()):
    op = get_op("MatMul")
    at = op.parse_attributes({}, "mm")
    descs = [TensorDesc(t.shape) for t in (a, b, bias, res)]
    ctx = CompileContext(variant=variant, epilogue=EPILOGUE, facts=facts)
    out = [TensorDesc(s) for s, _ in op.infer_shapes(at, descs[:2], {}, ctx)]
    launches = op.launches(at, descs, out, {}, ctx)
    flag = int("#define GEMM_VEC_OUT 1" in launches[0].source)
    return run_launches(cl_env, launches, [a, b, bias, res], descs, out)[0], flag


@pytest.mark.parametrize("n,want_flag", [(68, 1), (66, 0)])
def test_dense_outputs_store_four_columns_where_aligned(cl_env, n, want_flag):
    m, k = 45, 600
    rng = np.random.default_rng(n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = (rng.standard_normal((k, n)) * 0.1).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    res = rng.standard_normal((m, n)).astype(np.float32)
    # a Gemm-shaped [M, N] output: its channels are the rows' axis 1, so the bias is per column
    want = np.maximum(a.astype(np.float64) @ b + bias + res, 0)
    for variant in _variants(m, n, k):
        got, flag = _run(cl_env, a, b, bias, res, variant)
        assert flag == want_flag, variant.name
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=variant.name)


def test_rows_stored_in_two_levels_store_four_columns(cl_env):
    s, batch, k, n = 7, 3, 40, 68
    rng = np.random.default_rng(3)
    a = rng.standard_normal((s * batch, k)).astype(np.float32)        # rows (s, b)
    b = (rng.standard_normal((k, n)) * 0.2).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    res = rng.standard_normal((batch, s, n)).astype(np.float32)
    view = dense_view((batch, s, n)).transpose((1, 0, 2)).reshape((s * batch, n))
    fact = OperandViews((None, None), (None, None), 1.0, view, (batch, s, n))
    flat = a.astype(np.float64) @ b                                      # [(s, b), n]
    want = np.maximum(flat.reshape(s, batch, n).transpose(1, 0, 2) + bias + res, 0)
    for variant in _variants(s * batch, n, k):
        got, flag = _run(cl_env, a, b, bias, res, variant, facts=(fact,))
        assert flag == 1, variant.name
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=variant.name)
