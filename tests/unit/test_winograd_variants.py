"""Winograd F(2x2, 3x3) and F(4x4, 3x3) without a device (ops/nn/_winograd.py): which layers list it and where in
the tuner's candidates, and the host-side weight transform, checked by a numpy Winograd
convolution against the direct sum."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.jit.launch import CompileContext, DeviceTraits
from customlayers.jit.tensor import TensorDesc
from customlayers.ops import get_op
from customlayers.ops.nn._winograd import transform_weights

GPU = CompileContext(DeviceTraits("GPU", compute_units=16, max_work_group_size=256))
CPU = CompileContext(DeviceTraits("CPU", compute_units=2, max_work_group_size=4096))
# F(2x2, 3x3)'s and F(4x4, 3x3)'s input and output transforms, written out here independently
# of the kernel (Lavin & Gray's, F(4x4) at the points 0, -1, 1, -2, 2 and infinity)
B_T = {2: np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64),
       4: np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
                    [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], np.float64)}
A_T = {2: np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64),
       4: np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0],
                    [0, 1, -1, 8, -8, 1]], np.float64)}


def _variants(x_shape, w_shape, ctx=GPU, const=True, op_type="Convolution", strides=(1, 1),
              dilations=(1, 1), pads=(1, 1)):
    op = get_op(op_type)
    j = lambda v: ",".join(map(str, v))  # noqa: E731
    attrs = op.parse_attributes({"strides": j(strides), "dilations": j(dilations),
                                 "pads_begin": j(pads), "pads_end": j(pads)}, "layer")
    descs = [TensorDesc(x_shape), TensorDesc(w_shape)]
    out = [TensorDesc(s) for s, _ in op.infer_shapes(attrs, descs, {})]
    consts = {1: np.zeros(w_shape, np.float32)} if const else {}
    return tuple(v.name for v in op.kernel_variants(attrs, descs, out, consts, ctx))


def test_winograd_comes_second_for_a_wide_3x3_layer_and_the_heuristic_stays_first():
    listed = _variants((1, 64, 28, 28), (64, 64, 3, 3))
    without = _variants((1, 64, 28, 28), (64, 64, 3, 3), const=False)
    assert listed[0] == without[0] and listed[0].startswith("gemm")
    # timed by --tuning fast (the first four)
    assert listed[1:3] == ("winograd4x4", "winograd2x2")
    assert [v for v in listed if not v.startswith("winograd")] == list(without)
    for block in (2, 4):
        tilings = [v for v in listed if v.startswith(f"winograd{block}x{block}_gemm")]
        assert len(tilings) == 2
    assert listed[-1] == "direct"


def test_a_device_with_cp_async_times_winograd_in_the_copy_pipeline_first():
    """On NVIDIA sm_80+ (cp.async) the batched GEMM's operands are plain matrices in float4s:
    F(4x4) and F(2x2) in the pipeline's best-ranked tiling come second and third (timed by
    --tuning fast), then `winograd2x2`; `winograd4x4` and the other pipeline tilings later;
    none in the pipeline where CG is not a multiple of 4."""
    from dataclasses import replace
    piped = CompileContext(replace(GPU.device, async_copy=True, local_mem_size=48 * 1024))
    listed = _variants((32, 64, 28, 28), (64, 64, 3, 3), ctx=piped)
    assert listed[0].startswith("gemm") and not listed[0].endswith(("_a2", "_a3"))
    assert listed[1].startswith("winograd4x4_gemm") and listed[1].endswith("_a2")
    assert listed[2].startswith("winograd2x2_gemm") and listed[2].endswith("_a2")
    assert listed[3] == "winograd2x2"
    assert "winograd4x4" in listed[4:]
    for block in (2, 4):
        stem = f"winograd{block}x{block}_"
        piped_ones = [v for v in listed if v.startswith(stem) and v.endswith(("_a2", "_a3"))]
        assert len(piped_ones) >= 2 and piped_ones[1:] == \
            [v for v in listed[4:] if v.startswith(stem) and v.endswith(("_a2", "_a3"))]
    odd = _variants((32, 66, 28, 28), (64, 66, 3, 3), ctx=piped)
    assert "winograd2x2" in odd and not any(v.endswith(("_a2", "_a3")) for v in odd)
    assert set(_variants((32, 64, 28, 28), (64, 64, 3, 3))) == {
        v for v in listed if not v.endswith(("_a2", "_a3"))}


def test_at_batch_one_the_pipelined_winograd_is_left_to_full():
    """A GEMM that does not give the device a work-group per compute unit (batch 1: 64 channels
    over 56x56, F(4x4)'s 196 tiles, 1 x 2 tiles of 64 x 128 per element) keeps the pipeline's
    builds (0.6-1.1 s each on an H100) out of --tuning fast: `winograd4x4` and `winograd2x2`
    are timed, the pipelined forms listed last."""
    from dataclasses import replace
    piped = CompileContext(replace(GPU.device, compute_units=132, async_copy=True,
                                   local_mem_size=48 * 1024))
    listed = _variants((1, 64, 56, 56), (64, 64, 3, 3), ctx=piped)
    assert listed[1:3] == ("winograd4x4", "winograd2x2")
    assert not any(v.endswith(("_a2", "_a3")) for v in listed[:4])
    assert any(v.startswith("winograd4x4_") and v.endswith("_a2") for v in listed[4:])


def test_winograd_comes_after_the_gemms_for_few_channels():
    listed = _variants((1, 3, 32, 32), (16, 3, 3, 3))       # a first layer: K = 27
    assert "winograd2x2" in listed and listed.index("winograd2x2") > 3
    assert listed[1] == "direct"          # 16 output channels: the direct kernels come early


@pytest.mark.parametrize("case", [
    dict(const=False),                                        # weights computed at run time
    dict(strides=(2, 2)),
    dict(dilations=(2, 2), pads=(2, 2)),
    dict(w_shape=(32, 16, 5, 5)),
    dict(ctx=CPU),                                            # the CPU path has its own kernels
    dict(x_shape=(1, 16, 20), w_shape=(32, 16, 3), strides=(1,), dilations=(1,), pads=(1,)),
    dict(x_shape=(1, 16, 8, 8), w_shape=(16, 1, 1, 3, 3), op_type="GroupConvolution"),
    dict(x_shape=(1, 64, 1024, 1024), w_shape=(64, 64, 3, 3)),  # scratch past 128 MiB
    dict(x_shape=(1, 4096, 2, 2), w_shape=(4096, 8, 1, 3, 3),  # 65536 GEMMs in NDRange dim 2
         op_type="GroupConvolution"),
])
def test_winograd_is_not_listed_where_it_does_not_apply(case):
    args = dict(x_shape=(1, 16, 12, 12), w_shape=(32, 16, 3, 3))
    args.update(case)
    assert not any(v.startswith("winograd") for v in _variants(**args))


def test_grouped_convolution_lists_winograd():
    assert "winograd2x2" in _variants((1, 32, 8, 8), (2, 16, 16, 3, 3),
                                      op_type="GroupConvolution")


def _winograd_numpy(x, u, pads, block=2):
    """A whole F(m x m, 3x3) convolution (m = block) in float64 from transformed weights u
    [1][(m+2)^2][O][C]."""
    n, c, h, w = x.shape
    o, t, bt, at = u.shape[2], block + 2, B_T[block], A_T[block]
    oh, ow = h + pads[0] + pads[2] - 2, w + pads[1] + pads[3] - 2
    th, tw = -(-oh // block), -(-ow // block)
    # zero-pad so that every tile's t x t input (past the far edge too) exists
    xp = np.zeros((n, c, block * th + 2, block * tw + 2))
    rows, cols = min(h, block * th + 2 - pads[0]), min(w, block * tw + 2 - pads[1])
    xp[:, :, pads[0]:pads[0] + rows, pads[1]:pads[1] + cols] = x[:, :, :rows, :cols]
    u = u.reshape(t, t, o, c).astype(np.float64)
    y = np.zeros((n, o, block * th, block * tw))
    for ty in range(th):
        for tx in range(tw):
            y0, x0 = block * ty, block * tx
            d = xp[:, :, y0:y0 + t, x0:x0 + t]
            v = np.einsum("ik,nckl,jl->nijc", bt, d, bt)
            m = np.einsum("ijoc,nijc->noij", u, v)
            y[:, :, y0:y0 + block, x0:x0 + block] = np.einsum("pi,noij,qj->nopq", at, m, at)
    return y[:, :, :oh, :ow]


def _direct(x, w, pads):
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh, ow = xp.shape[2] - 2, xp.shape[3] - 2
    return sum(np.einsum("nchw,oc->nohw", xp[:, :, ky:ky + oh, kx:kx + ow], w[:, :, ky, kx])
               for ky in range(3) for kx in range(3))


@pytest.mark.parametrize("x_shape,o,pads", [((2, 5, 7, 9), 6, (1, 1, 1, 1)),
                                            ((1, 3, 6, 5), 4, (0, 0, 0, 0)),
                                            ((1, 4, 8, 7), 3, (2, 0, 1, 2))])
@pytest.mark.parametrize("block", [2, 4])
def test_weight_transform_gives_the_convolution(x_shape, o, pads, block):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(x_shape)
    w = rng.standard_normal((o, x_shape[1], 3, 3)).astype(np.float32)
    g = dict(G=1, OG=o, CG=x_shape[1])
    u = transform_weights(w, g, block)
    assert u.shape == (1, (block + 2) ** 2, o, x_shape[1]) and u.dtype == np.float32
    np.testing.assert_allclose(_winograd_numpy(x, u, pads, block), _direct(x, w, pads),
                               rtol=1e-5, atol=1e-5)
