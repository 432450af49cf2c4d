"""Kernel variants as objects (jit/variant.py) without a device: what Convolution, MatMul,
pooling and a custom layer list for a call, under the names the tuning cache keeps, whether each
applies, that the op runs the object it is handed; the one epilogue wiring of conv and MatMul;
and the typed facts graph passes hand to ops (conv.InputShuffle, matmul.PickLast)."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.errors import BindingError
from customlayers.jit.launch import CompileContext, DeviceTraits, FusedEpilogue, KernelLaunch
from customlayers.jit.layer import LayerCall
from customlayers.jit.tensor import TensorDesc
from customlayers.jit.variant import KernelVariant, variant_named
from customlayers.ops import get_op
from customlayers.ops.nn._conv_variants import DirectVariant, OcbVariant, SplitVariant
from customlayers.ops.nn._cpu_kernels import CpuBlockedVariant
from customlayers.ops.nn.pooling import PoolRowsVariant
from customlayers.ops.nn._epilogue import wire_epilogue
from customlayers.ops.nn._variants import GemmVariant
from customlayers.ops.nn._winograd import WinogradVariant
from customlayers.ops.nn.conv import InputShuffle, takes_shuffled_input
from customlayers.ops.nn.matmul import GemvVariant, PickLast, RowSoftmaxVariant

GPU = DeviceTraits("GPU", compute_units=16, max_work_group_size=256)
H100 = DeviceTraits("GPU", compute_units=132, max_work_group_size=1024)
CPU = DeviceTraits("CPU", compute_units=2, max_work_group_size=4096, float_vector_width=8)
TCN = {"strides": "1", "dilations": "8", "pads_begin": "48", "pads_end": "0"}
CONV_3X3 = {"strides": "1,1", "dilations": "1,1", "pads_begin": "1,1", "pads_end": "1,1"}


def _conv(xs, ws, raw, device=GPU, const=True, facts=(), variant=None, epilogue=None):
    """(op, parsed attrs, input descs, output descs, consts, context) of a convolution call."""
    op = get_op("GroupConvolution" if len(ws) == len(xs) + 1 else "Convolution")
    attrs = op.parse_attributes(raw, "conv")
    descs = [TensorDesc(xs), TensorDesc(ws)]
    out = [TensorDesc(s) for s, _ in op.infer_shapes(attrs, descs, {})]
    consts = {1: np.zeros(ws, np.float32)} if const else {}
    ctx = CompileContext(device, epilogue=epilogue, variant=variant, facts=facts)
    return op, attrs, descs, out, consts, ctx


def _listed(*args, **kwargs):
    op, attrs, descs, out, consts, ctx = _conv(*args, **kwargs)
    return op.kernel_variants(attrs, descs, out, consts, ctx)


def test_a_convolution_lists_variant_objects_under_the_cached_names():
    listed = _listed((1, 25, 784), (25, 25, 7), TCN)
    assert all(isinstance(v, KernelVariant) for v in listed)
    names = [v.name for v in listed]
    assert len(set(names)) == len(names)                      # a name is one variant
    assert isinstance(listed[0], GemmVariant) and names[0] == "gemm32x64_2x4_k1"
    assert names[1:4] == ["direct", "ocb8_px2", "ocb28_px1"]
    assert listed[1:4] == (DirectVariant(), OcbVariant(8, 2), OcbVariant(28, 1))
    assert variant_named(listed, "ocb28_px1") == OcbVariant(28, 1)
    assert variant_named(listed, "ocb12_px1") is None
    # what the tuner times at batch 1 on a large GPU: the channel-split kernels
    assert [v.name for v in _listed((1, 25, 784), (25, 25, 7), TCN, H100)][1:4] == \
        ["direct", "split4", "split8"]


def test_winograd_and_gemm_variants_are_named_from_their_fields():
    listed = _listed((1, 64, 28, 28), (64, 64, 3, 3), CONV_3X3)
    assert listed[1] == WinogradVariant(block=4) and listed[1].name == "winograd4x4"
    assert listed[2] == WinogradVariant() and listed[2].name == "winograd2x2"
    tilings = [v for v in listed if isinstance(v, WinogradVariant) and v.tiling is not None]
    assert [v.name for v in tilings] == \
        [f"winograd{v.block}x{v.block}_{v.tiling.name}" for v in tilings]
    assert {v.block for v in tilings} == {2, 4}
    assert GemmVariant(64, 32, 4, 2, 3).name == "gemm64x32_4x2_k3"


def test_each_listed_variant_applies_and_the_op_runs_the_object_it_is_handed():
    op, attrs, descs, out, consts, ctx = _conv((1, 25, 784), (25, 25, 7), TCN)
    plan = op.plan(attrs, descs, out, consts, ctx)
    for v in op.kernel_variants(attrs, descs, out, consts, ctx):
        assert v.applies(plan), v.name
        launches = op.launches(attrs, descs, out, consts, CompileContext(GPU, variant=v))
        assert all(isinstance(launch, KernelLaunch) for launch in launches)
        if not isinstance(v, GemmVariant):
            assert launches[-1].label.endswith(v.name), v.name
    assert not OcbVariant(12, 1).applies(plan) and not SplitVariant(4).applies(plan)
    assert not WinogradVariant().applies(plan)                # a 1-D window of 7


@pytest.mark.parametrize("variant,message", [
    (OcbVariant(12, 1), "variant ocb12_px1 does not apply to this convolution"),
    (WinogradVariant(), "variant winograd2x2 needs a 3x3, stride-1 window and constant weights"),
])
def test_a_variant_that_does_not_apply_is_refused_naming_the_layer(variant, message):
    op, attrs, descs, out, consts, ctx = _conv((1, 25, 100), (25, 25, 7), TCN, variant=variant)
    with pytest.raises(BindingError, match=f"layer 'conv' \\(Convolution\\): {message}"):
        op.launches(attrs, descs, out, consts, ctx)


def test_a_cpu_device_lists_its_own_variants_and_one_kernel_lists_none():
    listed = _listed((1, 16, 14, 14), (32, 16, 3, 3), CONV_3X3, CPU)
    blocked = [v for v in listed if isinstance(v, CpuBlockedVariant)]
    assert len(blocked) > 1 and [v.name for v in listed][0] == "cpu16x6"
    # Winograd's CPU form after them: too few channels (16) to come first
    assert [v.name for v in listed[len(blocked):]] == ["cpu_winograd4x4_16x6",
                                                       "cpu_winograd2x2_16x6"]
    # 128 channels over 28x28 (49 tiles of F(4x4)): first, then the micro-tiles; 256 over
    # 14x14 (16 tiles): after them
    wide = [v.name for v in _listed((1, 128, 28, 28), (128, 128, 3, 3), CONV_3X3, CPU)]
    assert wide[0] == "cpu_winograd4x4_16x6" and wide[1] == "cpu16x6"
    narrow = [v.name for v in _listed((1, 256, 14, 14), (256, 256, 3, 3), CONV_3X3, CPU)]
    assert narrow[0] == "cpu16x6" and "cpu_winograd4x4_16x6" in narrow
    # first again where batch 16 gives 7x7 planes 64 tiles (49 of each 64 outputs exist); not
    # where 5x5 planes leave most of each tile outside (batch 12: 48 tiles of 25 in 64), nor
    # where V passes 16 MiB (64 channels over 224x224: 29 MB)
    for xs, ws, first in (((16, 512, 7, 7), (512, 512, 3, 3), True),
                          ((12, 64, 5, 5), (64, 64, 3, 3), False),
                          ((1, 64, 224, 224), (64, 64, 3, 3), False)):
        names = [v.name for v in _listed(xs, ws, CONV_3X3, CPU)]
        assert names[0].startswith("cpu_winograd4x4") == first, (xs, names[:2])
    assert _listed((1, 16, 14, 14), (32, 16, 3, 3), CONV_3X3, CPU, const=False) == ()
    op, attrs, descs, out, consts, ctx = _conv((1, 16, 14, 14), (32, 16, 3, 3), CONV_3X3, CPU,
                                               const=False)
    (launch,) = op.launches(attrs, descs, out, consts, ctx)
    assert launch.entry == "conv_cpu"


def test_matmul_lists_gemm_tilings_and_one_kernel_for_a_row_or_a_softmax():
    op = get_op("MatMul")
    attrs = op.parse_attributes({}, "fc")

    def listed(a, b, ctx=CompileContext(GPU)):
        descs = [TensorDesc(a), TensorDesc(b)]
        out = [TensorDesc(s) for s, _ in op.infer_shapes(attrs, descs, {})]
        plan = op.plan(attrs, descs, out, ctx)
        return op.kernel_variants(attrs, descs, out, {}, ctx), plan

    gemms, plan = listed((70, 90), (90, 50))
    assert len(gemms) == 16 and all(isinstance(v, GemmVariant) for v in gemms)
    assert gemms[0].name == "gemm64x64_4x4_k1" and all(v.applies(plan) for v in gemms)
    assert listed((1, 90), (90, 50))[0] == ()                 # M == 1: the matrix-vector kernel
    from customlayers.ops.nn.matmul import matmul_variants
    assert matmul_variants(listed((1, 90), (90, 50))[1]) == (GemvVariant(cpu=False),)
    ctx = CompileContext(GPU, epilogue=FusedEpilogue(row_softmax="softmax"))
    assert matmul_variants(listed((7, 40), (40, 20), ctx)[1]) == (RowSoftmaxVariant(),)


@pytest.mark.parametrize("width", [4, 8, 16, 32])
def test_matmul_on_a_cpu_takes_the_lanes_of_the_conv_kernels(width):
    """The CPU GEMM's vectors have the lanes _cpu_kernels.kernel_vector_width gives the
    convolutions (one rule for both: 16 where the device prefers 16 or more, else 8)."""
    from customlayers.ops.nn._cpu_kernels import kernel_vector_width
    from customlayers.ops.nn.matmul import CpuGemmVariant, matmul_variants
    op = get_op("MatMul")
    device = DeviceTraits("CPU", compute_units=2, max_work_group_size=4096,
                          float_vector_width=width)
    for tb in (False, True):
        attrs = op.parse_attributes({"transpose_b": str(tb).lower()}, "fc")
        descs = [TensorDesc((70, 90)), TensorDesc((50, 90) if tb else (90, 50))]
        out = [TensorDesc(s) for s, _ in op.infer_shapes(attrs, descs, {})]
        listed = matmul_variants(op.plan(attrs, descs, out, CompileContext(device)))
        cpu = [v for v in listed if isinstance(v, CpuGemmVariant)]
        assert cpu and cpu == list(listed[:len(cpu)])
        assert {v.vw for v in cpu} == {kernel_vector_width(device)}


def test_pooling_on_a_cpu_lists_rows_per_work_item():
    op = get_op("MaxPool")
    attrs = op.parse_attributes({"strides": "2,2", "pads_begin": "0,0", "pads_end": "0,0",
                                 "kernel": "3,3"}, "pool")
    descs = [TensorDesc((1, 8, 56, 56))]
    out = [TensorDesc(s, d) for s, d in op.infer_shapes(attrs, descs, {})]
    listed = op.kernel_variants(attrs, descs, out, {}, CompileContext(CPU))
    assert listed == (PoolRowsVariant(13), PoolRowsVariant(27))
    assert [v.name for v in listed] == ["rows13", "rows27"]
    assert op.kernel_variants(attrs, descs, out, {}, CompileContext(GPU)) == ()
    (launch,) = op.launches(attrs, descs, out, {}, CompileContext(CPU, variant=listed[1]))
    assert launch.label == "maxpool_3x3_cpu_rows27"


def test_a_custom_layers_local_size_variants_keep_their_names():
    pytest.importorskip("pyopencl")
    from customlayers.runtime.layers.simplegpu import LocalSizeVariant
    assert LocalSizeVariant().name == "driver"
    assert LocalSizeVariant((8, 16, 1)).name == "local8x16x1"
    launch = KernelLaunch(source="", entry="k", args=(), global_size=(64, 32, 1), label="relu")
    (open_,) = LocalSizeVariant((8, 16, 1)).launches(launch)
    assert open_.local_size == (8, 16, 1) and open_.label == "relu_local8x16x1"
    assert LocalSizeVariant().launches(launch) == [launch]


# -- the one epilogue wiring --------------------------------------------------------------------
def test_conv_and_matmul_wire_a_fused_epilogue_alike():
    ep = FusedEpilogue(bias=True, relu=True, residual=True, pre_relu=True)
    conv = _conv((1, 8, 6, 6), (16, 8, 1, 1), CONV_3X3 | {"pads_begin": "0,0",
                                                          "pads_end": "0,0"}, epilogue=ep)
    op, attrs, descs, out, consts, ctx = conv
    descs += [TensorDesc((16,)), TensorDesc(out[0].shape)]
    wired = wire_epilogue(op, attrs, ep, descs, out[0], 16)
    assert wired.flags == dict(FUSED_BIAS=1, FUSED_RELU=1, FUSED_GELU=0, FUSED_RESIDUAL=1,
                               FUSED_PRE_RELU=1)
    assert [(a.kind, a.index) for a in wired.args] == [("input", 0), ("input", 1),
                                                       ("output", 0), ("input", 2), ("input", 3)]
    plan = op.plan(attrs, descs, out, consts, ctx)
    assert plan.args == wired.args
    assert all(plan.sizes[k] == v for k, v in wired.flags.items())
    mm = get_op("MatMul")
    mm_attrs = mm.parse_attributes({}, "fc")
    mm_descs = [TensorDesc((4, 8)), TensorDesc((8, 16)), TensorDesc((16,)), TensorDesc((4, 16))]
    mm_plan = mm.plan(mm_attrs, mm_descs, [TensorDesc((4, 16))], CompileContext(epilogue=ep))
    assert mm_plan.args == wired.args
    assert all(f"#define {k} {v}" in mm_plan.epilogue for k, v in wired.flags.items())


@pytest.mark.parametrize("op_type", ["Convolution", "MatMul"])
def test_a_fused_tensor_that_does_not_fit_is_refused_naming_the_layer(op_type):
    op = get_op(op_type)
    attrs = op.parse_attributes(CONV_3X3 if op_type == "Convolution" else {}, "layer")
    descs = [TensorDesc((4, 8)), TensorDesc((8, 16)), TensorDesc((15,)), TensorDesc((4, 16))]
    with pytest.raises(BindingError, match=f"layer 'layer' \\({op_type}\\): the fused bias has "
                                           "15 values for 16 output channels"):
        wire_epilogue(op, attrs, FusedEpilogue(bias=True), descs, TensorDesc((4, 16)), 16)
    with pytest.raises(BindingError, match=r"the fused residual has shape \[4, 16\], the "
                                           r"output \[5, 16\]"):
        wire_epilogue(op, attrs, FusedEpilogue(residual=True), descs, TensorDesc((5, 16)), 16)


# -- typed facts from passes ------------------------------------------------------------------
def test_a_folded_shuffle_reaches_the_convolution_as_a_typed_fact():
    op, attrs, descs, out, consts, ctx = _conv((1, 6, 9, 9), (6, 1, 1, 3, 3), CONV_3X3,
                                               facts=(InputShuffle(3),))
    assert "customlayers.input_shuffle_group" not in attrs    # not an attribute any more
    plan = op.plan(attrs, descs, out, consts, ctx)
    assert plan.shuffle == 3 and plan.sizes["IN_CHANNEL(c)"] == "(((c) % 3) * (C / 3) + (c) / 3)"
    unshuffled = op.plan(*_conv((1, 6, 9, 9), (6, 1, 1, 3, 3), CONV_3X3)[1:])
    assert "IN_CHANNEL(c)" not in unshuffled.sizes


def test_the_pass_and_the_op_share_one_rule_for_a_shuffled_input():
    assert takes_shuffled_input("GroupConvolution", (1, 6, 9, 9), (6, 1, 1, 3, 3), 3)
    assert takes_shuffled_input("Convolution", (1, 1, 9, 9), (4, 1, 3, 3), 1) is False
    assert not takes_shuffled_input("GroupConvolution", (1, 6, 9, 9), (3, 2, 2, 3, 3), 3)
    assert not takes_shuffled_input("GroupConvolution", (1, 6, 9, 9), (1, 6, 6, 3, 3), 2)
    assert not takes_shuffled_input("GroupConvolution", (1, 6, 9), (6, 1, 1, 3), 3)   # 1-D
    assert not takes_shuffled_input("GroupConvolution", (1, 6, 9, 9), (6, 1, 1, 3, 3), 4)
    assert not takes_shuffled_input("MaxPool", (1, 6, 9, 9), (6, 1, 1, 3, 3), 3)
    op, attrs, descs, out, consts, ctx = _conv((1, 8, 6, 6), (8, 8, 3, 3), CONV_3X3,
                                               facts=(InputShuffle(2),))
    with pytest.raises(BindingError, match="a channel shuffle of group 2 cannot be folded"):
        op.launches(attrs, descs, out, consts, ctx)


def test_a_picked_a_reaches_the_matmul_as_a_typed_fact():
    op = get_op("MatMul")
    attrs = op.parse_attributes({}, "fc")
    assert "customlayers.a_pick_last" not in attrs
    call = LayerCall(name="fc", where="fc", type="MatMul", attrs=attrs,
                     inputs=[TensorDesc((1, 4, 5)), TensorDesc((4, 3))], consts={},
                     context=CompileContext(facts=(PickLast(-1),)))
    (out,) = op.outputs(call)
    assert out.shape == (1, 3)
    plan = op.plan(attrs, call.inputs, [out], call.context)
    assert plan.sizes["A_STEP"] == 5 and plan.sizes["A_PICK"] == 4
    with pytest.raises(BindingError):
        op.outputs(LayerCall(name="fc", where="fc", type="MatMul", attrs=attrs,
                             inputs=call.inputs, consts={}))     # [1, 4, 5] x [4, 3]


def test_a_context_answers_a_fact_by_its_class():
    ctx = CompileContext(facts=(InputShuffle(2), PickLast(3)))
    assert ctx.fact(PickLast) == PickLast(3) and ctx.fact(InputShuffle).group == 2
    assert CompileContext().fact(PickLast) is None


def _sources(xs, ws, raw, variant, device=GPU):
    op, attrs, descs, out, consts, ctx = _conv(xs, ws, raw, device, variant=variant)
    return [(launch.entry, launch.source, launch.options)
            for launch in op.launches(attrs, descs, out, consts, ctx)]


STRIDED = {"strides": "2,2", "dilations": "2,2", "pads_begin": "2,1", "pads_end": "0,2"}


@pytest.mark.parametrize("variant", [GemmVariant(64, 64, 4, 4), GemmVariant(32, 32, 2, 2, 4),
                                     DirectVariant(), OcbVariant(8, 2), SplitVariant(4),
                                     WinogradVariant(GemmVariant(32, 32, 2, 2))],
                         ids=lambda v: v.name)
def test_every_shape_of_a_variant_runs_one_program(variant):
    """On a CPU device channels, planes, batch, pads (and, but for Winograd, strides and
    dilations) are kernel arguments: two layers of one variant and window build one program.
    On a GPU they are #defines (_sizes.baked: measured faster there), a program per shape."""
    other = CONV_3X3 if isinstance(variant, WinogradVariant) else STRIDED
    small = isinstance(variant, SplitVariant)        # listed for layers that leave a GPU idle
    shapes = (((1, 24, 6, 6) if small else (2, 24, 20, 18), (40, 24, 3, 3), CONV_3X3),
              ((1, 16, 9, 7) if small else (3, 16, 11, 9), (48, 16, 3, 3), other))
    try:
        one, two = (_sources(x, w, raw, variant, CPU) for x, w, raw in shapes)
        assert one == two
    except BindingError:              # a GPU-only variant (direct, ocb, split)
        pass
    one, two = (_sources(x, w, raw, variant, GPU) for x, w, raw in shapes)
    assert one != two


