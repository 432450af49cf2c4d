"""Split-K: a GEMM whose output has too few tiles for a large GPU cuts its K loop among more
work-groups and adds the partial sums in a second kernel. Same results as numpy."""
from __future__ import annotations

import numpy as np

from customlayers.ops.nn._gemm import gemm_split, gemm_tiles
from test_ops_conv import attrs, conv_ref, run_op


def test_split_factor_is_chosen_by_tile_count_and_k():
    tiles = gemm_tiles(512, 49)               # ResNet-50's last 3x3 layers: 8 tiles
    split = gemm_split(tiles, 512, 49, 4608, 1)
    assert split["KSPLIT"] > 1
    assert split["KCHUNK"] % tiles["TK"] == 0
    assert split["KSPLIT"] * split["KCHUNK"] >= 4608 > (split["KSPLIT"] - 1) * split["KCHUNK"]
    assert gemm_split(gemm_tiles(128, 12544), 128, 12544, 576, 1)["KSPLIT"] == 1  # many tiles
    assert gemm_split(tiles, 512, 49, 100, 1)["KSPLIT"] == 1                  # K too short


def test_split_k_convolution_with_fused_epilogue(cl_env):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 64, 7, 7)).astype(np.float32)
    w = rng.standard_normal((40, 64, 3, 3)).astype(np.float32) * 0.1
    bias = rng.standard_normal((1, 40, 1, 1)).astype(np.float32)
    raw = attrs(pb=(1, 1), pe=(1, 1))
    from customlayers.jit.tensor import TensorDesc
    from customlayers.jit.launch import CompileContext, FusedEpilogue
    from customlayers.ops import get_op
    from launch_runner import run_launches
    op = get_op("Convolution")
    a = op.parse_attributes(raw, "conv")
    descs = [TensorDesc(x.shape), TensorDesc(w.shape), TensorDesc(bias.shape)]
    out = [TensorDesc((1, 40, 7, 7))]
    ctx = CompileContext(epilogue=FusedEpilogue(True, True))
    launches = op.launches(a, descs, out, {}, ctx)
    assert [l.entry for l in launches] == ["gemm_tiled", "gemm_splitk_reduce"]
    got = run_launches(cl_env, launches, [x, w, bias], descs, out, shaped_for=ctx)[0]
    want = np.maximum(conv_ref(x, w, (1, 1), (1, 1), (1, 1), (1, 1)) + bias, 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_split_k_plain_convolution(cl_env):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 48, 5, 6)).astype(np.float32)
    w = rng.standard_normal((24, 48, 3, 3)).astype(np.float32) * 0.1
    got, launches = run_op(cl_env, "Convolution", attrs(), [x, w])
    assert len(launches) == 2
    np.testing.assert_allclose(got, conv_ref(x, w, (1, 1), (1, 1), (0, 0), (0, 0)),
                               rtol=1e-4, atol=1e-4)


def test_split_k_matmul(cl_env):
    from test_ops_conv import run_op as run
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 9, 1000)).astype(np.float32)
    b = rng.standard_normal((1000, 7)).astype(np.float32)
    got, launches = run(cl_env, "MatMul", {}, [a, b])
    assert [l.entry for l in launches] == ["gemm_tiled", "gemm_splitk_reduce"]
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)
