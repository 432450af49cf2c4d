"""The channel-blocked direct convolution (conv_direct_ocb.cl, variants `ocb{OCB}_px{PXB}` of
ops/nn/conv.py) on the test device: forced through CompileContext.variant with a GPU's traits (the
CPU path never lists it), every listed variant against a float64 numpy reference and against
the direct kernel, with every fused epilogue; where the variants are listed; and a TCN-like ONNX
model whose tuner picks them, against onnxruntime.

The tolerance. Every output sums K = CG * KH * KW products; with inputs and weights of RMS sx
and sw its RMS is about sqrt(K) * sx * sw ("scale"). Both direct kernels accumulate the K terms
in one fp32 chain, whose error measures about 1.6e-6 * scale on the TCN case; the test asks for
max error <= 2e-5 * scale (as tests/device/test_conv_winograd.py does). A missing or misplaced
term (a wrong channel, tap or pixel) is off by about sx * sw = scale / sqrt(K), thousands of
times more. The kernel also sums each output's terms in conv_direct.cl's order with the same
mad(), and on PoCL the two give the same bits: the test asks for that too (on a compiler that
contracted the two kernels differently they would differ by fp32 rounding, within the
reference tolerance).
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from customlayers.errors import BindingError
from customlayers.jit.launch import CompileContext, DeviceTraits, FusedEpilogue
from customlayers.jit.tensor import TensorDesc
from customlayers.ops import get_op
from customlayers.ops.nn._conv_variants import DirectVariant, OcbVariant
from customlayers.ops.nn.conv import InputShuffle
from launch_runner import run_launches
from test_ops_conv import conv_ref

GPU = DeviceTraits("GPU", compute_units=16, max_work_group_size=256)
CPU = DeviceTraits("CPU", compute_units=2, max_work_group_size=4096)
MAX_ERROR = 2e-5          # times the output's RMS scale (see the module docstring)


def _attrs(rank, strides=None, dilations=None, pb=None, pe=None, **extra):
    j = lambda v, d: ",".join(map(str, v if v is not None else (d,) * rank))  # noqa: E731
    return dict({"strides": j(strides, 1), "dilations": j(dilations, 1), "pads_begin": j(pb, 0),
                 "pads_end": j(pe, 0)}, **extra)


def _op(wshape, rank):
    return get_op("GroupConvolution" if len(wshape) == rank + 3 else "Convolution")


def _variants(xs, ws, raw, device=GPU, facts=()):
    """The variant objects the convolution lists, weights constant."""
    rank = len(xs) - 2
    op = _op(ws, rank)
    parsed = op.parse_attributes(raw, "layer")
    descs = [TensorDesc(xs), TensorDesc(ws)]
    out = [TensorDesc(s) for s, _ in op.infer_shapes(parsed, descs, {})]
    return op.kernel_variants(parsed, descs, out, {1: np.zeros(ws, np.float32)},
                              CompileContext(device, facts=facts))


def _listed(xs, ws, raw, device=GPU, facts=()):
    """Their names, in order (what the tuning cache and the profiles show)."""
    return tuple(v.name for v in _variants(xs, ws, raw, device, facts))


def _run(cl_env, raw, arrays, variant, epilogue=None, device=GPU):
    """(output, launches) of the convolution under `variant`, weights constant."""
    x, w = arrays[:2]
    op = _op(w.shape, x.ndim - 2)
    parsed = op.parse_attributes(raw, "layer")
    descs = [TensorDesc(a.shape) for a in arrays]
    out = [TensorDesc(s) for s, _ in op.infer_shapes(parsed, descs[:2], {})]
    ctx = CompileContext(device, epilogue=epilogue, variant=variant)
    launches = op.launches(parsed, descs, out, {1: w}, ctx)
    return run_launches(cl_env, launches, arrays, descs, out, shaped_for=ctx)[0], launches


def _reference(x, w, raw, epilogue=None, bias=None, residual=None):
    """float64: the convolution (1-D as 2-D of height 1) and the epilogue conv_epilogue.cl
    documents (bias, ReLU, residual, ReLU)."""
    one_d = x.ndim == 3
    groups = w.shape[0] if w.ndim == x.ndim + 1 else 1
    w2 = w.reshape((-1,) + w.shape[-(x.ndim - 1):])
    if one_d:
        x, w2 = x[:, :, None], w2[:, :, None]
    pairs = [[int(v) for v in raw[k].split(",")]
             for k in ("strides", "dilations", "pads_begin", "pads_end")]
    if one_d:
        pairs = [[1 if k < 2 else 0] + p for k, p in enumerate(pairs)]
    y = conv_ref(x, w2, *pairs, groups)
    y = y[:, :, 0] if one_d else y
    if epilogue is not None:
        shape = (1, -1) + (1,) * (y.ndim - 2)
        y = y + bias.reshape(shape) if epilogue.bias else y
        y = np.maximum(y, 0) if epilogue.pre_relu else y
        y = y + residual if epilogue.residual else y
        y = np.maximum(y, 0) if epilogue.relu else y
    return y


def _scale(x, w):
    window = w[0].size if w.ndim == x.ndim else w[0, 0].size
    return np.sqrt(window * np.mean(x.astype(np.float64) ** 2) *
                   np.mean(w.astype(np.float64) ** 2))


def _check_every_variant(cl_env, raw, arrays, epilogue, want, label):
    """Every listed ocb variant against `want` and, bit for bit, against the direct kernel;
    returns the variants checked."""
    x, w = arrays[:2]
    variants = [v for v in _variants(x.shape, w.shape, raw) if isinstance(v, OcbVariant)]
    assert variants, f"{label}: no ocb variant listed"
    direct, _ = _run(cl_env, raw, arrays, DirectVariant(), epilogue)
    limit = MAX_ERROR * _scale(x, w)
    for v in variants:
        got, launches = _run(cl_env, raw, arrays, v, epilogue)
        assert [launch.entry for launch in launches] == ["conv_direct_ocb"]
        assert launches[0].label.endswith(f"_{v.name}")
        err = np.abs(got - want).max()
        assert err <= limit, f"{label} {v}: error {err:.3g} > {limit:.3g}"
        np.testing.assert_array_equal(got, direct, err_msg=f"{label} {v} vs direct")
    return [v.name for v in variants]


CASES = [
    # (label, x shape, w shape (OIX / OIYX; GOIYX grouped), attrs)
    # the TCN's layer, smaller: kernel 7, dilation 4, the ONNX export's pads on both sides;
    # OG = 25 is no multiple of 4, 8 or 28; OW = 150 spans 2-3 work-groups of 64, the last cut
    ("tcn", (2, 25, 150), (25, 25, 7), _attrs(1, dilations=(4,), pb=(24,), pe=(24,))),
    # the same with the causal Slice folded (passes/window_folding.py): pads_end shrinks by
    # the cut, the output is the input's length
    ("tcn folded slice", (2, 25, 150), (25, 25, 7), _attrs(1, dilations=(4,), pb=(24,),
                                                          pe=(0,))),
    # 2-D, stride 2, asymmetric pads, an odd output width (PXB = 2 leaves a half pair)
    ("2-D stride 2", (2, 6, 11, 13), (10, 6, 3, 3),
     _attrs(2, strides=(2, 2), pb=(1, 0), pe=(0, 2))),
    # two groups of 9 output channels (blocks of 12 and of 8: both partial), dilation 2
    ("grouped", (2, 12, 9, 10), (2, 9, 6, 3, 3),
     _attrs(2, dilations=(2, 1), pb=(2, 1), pe=(2, 1))),
    # more than 32 channels per group: only the block of 8 (36 = 4 blocks and a half)
    ("wide", (1, 8, 70), (36, 8, 3), _attrs(1, pb=(1,), pe=(1,))),
    # a 1x1 window with stride 1, no padding
    ("1x1", (1, 7, 5, 6), (13, 7, 1, 1), _attrs(2)),
]


@pytest.mark.parametrize("label,xs,ws,raw", CASES, ids=[c[0] for c in CASES])
def test_every_ocb_variant_matches_numpy_and_the_direct_kernel(cl_env, label, xs, ws, raw):
    rng = np.random.default_rng(sum(xs) + sum(ws))
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    want = _reference(x, w, raw)
    checked = _check_every_variant(cl_env, raw, [x, w], None, want, label)
    assert any(v.endswith("_px2") for v in checked)


EPILOGUES = [
    FusedEpilogue(bias=True),
    FusedEpilogue(bias=True, relu=True),
    FusedEpilogue(bias=True, relu=True, residual=True),
    # the TCN block's second convolution: bias, ReLU, the residual Add, ReLU
    FusedEpilogue(bias=True, relu=True, residual=True, pre_relu=True),
]


@pytest.mark.parametrize("epilogue", EPILOGUES,
                         ids=["bias", "bias+relu", "bias+residual+relu",
                              "bias+relu+residual+relu"])
def test_every_ocb_variant_applies_the_fused_epilogue(cl_env, epilogue):
    rng = np.random.default_rng(31)
    raw = _attrs(1, dilations=(2,), pb=(12,), pe=(0,))
    x = rng.standard_normal((2, 25, 90)).astype(np.float32)
    w = rng.standard_normal((25, 25, 7)).astype(np.float32)
    bias = rng.standard_normal(25).astype(np.float32)
    # the residual on the output's scale, so that the ReLUs cut about half of every stage
    residual = (rng.standard_normal((2, 25, 90)) * _scale(x, w)).astype(np.float32)
    arrays = [x, w, bias] + ([residual] if epilogue.residual else [])
    want = _reference(x, w, raw, epilogue, bias, residual)
    checked = _check_every_variant(cl_env, raw, arrays, epilogue, want, epilogue)
    assert len(checked) == 4


def test_a_grouped_epilogue_reads_each_channels_bias_and_residual(cl_env):
    """Two groups of 9 channels in blocks of 12 and 8: the second group's bias and residual
    are found past the first group's (a block indexing its group's channels from 0 would not
    be)."""
    rng = np.random.default_rng(32)
    raw = _attrs(2, pb=(1, 1), pe=(1, 1))
    x = rng.standard_normal((2, 12, 6, 7)).astype(np.float32)
    w = rng.standard_normal((2, 9, 6, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(18).astype(np.float32)
    residual = (rng.standard_normal((2, 18, 6, 7)) * _scale(x, w)).astype(np.float32)
    epilogue = EPILOGUES[-1]
    want = _reference(x, w, raw, epilogue, bias, residual)
    _check_every_variant(cl_env, raw, [x, w, bias, residual], epilogue, want, "grouped")


# -- where the variants are listed -------------------------------------------------------------
TCN = _attrs(1, dilations=(8,), pb=(48,), pe=(0,))


@pytest.mark.parametrize("batch", [1, 64])
def test_tcn_layer_lists_two_ocb_variants_where_fast_tuning_times_them(batch):
    """At most 32 channels per group: the GEMM heuristic's choice stays first (what tuning
    `off` runs), then direct, the small block at two pixels and the whole group at one (the
    first four are what `fast` times), the other blocked variants after the GEMMs."""
    listed = _listed((batch, 25, 784), (25, 25, 7), TCN)
    assert listed[0].startswith("gemm")
    assert listed[1:4] == ("direct", "ocb8_px2", "ocb28_px1")
    assert listed[4].startswith("gemm")
    assert listed[-2:] == ("ocb28_px2", "ocb8_px1")
    assert sum(v.startswith("ocb") for v in listed) == 4


def test_a_wide_3x3_layer_keeps_winograd_among_the_first_four():
    listed = _listed((1, 16, 12, 12), (16, 16, 3, 3), _attrs(2, pb=(1, 1), pe=(1, 1)))
    # 2304 outputs do not fill 16 compute units: the channel-split kernels come before the
    # blocked ones (test_conv_split.py)
    assert listed[:5] == (listed[0], "winograd4x4", "direct", "split4", "split8")
    assert "winograd2x2" in listed[5:]
    assert listed[-4:] == ("ocb8_px2", "ocb16_px1", "ocb16_px2", "ocb8_px1")


def test_few_channels_list_only_the_block_of_8():
    listed = _listed((1, 4, 30), (6, 4, 3), _attrs(1))
    assert listed[1:4] == ("direct", "ocb8_px2", "ocb8_px1")
    assert sum(v.startswith("ocb") for v in listed) == 2


def test_more_than_32_channels_append_the_block_of_8_at_the_end():
    """A GEMM tile is mostly full: the blocked kernel is left to `--tuning full`."""
    listed = _listed((1, 64, 14, 14), (64, 64, 3, 3), _attrs(2, pb=(1, 1), pe=(1, 1)))
    assert not any(v.startswith("ocb") for v in listed[:-3])
    assert listed[-3:] == ("ocb8_px2", "ocb8_px1", "direct")


def test_one_output_pixel_wide_lists_no_pair_of_pixels():
    listed = _listed((1, 16, 9, 3), (12, 16, 3, 3), _attrs(2))        # OW = 1
    assert [v for v in listed if v.startswith("ocb")] == ["ocb8_px1", "ocb12_px1"]


def test_a_block_whose_weights_overflow_local_memory_is_left_out():
    # 64 * 3 * 3 weights per channel: 28 channels take 64.5 KiB, 8 take 18 KiB (limit 32 KiB)
    listed = _listed((1, 64, 10, 10), (28, 64, 3, 3), _attrs(2))
    assert [v for v in listed if v.startswith("ocb")] == ["ocb8_px2", "ocb8_px1"]
    assert not any(v.startswith("ocb") for v in _listed((1, 512, 6, 6), (16, 512, 3, 3),
                                                        _attrs(2)))


@pytest.mark.parametrize("xs,ws,raw,device", [
    ((1, 25, 50), (25, 25, 7), TCN, CPU),                         # the CPU path's own kernels
    ((1, 4, 6, 6, 6), (8, 4, 3, 3, 3), _attrs(3), GPU),          # 3-D: conv3d.cl only
    ((1, 8, 9, 9), (8, 1, 1, 3, 3), _attrs(2), GPU),             # depthwise: direct
    ((1, 8, 9, 9), (4, 8, 3, 3), _attrs(2), GPU),                # 4 channels: direct
    ((1, 25, 50), (25, 25, 7), TCN,                               # a GPU of 32-item groups
     DeviceTraits("GPU", compute_units=16, max_work_group_size=32)),
], ids=["cpu", "3-D", "depthwise", "4 channels", "small work-groups"])
def test_ocb_is_not_listed_where_it_does_not_apply(xs, ws, raw, device):
    assert not any(v.startswith("ocb") for v in _listed(xs, ws, raw, device))


def test_a_folded_channel_shuffle_lists_no_ocb_and_refuses_one():
    raw, shuffled = _attrs(2), (InputShuffle(2),)
    op = get_op("Convolution")
    parsed = op.parse_attributes(raw, "layer")
    descs = [TensorDesc((1, 8, 6, 6)), TensorDesc((8, 8, 3, 3))]
    out = [TensorDesc(s) for s, _ in op.infer_shapes(parsed, descs, {})]
    with pytest.raises(BindingError, match="cannot be folded"):
        _listed((1, 8, 6, 6), (8, 8, 3, 3), raw, facts=shuffled)
    with pytest.raises(BindingError, match="cannot be folded"):
        op.launches(parsed, descs, out, {}, CompileContext(GPU, variant=OcbVariant(8, 1),
                                                           facts=shuffled))


def test_a_variant_that_does_not_apply_is_refused():
    op = get_op("Convolution")
    parsed = op.parse_attributes(TCN, "layer")
    descs = [TensorDesc((1, 25, 100)), TensorDesc((25, 25, 7))]
    out = [TensorDesc(s) for s, _ in op.infer_shapes(parsed, descs, {})]
    with pytest.raises(BindingError, match="variant ocb12_px1 does not apply"):
        op.launches(parsed, descs, out, {}, CompileContext(GPU, variant=OcbVariant(12, 1)))


# -- in a network --------------------------------------------------------------------------------
def _tcn_model(path, batch, length, cin=3, channels=25, kernel=7, levels=(1, 4)):
    """The TCN of bench/gpu_peers.py, smaller: per level two causal convolutions (padding
    (k-1)*d on both sides, then a Slice), each with its bias and a ReLU, a 1x1 downsample where
    the channels change, the residual Add and a ReLU."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(41)
    init, nodes = [], []

    def const(value, name, dtype=np.float32):
        init.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    x, c_in = "x", cin
    for level, d in enumerate(levels):
        pad = (kernel - 1) * d
        h = x
        for j in (1, 2):
            n = f"l{level}c{j}"
            w = rng.standard_normal((channels, c_in if j == 1 else channels, kernel))
            nodes += [helper.make_node("Conv", [h, const(w / np.sqrt(w[0].size), n + "w"),
                                                const(rng.standard_normal(channels) * 0.1,
                                                      n + "b")],
                                       [n], pads=[pad, pad], dilations=[d],
                                       kernel_shape=[kernel]),
                      helper.make_node("Slice", [n, const([0], n + "s0", np.int64),
                                                 const([-pad], n + "s1", np.int64),
                                                 const([2], n + "ax", np.int64)], [n + "sl"]),
                      helper.make_node("Relu", [n + "sl"], [n + "r"])]
            h = n + "r"
        res = x
        if c_in != channels:
            w = rng.standard_normal((channels, c_in, 1))
            nodes.append(helper.make_node("Conv", [x, const(w, f"l{level}dw"),
                                                   const(np.zeros(channels), f"l{level}db")],
                                          [f"l{level}d"], kernel_shape=[1]))
            res = f"l{level}d"
        x, c_in = "y" if level == len(levels) - 1 else f"l{level}o", channels
        nodes += [helper.make_node("Add", [h, res], [f"l{level}a"]),
                  helper.make_node("Relu", [f"l{level}a"], [x])]
    graph = helper.make_graph(
        nodes, "tcn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, cin, length])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, channels, length])], init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8      # what every onnxruntime of opset 13 reads (a newer onnx writes 14)
    onnx.save(model, path / "tcn.onnx")
    return path / "tcn.onnx"


def test_network_runs_the_ocb_kernel_when_the_tuner_picks_it(tmp_path, test_device, monkeypatch):
    """The TCN on the test device as if it were a GPU (on a CPU device the network takes the
    CPU kernels): the tuner (`fast`) times two ocb variants among the first candidates of every
    convolution; made to prefer them, the network runs conv_direct_ocb.cl with the folded
    causal slices and the fused bias, ReLU, residual and ReLU, and matches onnxruntime."""
    ort = pytest.importorskip("onnxruntime")
    from customlayers.runtime.compile import network as network_module
    from customlayers.runtime.tuning import tuning
    from customlayers.runtime.device.cache import ProgramCache
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    # one compute unit: the model's 3000 outputs per layer fill it, so the channel-split
    # kernels (for layers that leave a GPU idle) are not listed
    monkeypatch.setattr(network_module, "device_traits",
                        lambda device: DeviceTraits("GPU", compute_units=1,
                                                    max_work_group_size=256))
    timed = tuning.Tuner._time

    def prefer_ocb(self, work, call, outputs):
        ns = timed(self, work, call, outputs)      # really bound and run on the device
        ocb = any(launch.entry == "conv_direct_ocb"
                  for stage in work.stages for launch in stage.launches)
        return ns / 1000 if ns is not None and ocb else ns

    monkeypatch.setattr(tuning.Tuner, "_time", prefer_ocb)
    model = _tcn_model(tmp_path, batch=2, length=60, levels=(1,))
    # the convolutions themselves: not one TemporalBlocks (a GPU's default for this small TCN)
    net = Network(model, engine=Engine(test_device, cache=ProgramCache(tmp_path / "cache")),
                  tuning="fast", fuse_temporal_blocks=False)
    assert sum(m.startswith("folded the causal Slice") for m in net.messages) == 2
    (saved,) = (tmp_path / "cache" / "tuning").glob("*.json")
    records = list(json.loads(saved.read_text())["choices"].values())
    assert len(records) == 3                   # two 7-tap convolutions and the 1x1 downsample
    for record in records:
        assert {"direct", "ocb8_px2", "ocb28_px1"} <= set(record["times_us"])
        assert record["variant"] in ("ocb8_px2", "ocb28_px1")
    steps = [s for s in net.plan.steps if s.type.startswith("Convolution")]
    assert sorted(s.type for s in steps) == ["Convolution+bias", "Convolution+bias+relu",
                                             "Convolution+bias+relu+residual+relu"]
    for step in steps:
        assert [launch.entry for launch in step.launches] == ["conv_direct_ocb"]
    x = np.random.default_rng(42).standard_normal((2, 3, 60)).astype(np.float32)
    want = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    # outputs of RMS ~1 after sums of at most 175 terms: fp32 rounding is ~1e-6
    np.testing.assert_allclose(net.infer({"x": x})["y"], want, rtol=1e-4, atol=1e-4)