def test_every_shape_of_a_cpu_variant_runs_one_program():
    variant = CpuBlockedVariant(conv_cpu_variants_default())
    one = _sources((1, 24, 20, 18), (40, 24, 3, 3), CONV_3X3, variant, CPU)
    two = _sources((2, 16, 11, 9), (48, 16, 3, 3), STRIDED, variant, CPU)
    assert one == two


def conv_cpu_variants_default():
    from customlayers.ops.nn._cpu_kernels import conv_blockings
    return conv_blockings(40, CPU)[0]


def test_every_shape_of_a_matmul_runs_one_program():
    op = get_op("MatMul")
    attrs = op.parse_attributes({}, "mm")

    def sources(a, b, device):
        descs = [TensorDesc(a), TensorDesc(b)]
        out = [TensorDesc(s) for s, _ in op.infer_shapes(attrs, descs, {})]
        return [(launch.source, launch.options) for launch in
                op.launches(attrs, descs, out, {}, CompileContext(device))]

    assert sources((2, 40, 33), (2, 33, 50), CPU) == sources((2, 35, 17), (2, 17, 60), CPU)
    assert sources((1, 70), (70, 9), CPU) == sources((1, 30), (30, 100), CPU)
    # a GPU's sizes are #defines (_sizes.baked)
    assert sources((2, 40, 33), (2, 33, 50), GPU) != sources((2, 35, 17), (2, 17, 60), GPU)


