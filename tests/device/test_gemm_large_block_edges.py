"""The 16x8 register block and the wave splits (ops/nn/_variants.py) at the edges that
test_gemm_vector_reads.py leaves out: sizes that are not multiples of 4 (scalar global reads),
a transposed B, batches, and a convolution's fused bias, residual and ReLU stored once by the
split's reduce."""
from __future__ import annotations

import numpy as np

from customlayers.jit.launch import CompileContext, FusedEpilogue
from customlayers.jit.tensor import TensorDesc
from customlayers.ops import get_op
from customlayers.ops.nn._variants import GemmVariant
from launch_runner import run_launches
from test_ops_conv import attrs as conv_attrs, conv_ref

# one variant each (the suite's time is mostly PoCL compiling): the 16x8 block split in 4
SPLIT_16X8 = GemmVariant(128, 128, 16, 8, 4)


def test_odd_sizes_batches_and_a_transposed_b(cl_env, variant=SPLIT_16X8):
    b_, m, n, k = 2, 131, 133, 1027
    rng = np.random.default_rng(11)
    a = rng.standard_normal((b_, m, k)).astype(np.float32)
    b = rng.standard_normal((b_, n, k)).astype(np.float32)
    want = a.astype(np.float64) @ b.transpose(0, 2, 1)
    op = get_op("MatMul")
    at = op.parse_attributes({"transpose_b": "true"}, "mm")
    descs, out = [TensorDesc(a.shape), TensorDesc(b.shape)], [TensorDesc(want.shape)]
    ctx = CompileContext(variant=variant)
    launches = op.launches(at, descs, out, {}, ctx)
    got = run_launches(cl_env, launches, [a, b], descs, out, shaped_for=ctx)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-3, err_msg=variant.name)


def test_a_split_convolution_stores_bias_residual_and_relu_once(cl_env, variant=SPLIT_16X8):
    rng = np.random.default_rng(12)
    x = rng.standard_normal((2, 115, 9, 7)).astype(np.float32)
    w = (rng.standard_normal((130, 115, 3, 3)) * 0.05).astype(np.float32)
    bias = rng.standard_normal((1, 130, 1, 1)).astype(np.float32)
    res = rng.standard_normal((2, 130, 9, 7)).astype(np.float32)
    op = get_op("Convolution")
    a = op.parse_attributes(conv_attrs(pb=(1, 1), pe=(1, 1)), "conv")
    descs = [TensorDesc(x.shape), TensorDesc(w.shape), TensorDesc(bias.shape),
             TensorDesc(res.shape)]
    out = [TensorDesc(res.shape)]
    ctx = CompileContext(variant=variant, epilogue=FusedEpilogue(bias=True, relu=True,
                                                                 residual=True))
    launches = op.launches(a, descs, out, {}, ctx)
    assert [l.entry for l in launches][-1] == "gemm_splitk_reduce"
    got = run_launches(cl_env, launches, [x, w, bias, res], descs, out, shaped_for=ctx)[0]
    want = np.maximum(conv_ref(x, w, (1, 1), (1, 1), (1, 1), (1, 1)) + bias + res, 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3, err_msg=variant.name)

