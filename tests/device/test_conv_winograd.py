"""Winograd F(2x2, 3x3) and F(4x4, 3x3) convolution (ops/nn/_winograd.py, conv_winograd.cl) on
the test device: forced through CompileContext.variant with a GPU's traits (gemm.cl's tilings
and gemm_async.cl's pipeline) or a CPU's (the GEMM as conv_cpu_blocked.cl's grouped 1x1
convolution), against a float64 numpy reference and against the direct kernel, with every
fused epilogue; and in a network whose tuner chooses it.

The tolerance. Every output is a sum of K = CG * 9 products; with inputs and weights of RMS
sx and sw its RMS is about sqrt(K) * sx * sw ("scale"). The direct kernel accumulates the K
terms in one fp32 chain, and its error measures up to ~5e-6 * scale here. F(2x2, 3x3) sums
only CG terms per GEMM element, and its transforms add at most 4 terms on each side (the 0.5s
of the weight transform are exact, and it is done in float64 on the host), so its rounding is
of the same order: measured 0.3x to 0.5x the direct kernel's, at most 1.8e-6 * scale. The test
asks for max error <= 2e-5 * scale (about 170 fp32 ulps of a typical output: a missing input
channel or a misplaced tile is off by ~3 * sx * sw, thousands of times more) and for no more
than 4x the direct kernel's error (plus 1e-6 * scale, for layers so small that the direct
kernel is nearly exact). F(4x4, 3x3)'s transforms have coefficients up to 8 (and 1/6, 1/24 in
the weights, rounded once to fp32), which amplify rounding: measured 1.9x to 9.5x the direct
kernel's error, at most 1.2e-5 * scale (PoCL, these cases); it is held to 5e-5 * scale and 25x
the direct kernel's, still far below what a wrong tile or channel gives.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from customlayers.jit.launch import CompileContext, DeviceTraits, FusedEpilogue
from customlayers.jit.tensor import TensorDesc
from customlayers.ops import get_op
from customlayers.ops.nn._conv_variants import DirectVariant
from customlayers.ops.nn._variants import ASYNC_TILINGS, GemmVariant
from customlayers.ops.nn._winograd import WinogradVariant
from launch_runner import run_launches
from oracle import ov_infer, save_ov_model
from test_ops_conv import attrs, conv_ref

# (NVIDIA's 48 KB of __local memory: every pipeline tiling fits)
GPU = DeviceTraits("GPU", compute_units=16, max_work_group_size=256, local_mem_size=48 * 1024)
# per output block: times the output's RMS scale, and times the direct kernel's error (see the
# module docstring)
MAX_ERROR = {2: 2e-5, 4: 5e-5}
MAX_RATIO = {2: 4.0, 4: 25.0}
DIRECT = DirectVariant()
LARGE_GPU = DeviceTraits("GPU", compute_units=132, max_work_group_size=256,
                         local_mem_size=48 * 1024)


def _run(cl_env, op_type, raw, arrays, variant, epilogue=None, device=None):
    """(output, launches, listed variants) of the op under `variant`, weights constant, for a
    GPU of the given traits (default GPU's)."""
    op = get_op(op_type)
    parsed = op.parse_attributes(raw, "layer")
    descs = [TensorDesc(a.shape) for a in arrays]
    out = [TensorDesc(s) for s, _ in op.infer_shapes(parsed, descs[:2], {})]
    consts = {1: arrays[1]}
    ctx = CompileContext(device or GPU, epilogue=epilogue, variant=variant)
    launches = op.launches(parsed, descs, out, consts, ctx)
    got = run_launches(cl_env, launches, arrays, descs, out, shaped_for=ctx)[0]
    return got, launches, op.kernel_variants(parsed, descs, out, consts, ctx)


def _reference(x, w, pb, pe, epilogue, bias, residual):
    groups = w.shape[0] if w.ndim == 5 else 1
    w2 = w.reshape((-1,) + w.shape[-3:])
    y = conv_ref(x, w2, (1, 1), (1, 1), pb, pe, groups)
    if epilogue is None:
        return y
    if epilogue.bias:
        y = y + bias.reshape(1, -1, 1, 1)
    if epilogue.pre_relu:
        y = np.maximum(y, 0)
    if epilogue.residual:
        y = y + residual
    if epilogue.gelu == "erf":                      # conv_epilogue.cl's order: GELU last
        from math import erf, sqrt
        return 0.5 * y * (1 + np.vectorize(erf)(y / sqrt(2)))
    return np.maximum(y, 0) if epilogue.relu else y


def _case(xs, ws, pb, pe, epilogue, seed):
    """(op type, attributes, the layer's arrays, float64 reference) of a 3x3 convolution of
    input shape xs and weights ws (OIYX; GOIYX: grouped), random from `seed`; the bias and
    residual among the arrays where the epilogue takes them."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    op_type = "GroupConvolution" if len(ws) == 5 else "Convolution"
    o = ws[0] * ws[1] if len(ws) == 5 else ws[0]
    bias = rng.standard_normal(o).astype(np.float32)
    raw = attrs(pb=pb, pe=pe)
    out_shape = get_op(op_type).infer_shapes(get_op(op_type).parse_attributes(raw, "l"),
                                             [TensorDesc(xs), TensorDesc(ws)], {})[0][0]
    residual = rng.standard_normal(out_shape).astype(np.float32)
    arrays = [x, w]
    if epilogue is not None and epilogue.bias:
        arrays.append(bias)
    if epilogue is not None and epilogue.residual:
        arrays.append(residual)
    want = _reference(x, w, pb, pe, epilogue, bias, residual)
    return op_type, raw, arrays, want


def _check(got, direct, want, x, w, label, block=2):
    scale = np.sqrt(w[0].size if w.ndim == 4 else w[0, 0].size) * \
        np.sqrt(np.mean(x.astype(np.float64) ** 2)) * np.sqrt(np.mean(w.astype(np.float64) ** 2))
    err, err_direct = np.abs(got - want).max(), np.abs(direct - want).max()
    bound, ratio = MAX_ERROR[block], MAX_RATIO[block]
    assert err <= bound * scale, f"{label}: error {err:.3g} > {bound} * {scale:.3g}"
    assert err <= ratio * err_direct + 1e-6 * scale, \
        f"{label}: error {err:.3g}, the direct kernel's {err_direct:.3g}"
    return err / scale, err_direct / scale


BIAS_RELU = FusedEpilogue(bias=True, relu=True)
RESIDUAL_BLOCK = FusedEpilogue(bias=True, relu=True, residual=True, pre_relu=True)
CASES = [
    # (x shape, w shape (OIYX; GOIYX: grouped), pads_begin, pads_end, epilogue)
    ((1, 16, 8, 8), (32, 16, 3, 3), (1, 1), (1, 1), None),             # whole tiles
    ((2, 13, 9, 11), (21, 13, 3, 3), (0, 0), (0, 0), None),            # odd, batch 2, no pad
    ((1, 7, 10, 7), (9, 7, 3, 3), (1, 0), (0, 2), BIAS_RELU),          # asymmetric pads
    ((3, 24, 5, 6), (40, 24, 3, 3), (2, 1), (1, 2), RESIDUAL_BLOCK),   # pads of 2, batch 3
    ((1, 8, 3, 3), (6, 8, 3, 3), (0, 0), (0, 0), FusedEpilogue(residual=True)),  # one output
    ((2, 24, 7, 9), (3, 8, 8, 3, 3), (1, 1), (1, 1), BIAS_RELU),       # 3 groups of 8
]


@pytest.mark.parametrize("block", [2, 4])
@pytest.mark.parametrize("xs,ws,pb,pe,epilogue", CASES)
def test_winograd_matches_numpy_and_the_direct_kernel(cl_env, xs, ws, pb, pe, epilogue, block):
    op_type, raw, arrays, want = _case(xs, ws, pb, pe, epilogue, sum(xs) + sum(ws))
    x, w = arrays[:2]
    direct, _, _ = _run(cl_env, op_type, raw, arrays, DIRECT, epilogue)
    variant = WinogradVariant(block=block)
    got, launches, listed = _run(cl_env, op_type, raw, arrays, variant, epilogue)
    assert variant.name in [v.name for v in listed]
    assert [l.entry for l in launches] == ["winograd_input", "gemm_tiled", "winograd_output"]
    assert len({l.source for l in launches}) == 1             # one program
    assert f"#define WINO_M {block}" in launches[0].source
    _check(got, direct, want, x, w, variant.name, block)


@pytest.mark.parametrize("block", [2, 4])
def test_every_winograd_tiling_gives_the_same_result(cl_env, block):
    rng = np.random.default_rng(21)
    x = rng.standard_normal((2, 20, 11, 10)).astype(np.float32)
    w = rng.standard_normal((36, 20, 3, 3)).astype(np.float32)
    raw = attrs(pb=(1, 1), pe=(1, 1))
    first, _, listed = _run(cl_env, "Convolution", raw, [x, w], WinogradVariant(block=block))
    tilings = [v for v in listed if isinstance(v, WinogradVariant) and v.tiling is not None
               and v.block == block]
    assert [v.name for v in listed[1:3]] == ["winograd4x4", "winograd2x2"]
    assert len(tilings) == 2
    assert [v.name for v in tilings] == [f"winograd{block}x{block}_{v.tiling.name}"
                                         for v in tilings]
    for v in tilings:
        got, launches, _ = _run(cl_env, "Convolution", raw, [x, w], v)
        t = v.tiling
        assert launches[1].label.endswith(f"{t.tm}x{t.tn}_{t.rm}x{t.rn}")
        # the tilings sum each GEMM element's terms in one order: the same bits
        assert np.array_equal(got, first), v
    direct, _, _ = _run(cl_env, "Convolution", raw, [x, w], DIRECT)
    _check(first, direct, conv_ref(x, w, (1, 1), (1, 1), (1, 1), (1, 1)), x, w,
           f"winograd{block}x{block}", block)


PIPELINED = [WinogradVariant(GemmVariant(tm, tn, rm, rn, split, stages), block)
             for tm, tn, rm, rn, stages in ASYNC_TILINGS for split in (1, 2) for block in (2, 4)]


@pytest.mark.parametrize("variant", PIPELINED, ids=lambda v: v.name)
def test_winograd_in_the_copy_pipeline_matches_numpy(cl_env, variant):
    """The batched GEMM in gemm_async.cl's pipeline (PTX cp.async on NVIDIA, plain float4 moves
    here): three images of 10x9 outputs side by side (F(2x2): 5x5 = 25 tiles each, NT = 75
    columns, so V's rows carry a zero column to NP = 76; F(4x4): 3x3 tiles, the last row and
    column partial, NT = 27, NP = 28), bias, residual and ReLU, split-K or not, against float64
    and the direct kernel."""
    rng = np.random.default_rng(25)
    x = rng.standard_normal((3, 24, 11, 9)).astype(np.float32)
    w = rng.standard_normal((36, 24, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(36).astype(np.float32)
    raw = attrs(pb=(1, 1), pe=(0, 1))                      # 10 x 9 outputs
    want_shape = (3, 36, 10, 9)
    residual = rng.standard_normal(want_shape).astype(np.float32)
    arrays = [x, w, bias, residual]
    got, launches, listed = _run(cl_env, "Convolution", raw, arrays, variant, RESIDUAL_BLOCK)
    t = variant.tiling
    assert launches[1].label.endswith(f"{t.tm}x{t.tn}_{t.rm}x{t.rn}_a{t.stages}" +
                                      (f"_k{t.ksplit}" if t.ksplit > 1 else ""))
    assert "GEMM_STAGES" in launches[1].source
    direct, _, _ = _run(cl_env, "Convolution", raw, arrays, DIRECT, RESIDUAL_BLOCK)
    want = _reference(x, w, (1, 1), (0, 1), RESIDUAL_BLOCK, bias, residual)
    assert got.shape == want_shape
    _check(got, direct, want, x, w, variant.name, variant.block)


CPU = DeviceTraits("CPU", compute_units=2, max_work_group_size=4096, float_vector_width=16)


@pytest.mark.parametrize("block", [2, 4])
@pytest.mark.parametrize("xs,ws,pb,pe,epilogue", [
    ((3, 24, 11, 9), (36, 24, 3, 3), (1, 1), (0, 1), RESIDUAL_BLOCK),   # 3 images, pad columns
    ((1, 64, 12, 12), (40, 64, 3, 3), (1, 1), (1, 1), BIAS_RELU),       # a partial channel block
    ((2, 24, 7, 9), (3, 8, 8, 3, 3), (1, 1), (1, 1), None),              # 3 groups of 8
    ((1, 16, 10, 12), (24, 16, 3, 3), (1, 1), (1, 1),                   # GELU last
     FusedEpilogue(bias=True, gelu="erf")),
    # V of 1.8 MB, past a core's cache with the weights within it: the GEMM walks the channel
    # blocks of a pixel tile first (_cpu_kernels.blocks_first)
    ((1, 64, 56, 56), (64, 64, 3, 3), (1, 1), (1, 1), BIAS_RELU),
])
def test_the_cpu_form_matches_numpy_and_the_direct_kernel(cl_env, xs, ws, pb, pe, epilogue,
                                                          block):
    """Winograd on a CPU device (CpuWinogradVariant): the transforms in a program of their own
    around conv_cpu_blocked's grouped 1x1 convolution (the micro-tile of 16-lane traits: float16
    vectors, float8 for 8 channels a group), with the epilogue in the output transform, against
    float64 and the direct kernel."""
    from customlayers.ops.nn._cpu_kernels import conv_blockings
    from customlayers.ops.nn._winograd import CpuWinogradVariant
    op_type, raw, arrays, want = _case(xs, ws, pb, pe, epilogue, sum(xs) + sum(ws) + block)
    x, w = arrays[:2]
    o = ws[0] * ws[1] if len(ws) == 5 else ws[0]
    variant = CpuWinogradVariant(block, conv_blockings(o // (ws[0] if len(ws) == 5 else 1),
                                                       CPU)[0])
    got, launches, listed = _run(cl_env, op_type, raw, arrays, variant, epilogue, CPU)
    assert variant in listed
    assert [l.entry for l in launches] == ["winograd_input", "conv_cpu_blocked",
                                           "winograd_output"]
    assert launches[0].source == launches[2].source != launches[1].source
    assert "#define WINOGRAD_TRANSFORMS_ONLY 1" in launches[0].source
    direct, _, _ = _run(cl_env, op_type, raw, arrays, DIRECT, epilogue)
    _check(got, direct, want, x, w, variant.name, block)


@pytest.mark.parametrize("block", [2, 4])
def test_winograd_with_split_k_gemm(cl_env, block):
    """A 4x4 output with 512 channels: 16 (F(2x2)) or 36 (F(4x4)) GEMMs of one tile each leave
    a GPU of 132 compute units idle, so the
    batched GEMM splits K and adds the partial sums (scratch 0) before the output transform."""
    rng = np.random.default_rng(22)
    x = rng.standard_normal((1, 512, 4, 4)).astype(np.float32)
    w = rng.standard_normal((64, 512, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(64).astype(np.float32)
    raw = attrs(pb=(1, 1), pe=(1, 1))
    ep = FusedEpilogue(bias=True)
    got, launches, _ = _run(cl_env, "Convolution", raw, [x, w, bias],
                            WinogradVariant(block=block), ep, LARGE_GPU)
    assert [l.entry for l in launches] == ["winograd_input", "gemm_tiled", "gemm_splitk_reduce",
                                           "winograd_output"]
    direct, _, _ = _run(cl_env, "Convolution", raw, [x, w, bias], DIRECT, ep)
    want = conv_ref(x, w, (1, 1), (1, 1), (1, 1), (1, 1)) + bias.reshape(1, -1, 1, 1)
    _check(got, direct, want, x, w, f"winograd{block}x{block} split-K", block)


def _block_model(path):
    """x -> conv3x3+bias+relu -> conv3x3 -> *scale +bias -> Add(x) -> ReLU: the second conv
    takes a folded scale, a bias, the residual and the ReLU."""
    ov = pytest.importorskip("openvino")
    ops = pytest.importorskip("openvino.opset13")
    rng = np.random.default_rng(23)

    def conv(inp, cin, cout):
        w = ops.constant((rng.standard_normal((cout, cin, 3, 3)) * 0.1).astype(np.float32))
        return ops.convolution(inp, w, [1, 1], [1, 1], [1, 1], [1, 1])

    def channels(c):
        return ops.constant(rng.standard_normal((1, c, 1, 1)).astype(np.float32))

    x = ops.parameter([2, 16, 9, 11], np.float32, name="x")
    a = ops.relu(ops.add(conv(x, 16, 16), channels(16)))
    b = ops.add(ops.multiply(conv(a, 16, 16), channels(16)), channels(16))
    y = ops.relu(ops.add(b, x))
    y.output(0).get_tensor().set_names({"y"})
    return save_ov_model(ov.Model([y], [x], "block"), path / "block.xml")


def test_network_runs_winograd_when_the_tuner_picks_it(tmp_path, test_device, monkeypatch):
    """The network on the test device as if it were a GPU (the CPU path lists no variants): the
    tuner (`fast`) times Winograd among the first candidates of both 3x3 layers; made to prefer
    it, the network runs it with the fused scale, bias, residual and ReLU."""
    from customlayers.runtime.compile import network as network_module
    from customlayers.runtime.tuning import tuning
    from customlayers.runtime.device.cache import ProgramCache
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    monkeypatch.setattr(network_module, "device_traits", lambda device: GPU)
    timed = tuning.Tuner._time

    def prefer_winograd(self, work, call, outputs):
        ns = timed(self, work, call, outputs)      # really bound and run on the device
        winograd = any("winograd" in l.label for s in work.stages for l in s.launches)
        return ns / 1000 if ns is not None and winograd else ns

    monkeypatch.setattr(tuning.Tuner, "_time", prefer_winograd)
    model = _block_model(tmp_path)
    net = Network(model, engine=Engine(test_device, cache=ProgramCache(tmp_path / "cache")),
                  tuning="fast")
    (saved,) = (tmp_path / "cache" / "tuning").glob("*.json")
    records = json.loads(saved.read_text())["choices"].values()
    assert len(records) == 2
    for record in records:   # 16 channels: F(4x4) is timed, then the few-channel kernels
        assert "winograd4x4" in record["times_us"] and record["variant"] == "winograd4x4"
    steps = [s for s in net.plan.steps if s.type.startswith("Convolution")]
    assert [s.type for s in steps] == ["Convolution+bias+relu",
                                       "Convolution+scale+bias+residual+relu"]
    for step in steps:
        assert [l.entry for l in step.launches] == ["winograd_input", "gemm_tiled",
                                                    "winograd_output"]
    x = np.random.default_rng(24).standard_normal((2, 16, 9, 11)).astype(np.float32)
    np.testing.assert_allclose(net.infer({"x": x})["y"], ov_infer(model, {"x": x})["y"],
                               rtol=1e-4, atol=1e-4)