def test_the_gemm_ranking_offers_the_tilings_that_won_on_an_h100():
    """The tuner's fast mode times the first four: the legacy tiling, then the three cheapest
    estimates, which for these BERT/ViT shapes (132 compute units) held the H100's fastest."""
    from customlayers.ops.nn._variants import gemm_variants, wave_fill
    first4 = lambda m, n, k: [v.name for v in gemm_variants(m, n, k, 1, 264)[:4]]  # noqa: E731
    assert "gemm128x128_16x8_k1" in first4(4096, 3072, 768)
    # a long K is split to round the waves up; a K of 768 never beyond what fills the device
    assert any(v.endswith(("_k2", "_k3", "_k4")) for v in first4(4096, 768, 3072))
    assert all(v.endswith("_k1") for v in first4(4096, 768, 768))
    assert first4(4096, 768, 768)[0] == "gemm64x64_4x4_k1"           # legacy stays first
    # 192 groups of 2 resident per unit on 132 units fill 0.73 of one wave; split in 4, 0.97
    assert wave_fill(GemmVariant(128, 128, 16, 8, 1), 4096, 768, 1, 132) == pytest.approx(192 / 264)
    assert wave_fill(GemmVariant(128, 128, 16, 8, 4), 4096, 768, 1, 132) == pytest.approx(768 / 792)


