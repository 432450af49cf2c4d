"""The register-blocked CPU convolution (ops/nn/_cpu_kernels.py, conv_cpu_blocked.cl): every
candidate micro-tile, on every case of the GEMM kernel's tests and ResNet-like shapes, with and
without the fused epilogue, against the float64 numpy reference, at both vector widths (8
lanes: AVX2's kernels; 16: AVX-512's). A CPU DeviceTraits selects the path and the width on
any device."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.jit.launch import CompileContext, DeviceTraits, FusedEpilogue
from customlayers.jit.tensor import TensorDesc
from customlayers.ops import get_op
from customlayers.ops.nn._cpu_kernels import (MIN_BLOCKED_OG, ConvBlocking, conv_blockings,
                                             conv_candidates, pack_conv_weights)
from launch_runner import run_launches
from test_ops_conv import CASES, attrs, conv_ref

CPU = DeviceTraits("CPU", compute_units=2, max_work_group_size=4096, float_vector_width=8)
CPU16 = DeviceTraits("CPU", compute_units=2, max_work_group_size=4096, float_vector_width=16)
WIDTHS = {8: CPU, 16: CPU16}

SHAPES = CASES + [
    ((1, 16, 14, 14), (32, 16, 3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),   # 3x3 pad 1, 2 blocks
    ((1, 24, 7, 7), (40, 24, 1, 1), (2, 2), (1, 1), (0, 0), (0, 0)),     # 1x1 stride 2, P=16
    ((2, 8, 9, 10), (16, 8, 3, 3), (1, 1), (2, 2), (2, 2), (2, 2)),      # dilated, batch 2
    # 16 lanes: a partial last block of 32 (OG=50), P=5x9 not a multiple of 14 or 7
    ((1, 7, 10, 17), (50, 7, 3, 3), (2, 2), (1, 1), (1, 1), (1, 1)),
    # 16 lanes: 17 channels (blocks of 16, one nearly empty), 1x1 stride 2 on odd sizes
    ((1, 9, 15, 13), (17, 9, 1, 1), (2, 2), (1, 1), (0, 0), (0, 0)),
    # 32 channels exactly, 7x7 output (the 14-pixel tile's 7 padded pixels), pad 1 stride 1
    ((1, 13, 7, 7), (32, 13, 3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),
    # last tiles whose repeated past-the-end pixels hide a row jump (their first and last
    # offsets PT - 1 apart without being a run): a 2x2 and a 3x8 output, 3x3 pad 1, and a
    # 1x1 stride 2 to 5x5
    ((1, 8, 2, 2), (32, 8, 3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),
    ((1, 8, 3, 8), (32, 8, 3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),
    ((1, 9, 9, 9), (32, 9, 1, 1), (2, 2), (1, 1), (0, 0), (0, 0)),
]


def _run(cl_env, op_type, x, w, strides, dilations, pb, pe, epilogue, device=CPU, pick=None):
    rng = np.random.default_rng(2)
    op = get_op(op_type)
    a = op.parse_attributes(attrs(strides, dilations, pb, pe), "conv")
    ctx = CompileContext(device, FusedEpilogue(bias=True, relu=True) if epilogue else None)
    arrays = [x, w]
    channels = w.shape[0] * (w.shape[1] if op_type == "GroupConvolution" else 1)
    if epilogue:
        arrays.append(rng.standard_normal(channels).astype(np.float32))
    descs = [TensorDesc(v.shape) for v in arrays]
    (shape, dtype), = op.infer_shapes(a, descs[:2], {})
    out = [TensorDesc(shape, dtype)]
    if pick is None:
        launches = op.launches(a, descs, out, {1: w}, ctx)
    else:
        launches = conv_candidates(op.plan(a, descs, out, {1: w}, ctx))
        assert pick < len(launches)
        launches = launches[pick]
    got = run_launches(cl_env, launches, arrays, descs, out)[0]
    return got, arrays, launches


@pytest.mark.parametrize("width", sorted(WIDTHS))
@pytest.mark.parametrize("epilogue", [False, True])
@pytest.mark.parametrize("case", SHAPES, ids=[f"{c[0]}-{c[1]}-s{c[2]}" for c in SHAPES])
def test_every_candidate_matches_reference(cl_env, case, epilogue, width):
    device = WIDTHS[width]
    xs, ws, strides, dilations, pb, pe = case
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    want = conv_ref(x, w, strides, dilations, pb, pe)
    # under MIN_BLOCKED_OG channels there is no candidate: the op's own choice, conv_cpu.cl
    picks = range(len(conv_blockings(ws[0], device))) if ws[0] >= MIN_BLOCKED_OG else [None]
    for pick in picks:
        got, arrays, launches = _run(cl_env, "Convolution", x, w, strides, dilations, pb, pe,
                                     epilogue, device=device, pick=pick)
        assert launches[-1].entry == ("conv_cpu_blocked" if ws[0] >= MIN_BLOCKED_OG
                                      else "conv_cpu")
        ref = np.maximum(want + arrays[2].reshape(1, -1, 1, 1), 0) if epilogue else want
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4, err_msg=launches[-1].label)


def test_op_picks_blocked_kernel_when_weights_are_constant(cl_env):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 8, 10, 10)).astype(np.float32)
    w = rng.standard_normal((24, 8, 3, 3)).astype(np.float32)
    got, _, launches = _run(cl_env, "Convolution", x, w, (1, 1), (1, 1), (1, 1), (1, 1), False)
    assert [l.entry for l in launches] == ["conv_cpu_pad", "conv_cpu_blocked"]
    np.testing.assert_allclose(got, conv_ref(x, w, (1, 1), (1, 1), (1, 1), (1, 1)),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("width", sorted(WIDTHS))
@pytest.mark.parametrize("groups,og,cg", [(3, 10, 4), (2, 30, 3)])   # OG=30: a partial 32
def test_grouped_blocked_kernel(cl_env, width, groups, og, cg):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, groups * cg, 9, 7)).astype(np.float32)
    w = rng.standard_normal((groups, og, cg, 3, 3)).astype(np.float32)
    for pick in range(len(conv_blockings(og, WIDTHS[width]))):
        got, arrays, launches = _run(cl_env, "GroupConvolution", x, w, (2, 1), (1, 1), (1, 1),
                                     (1, 1), True, device=WIDTHS[width], pick=pick)
        assert launches[-1].entry == "conv_cpu_blocked"
        want = conv_ref(x, w.reshape(groups * og, cg, 3, 3), (2, 1), (1, 1), (1, 1), (1, 1),
                        groups=groups)
        want = np.maximum(want + arrays[2].reshape(1, -1, 1, 1), 0)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=launches[-1].label)


def test_blockings_follow_the_vector_width():
    """16 lanes: float16 tiles of 32 (or 16 where 32 would leave more empty) channels, 28
    accumulators of AVX-512's 32 registers; 8 lanes: AVX2's float8 tiles, 12 of 16."""
    assert conv_blockings(64, CPU16)[0] == ConvBlocking(32, 14, 16)
    assert conv_blockings(48, CPU16)[0] == ConvBlocking(16, 28, 16)
    assert conv_blockings(6, CPU16) == [ConvBlocking(8, 24, 8)]
    assert conv_blockings(64, CPU)[0] == ConvBlocking(16, 6, 8)
    for device in (CPU, CPU16):
        for og in (5, 8, 17, 48, 64, 2048):
            for t in conv_blockings(og, device):
                registers = 16 if device is CPU else 32
                assert t.pt * t.ob // t.vw <= registers - 3, (og, t)


def _plan(op_type, x_shape, w, const=True):
    """conv.py's plan of a stride-1 convolution with pads 1 (3x3) or 0 (1x1) on the CPU."""
    op = get_op(op_type)
    pad = (w.shape[-1] // 2,) * 2
    a = op.parse_attributes(attrs((1, 1), (1, 1), pad, pad), "conv")
    descs = [TensorDesc(x_shape), TensorDesc(w.shape)]
    (shape, dtype), = op.infer_shapes(a, descs, {})
    return op.plan(a, descs, [TensorDesc(shape, dtype)], {1: w} if const else {},
                   CompileContext(CPU))


def test_depthwise_keeps_the_direct_kernel():
    plan = _plan("GroupConvolution", (1, 4, 4, 4), np.zeros((4, 1, 1, 3, 3), np.float32))
    assert conv_candidates(plan) == []


def test_runtime_weights_keep_the_direct_kernel():
    plan = _plan("Convolution", (1, 4, 4, 4), np.zeros((16, 4, 1, 1), np.float32), const=False)
    assert conv_candidates(plan) == []


def test_packed_layout():
    w = np.arange(2 * 3 * 2 * 2, dtype=np.float32).reshape(2, 3, 2, 2)   # O=2 CG=3 2x2
    g = dict(G=1, OG=2, CG=3, KH=2, KW=2)
    packed = pack_conv_weights(w, g, 8)
    assert packed.shape == (1, 1, 2, 2, 3, 8)
    assert packed[0, 0, 1, 0, 2, 1] == w[1, 2, 1, 0]       # [ky][kx][c][o]
    assert not packed[..., 2:].any()                        # channels past OG are zero


def test_vector_width_is_read_from_the_device_and_can_be_forced(test_device, monkeypatch):
    """device_traits takes the device's preferred float width; CUSTOMLAYERS_CPU_VECTOR_WIDTH
    forces 8 or 16 on a CPU device (the AVX2 kernels on an AVX-512 machine, as CI may have
    either), and names itself when set to anything else."""
    from customlayers.runtime.device.limits import device_traits
    monkeypatch.delenv("CUSTOMLAYERS_CPU_VECTOR_WIDTH", raising=False)
    reported = int(test_device.preferred_vector_width_float) or \
        int(test_device.native_vector_width_float)
    assert device_traits(test_device).float_vector_width == reported
    if not device_traits(test_device).kind == "CPU":
        return
    for width in ("8", "16"):
        monkeypatch.setenv("CUSTOMLAYERS_CPU_VECTOR_WIDTH", width)
        assert device_traits(test_device).float_vector_width == int(width)
    monkeypatch.setenv("CUSTOMLAYERS_CPU_VECTOR_WIDTH", "12")
    from customlayers.errors import ConfigError
    with pytest.raises(ConfigError, match=r"CUSTOMLAYERS_CPU_VECTOR_WIDTH='12' is not 8 or 16; "
                                          r"unset it \(the device's width\), or set it to 8"):
        device_traits(test_device)


def test_a_bad_vector_width_setting_is_one_line_from_the_cli(test_device, monkeypatch, capsys):
    """A setting, not a bug: one `error:` line and exit 1, as a bad CUSTOMLAYERS_TUNING."""
    from pathlib import Path
    from customlayers.cli import main as cli_main
    import pyopencl as cl
    if not test_device.type & cl.device_type.CPU:
        pytest.skip("the setting applies to CPU devices")
    model = Path(__file__).resolve().parents[2] / "examples" / "models" / "demo_cnn_builtin.xml"
    monkeypatch.setenv("CUSTOMLAYERS_CPU_VECTOR_WIDTH", "abc")
    assert cli_main(["run", "-m", str(model), "-d", "CPU"]) == 1
    err = capsys.readouterr().err
    assert "CUSTOMLAYERS_CPU_VECTOR_WIDTH='abc' is not 8 or 16" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("width", sorted(WIDTHS))
@pytest.mark.parametrize("xs,ws,pad,cache", [((1, 24, 10, 12), (40, 24, 1, 1), 0, 8192),
                                             ((2, 16, 30, 30), (24, 16, 3, 3), 1, 16384)])
def test_blocks_first_walk_matches_reference(cl_env, width, xs, ws, pad, cache):
    """Where an image's input outgrows a core's cache and the weights do not (blocks_first),
    neighbouring work items take the channel blocks of one pixel tile: the NDRange's first two
    dimensions swapped, every output as before. A device with a small cache makes it apply to
    small layers."""
    from customlayers.ops.nn._cpu_kernels import blocks_first
    device = DeviceTraits("CPU", compute_units=2, max_work_group_size=4096,
                          float_vector_width=width, global_cache_bytes=2 * cache)
    rng = np.random.default_rng(6)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    want = conv_ref(x, w, (1, 1), (1, 1), (pad, pad), (pad, pad))
    picks = range(len(conv_blockings(ws[0], device)))
    walked = []
    for pick in picks:
        got, arrays, launches = _run(cl_env, "Convolution", x, w, (1, 1), (1, 1), (pad, pad),
                                     (pad, pad), True, device=device, pick=pick)
        tile = conv_blockings(ws[0], device)[pick]
        ogb = -(-ws[0] // tile.ob)
        conv = launches[-1]
        # BLOCKS_FIRST, before the epilogue's four switches
        swapped = conv.args[-5].value == 1
        walked.append(swapped)
        assert conv.global_size[0 if swapped else 1] == ogb
        ref = np.maximum(want + arrays[2].reshape(1, -1, 1, 1), 0)
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4, err_msg=conv.label)
    assert any(walked)              # at least one micro-tile here walks blocks first
    g = dict(G=1, OG=ws[0], CG=ws[1], KH=ws[2], KW=ws[3])
    big = DeviceTraits("CPU", compute_units=2, float_vector_width=width,
                       global_cache_bytes=1 << 30)
    assert not blocks_first(g, xs[1] * 32 * 32, big, 8)     # the input stays in a 1 MiB cache


EPILOGUES = [FusedEpilogue(), FusedEpilogue(bias=True), FusedEpilogue(relu=True),
             FusedEpilogue(bias=True, residual=True),
             FusedEpilogue(bias=True, relu=True, residual=True, pre_relu=True),
             FusedEpilogue(residual=True, relu=True),
             FusedEpilogue(bias=True, gelu="erf"), FusedEpilogue(bias=True, gelu="tanh")]


@pytest.mark.parametrize("width", sorted(WIDTHS))
def test_every_epilogue_runs_from_one_program_per_tile(cl_env, width):
    """Stop 27: the epilogue's switches (bias, residual, ReLU before the residual, ReLU) are
    conv_cpu_blocked's arguments, so convolutions of any fusion share the program of their
    micro-tile and window (PoCL compiles it in about 1.2 s); only GELU stays a #define. Each
    fusion against the float64 reference, on a 3x3 padded and a 1x1 layer."""
    import math
    device = WIDTHS[width]
    rng = np.random.default_rng(11)
    sources = {}
    for xs, ws, pad in [((1, 8, 9, 11), (32, 8, 3, 3), 1), ((2, 16, 6, 5), (32, 16, 1, 1), 0)]:
        x = rng.standard_normal(xs).astype(np.float32)
        w = (rng.standard_normal(ws) * 0.3).astype(np.float32)
        bias = rng.standard_normal(ws[0]).astype(np.float32)
        op = get_op("Convolution")
        a = op.parse_attributes(attrs((1, 1), (1, 1), (pad, pad), (pad, pad)), "conv")
        (shape, _), = op.infer_shapes(a, [TensorDesc(xs), TensorDesc(ws)], {})
        residual = rng.standard_normal(shape).astype(np.float32)
        y = conv_ref(x, w, (1, 1), (1, 1), (pad, pad), (pad, pad))
        for ep in EPILOGUES:
            arrays = [x, w] + ([bias] if ep.bias else []) + ([residual] if ep.residual else [])
            descs = [TensorDesc(v.shape) for v in arrays]
            out = [TensorDesc(shape)]
            launches = op.launches(a, descs, out, {1: w}, CompileContext(device, ep))
            conv = launches[-1]
            assert conv.entry == "conv_cpu_blocked"
            sources.setdefault((ws[2], ep.gelu), set()).add(conv.source)
            got = run_launches(cl_env, launches, arrays, descs, out)[0]
            want = y + bias.reshape(1, -1, 1, 1) if ep.bias else y
            want = np.maximum(want, 0) if ep.pre_relu else want
            want = want + residual if ep.residual else want
            if ep.gelu == "erf":
                want = 0.5 * want * (1 + np.vectorize(math.erf)(want / math.sqrt(2)))
            elif ep.gelu == "tanh":
                want = 0.5 * want * (1 + np.tanh(0.7978845608028654 * (want + 0.044715 *
                                                                       want ** 3)))
            want = np.maximum(want, 0) if ep.relu else want
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=repr(ep))
    # per window, one program for every fusion but GELU, and one per GELU formula
    assert all(len(v) == 1 for v in sources.values()) and len(sources) == 6