@pytest.mark.parametrize("m,n,k,batch", [(4096, 4096, 4096, 64), (8192, 8192, 2048, 8),
                                         (32768, 32768, 1024, 1)])
def test_no_split_has_more_partial_sums_than_gemm_cl_can_index(m, n, k, batch):
    """gemm.cl indexes a split's partial sums (slices x batch x M x N) with an int: a wave
    split of a large output past 2^31 of them would write out of bounds (the first of these
    shapes listed one fourth, where `--tuning fast` times it). A split that fits stays."""
    from customlayers.ops.nn._variants import gemm_variants, split_plan
    listed = gemm_variants(m, n, k, batch, 264)
    for v in listed:
        assert split_plan(v, k, batch)["KSPLIT"] * batch * m * n < 2 ** 31, v.name
    assert any(v.ksplit > 1 for v in gemm_variants(4096, 768, 3072, 1, 264))


def test_matmul_offers_the_copy_pipeline_only_where_the_device_and_operands_allow_it():
    """gemm_async.cl's tilings come right after the legacy one (the tuner's fast mode times
    them) on a device with cp.async, for float4-aligned operands (either layout of B); never on
    other devices or for a K that is not a multiple of 4."""
    from dataclasses import replace
    op = get_op("MatMul")
    piped = replace(H100, async_copy=True, local_mem_size=48 * 1024)     # NVIDIA's __local

    def names(a, b, device, transpose_b=False):
        attrs = op.parse_attributes({"transpose_b": str(transpose_b).lower()}, "mm")
        descs = [TensorDesc(a), TensorDesc(b)]
        out = [TensorDesc(s) for s, _ in op.infer_shapes(attrs, descs, {})]
        return [v.name for v in op.kernel_variants(attrs, descs, out, {},
                                                   CompileContext(device))]

    listed = names((4096, 768), (768, 3072), piped)
    assert listed[0] == "gemm64x64_4x4_k1"
    assert [n.split("_", 1)[0] for n in listed[1:4]] == ["gemm64x128", "gemm64x64", "gemm128x64"]
    assert all(n.endswith(("_a2", "_a3")) for n in listed[1:4])
    assert not any(n.endswith(("_a2", "_a3")) for n in names((4096, 768), (768, 3072), H100))
    assert any(n.endswith("_a2") for n in names((4096, 768), (3072, 768), piped,
                                                transpose_b=True)[1:4])
    assert not any("_a" in n for n in names((4096, 770), (770, 3072), piped))
    # 128x64 in 3 stages takes 43 KB of __local memory: not on a device of 32 KB
    small = [n for n in names((4096, 768), (768, 3072), replace(piped, local_mem_size=32768))
             if n.endswith(("_a2", "_a3"))]
    assert small and not any(n.startswith("gemm128x64") for n in small)


def test_a_one_by_one_convolution_offers_the_copy_pipeline_where_its_input_is_a_matrix():
    """A 1x1 window (stride 1, no padding) reads its input as a plain matrix: on a device with
    cp.async and weights in float4s, gemm_async.cl's tilings follow the heuristic's first
    (planes of 49 pixels too, copied a value at a time, where the GEMM fills the device); a 3x3
    window, weights of K = 30 or a device without it get none."""
    from dataclasses import replace
    piped = replace(H100, async_copy=True, local_mem_size=48 * 1024)
    one = {"strides": "1,1", "dilations": "1,1", "pads_begin": "0,0", "pads_end": "0,0"}

    def names(xs, ws, raw, device):
        return [v.name for v in _listed(xs, ws, raw, device)]

    listed = names((32, 256, 56, 56), (64, 256, 1, 1), one, piped)
    assert listed[1].endswith("_a2") and listed[0].startswith("gemm")
    assert not any(n.endswith(("_a2", "_a3")) for n in names((32, 256, 56, 56), (64, 256, 1, 1),
                                                               one, H100))
    # planes of 49 pixels: the input is copied one value at a time (GEMM_VEC_B 0), piped where
    # the GEMM fills the device (ResNet-50's layer4 at batch 32: 32 x 13 tiles of 64 x 128),
    # else listed last, for `full` (batch 1: 32 x 1 tiles; 64 channels at batch 32: 1 x 13)
    wide = names((32, 512, 7, 7), (2048, 512, 1, 1), one, piped)
    assert wide[1].endswith("_a2") and wide[0].startswith("gemm")
    for xs, ws in (((1, 512, 7, 7), (2048, 512, 1, 1)), ((32, 256, 7, 7), (64, 256, 1, 1))):
        small = names(xs, ws, one, piped)
        piped_at = [i for i, n in enumerate(small) if n.endswith(("_a2", "_a3"))]
        tilings_at = [i for i, n in enumerate(small)
                      if n.startswith("gemm") and not n.endswith(("_a2", "_a3"))]
        assert len(piped_at) == 3 and min(piped_at) > max(tilings_at) >= 3
    # a strided 1x1 window without padding (ResNet's shortcut): each value from its address
    strided = dict(one, strides="2,2")
    assert names((32, 256, 56, 56), (512, 256, 1, 1), strided, piped)[1].endswith("_a2")
    assert not any(n.endswith(("_a2", "_a3")) for n in names(
        (32, 256, 56, 56), (512, 256, 1, 1), dict(strided, pads_begin="1,1"), piped))
    # weights whose rows are not whole float4s (K = 30): none
    assert not any(n.endswith(("_a2", "_a3")) for n in names((32, 30, 7, 7), (64, 30, 1, 1),
                                                               one, piped))
    # a 3x3 window's implicit GEMM gathers its patches: no pipeline (Winograd's batched GEMM,
    # of plain matrices, has one: tests/unit/test_winograd_variants.py)
    assert not any(n.startswith("gemm") and n.endswith(("_a2", "_a3"))
                   for n in names((32, 64, 56, 56), (64, 64, 3, 3), CONV_3X3, piped))
