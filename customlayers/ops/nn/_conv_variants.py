"""The kernel variants of Convolution and GroupConvolution (ops/nn/conv.py) as objects
(jit/variant.py), and the plan of one call they run from.

`ConvPlan` is what conv.py prepares once per call: the geometry, the kernels' #defines (the
window, the fused epilogue's flags and a folded channel shuffle's channel order: no size, so
one program serves every shape of a variant), the kernel arguments (tensors, then the sizes),
the constant weights and the device's traits. `conv_variants` lists, for that plan, every
variant in the order the tuner should time them (the heuristic's choice first); each variant's
`launches(plan)` is its kernels. On a GPU: the tiled implicit GEMM (GemmVariant, _variants.py),
Winograd (WinogradVariant, _winograd.py), and the direct kernels here: one output per work
item (`direct`, `direct_{X}x{Y}` under a fixed work-group shape), output channels blocked in
registers (`ocb{OCB}_px{PXB}`, conv_direct_ocb.cl), an output's input channels split among
work items (`split{CS}`, conv_direct_split.cl). On a CPU: _cpu_kernels.py's variants, else
conv_cpu.cl (CpuDirectVariant). 3-D: conv3d.cl (Conv3dVariant). conv.py's module docstring
says when each one wins.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...jit.launch import Arg, DeviceTraits, KernelLaunch
from ...jit.variant import KernelVariant
from ._cpu_kernels import conv_cpu_variants
from ._gemm import GemmProblem, target_groups
from .._program import defines, kernel_source
from ._variants import gemm_variants, pipeline_defines, with_pipeline
from ._winograd import WinogradVariant, with_cpu_winograd, with_winograd

# below this many output channels per group, the direct kernel beats a mostly-empty GEMM tile
DIRECT_MAX_OG = 4
# work-group shapes the tuner tries for the direct kernel (besides the driver's choice)
_DIRECT_GROUPS = ((16, 4), (32, 4), (8, 8), (64, 1))
# more accumulators than OCB * PXB = 64 would spill registers; past 32 channels per group a GEMM
# tile is mostly full, and only the small block is listed (last: timed by `--tuning full`)
_OCB_MAX, _OCB_SMALL = 32, 8
# work items per group along x: two warps (NVIDIA) or one wavefront (AMD); fewer would copy the
# block's weights into __local memory more often per output
_OCB_GROUP_X = 64
# the block's weights in __local memory: OpenCL's minimum CL_DEVICE_LOCAL_MEM_SIZE, so every
# device that reports itself a GPU has this much
_OCB_MAX_LOCAL_BYTES = 32 << 10
# NDRange dimensions 1 and 2 run one work-group per index: CUDA-based drivers map them to a
# grid's y and z extents, which stop at 65535
_MAX_GRID_YZ = 65535
# conv_direct_split.cl: each output's channels split among CS work items
_SPLITS = (4, 8)
# work items per group along x (one warp): CS of them share an output
_SPLIT_GROUP_X = 32
# the split kernels are listed where one output per work item leaves the device this idle: fewer
# outputs than work items per compute unit times target_groups (two groups per unit)
_SPLIT_ITEMS_PER_GROUP = 256
# output channels one work item of conv_cpu.cl accumulates in registers (measured on PoCL with
# AVX-512: 16 beat 8 and 4 on ResNet-like layers)
_CPU_CHANNEL_BLOCK = 16


@dataclass
class ConvPlan:
    """One convolution call as its variants read it (conv.py's _ConvBase.plan)."""
    g: dict                     # conv.py's _geometry
    # the kernels' #defines: the window (KH, KW; not 3-D), the size parameters' list
    # (CONV_SIZES, _sizes.py), IN_CHANNEL, the FUSED_* flags: none of them a size
    sizes: dict
    args: tuple                 # input, weights, output[, bias][, residual]
    size_args: tuple            # the sizes as scalars, in CONV_SIZES' order (after `args`)
    weights: np.ndarray | None  # input 1 when it is a constant
    device: DeviceTraits | None
    on_cpu: bool
    shuffle: int                # a folded channel shuffle's group (1: none)

    @property
    def kernel_args(self) -> tuple:
        """The arguments of a kernel that takes the layer's tensors then the sizes."""
        return self.args + self.size_args

    @property
    def shape(self) -> str:
        """The window for labels: 3x3, or 7 for a 1-D one."""
        return f"{self.g['KH']}x{self.g['KW']}" if self.g["RANK"] == 2 else f"{self.g['KW']}"

    @property
    def label(self) -> str:
        return f"conv{self.g['RANK']}d_{self.shape}"

    @property
    def target(self) -> int:
        return target_groups(self.device)

    @property
    def max_threads(self) -> int:
        return self.device.max_work_group_size if self.device is not None else 256

    @property
    def on_gpu_2d(self) -> bool:
        """The GPU kernels' domain: a 1-D or 2-D window, on a device that is not a CPU."""
        return not self.on_cpu and self.g["RANK"] != 3

    @property
    def one_by_one(self) -> bool:
        """A 1x1 window, stride 1, no padding: the patch matrix is the input itself."""
        g = self.g
        return g["SY"] == g["SX"] == 1 and self.unpadded_point

    @property
    def unpadded_point(self) -> bool:
        """A 1x1 window without padding, at any stride: every patch value is an input element
        (conv_gemm.cl's CONV_1X1, or CONV_1X1_STRIDED: read from its address). No padding at
        either end: the output is as large as the strides over the input make it (a pads_end
        would add outputs past the input, which those forms read without a bounds check)."""
        g = self.g
        return g["KH"] == g["KW"] == 1 and g["PY"] == g["PX"] == 0 and \
            g["OH"] == (g["IH"] - 1) // g["SY"] + 1 and g["OW"] == (g["IW"] - 1) // g["SX"] + 1

    def vector_reads(self) -> tuple[int, int]:
        """gemm.cl's GEMM_VEC_A and GEMM_VEC_B: float4 reads of the weights' rows (K a
        multiple of 4), and of a 1x1 window's input rows (planes a multiple of 4: a group never
        spans two images); a GPU's buffers only (on an H100 the float4 reads made MatMul's
        GEMMs 1.1-1.5x faster)."""
        g = self.g
        k = g["CG"] * g["KH"] * g["KW"]
        return (int(not self.on_cpu and k % 4 == 0),
                int(not self.on_cpu and self.one_by_one and (g["OH"] * g["OW"]) % 4 == 0))

    @property
    def async_tiles(self) -> bool:
        """Whether gemm_async.cl's pipeline can read the implicit GEMM: a 1x1 window without
        padding (every patch value an input element) with the weights in float4s; the input
        in float4s too (stride 1, planes a multiple of 4 pixels), or else copied one value at
        a time (planes of 7x7; a stride)."""
        return self.on_gpu_2d and self.unpadded_point and self.vector_reads()[0] == 1

    @property
    def async_by_value(self) -> bool:
        """The pipeline would copy the input a value at a time (_variants.with_pipeline)."""
        return self.vector_reads()[1] == 0

    def gemm(self) -> GemmProblem:
        """The implicit GEMM (conv_gemm.cl): images side by side along N, one GEMM per group,
        so that small planes fill whole tiles. 1x1 windows read the input as a plain matrix."""
        g = self.g
        n, batch = gemm_n_batch(g)
        k = g["CG"] * g["KH"] * g["KW"]
        vec_a, vec_b = self.vector_reads()
        # one image or several: a batch of one reads no image index (a #define of two values)
        return GemmProblem(defines(**self.sizes, CONV_1X1=int(self.one_by_one),
                                   CONV_1X1_STRIDED=int(self.unpadded_point and
                                                        not self.one_by_one),
                                   SINGLE_IMAGE=int(g["NB"] == 1), GEMM_VEC_A=vec_a,
                                   GEMM_VEC_B=vec_b, **pipeline_defines(self.device, self.on_cpu))
                           + kernel_source("conv_gemm.cl"), self.kernel_args,
                           g["OG"], n, k, batch, f"{self.label}_gemm")


def gemm_n_batch(g: dict) -> tuple[int, int]:
    """(N, GEMMs) of the implicit GEMM."""
    return g["NB"] * g["OH"] * g["OW"], g["G"]


@dataclass(frozen=True)
class DirectVariant(KernelVariant):
    """conv_direct.cl, one output per work item; `group`: a fixed work-group shape (x, y), the
    NDRange rounded up to whole groups (the kernel guards the edge); None: the driver's."""
    group: tuple[int, int] | None = None

    @property
    def name(self) -> str:
        return "direct" if self.group is None else f"direct_{self.group[0]}x{self.group[1]}"

    def applies(self, plan: ConvPlan) -> bool:
        return plan.on_gpu_2d

    def launches(self, plan: ConvPlan) -> list[KernelLaunch]:
        g, local = plan.g, None
        glob = (g["OW"], g["OH"], g["NB"] * g["O"])
        if self.group is not None:
            lx, ly = self.group
            local = (lx, ly, 1)
            glob = (-(-glob[0] // lx) * lx, -(-glob[1] // ly) * ly, glob[2])
        return [KernelLaunch(
            source=defines(**plan.sizes) + kernel_source("conv_direct.cl"),
            entry="conv_direct", args=plan.kernel_args, global_size=glob, local_size=local,
            label=f"{plan.label}_{self.name}")]


@dataclass(frozen=True)
class SplitVariant(KernelVariant):
    """conv_direct_split.cl: each output's input channels split among `cs` work items."""
    cs: int

    @property
    def name(self) -> str:
        return f"split{self.cs}"

    def applies(self, plan: ConvPlan) -> bool:
        return self in split_variants(plan)

    def launches(self, plan: ConvPlan) -> list[KernelLaunch]:
        g, cs = plan.g, self.cs
        return [KernelLaunch(
            source=defines(**plan.sizes, CS=cs, LX=_SPLIT_GROUP_X)
            + kernel_source("conv_direct_split.cl"),
            entry="conv_direct_split", args=plan.kernel_args,
            global_size=(-(-g["OW"] // _SPLIT_GROUP_X) * _SPLIT_GROUP_X, g["OH"] * cs,
                         g["NB"] * g["O"]),
            local_size=(_SPLIT_GROUP_X, cs, 1), label=f"{plan.label}_{self.name}")]


@dataclass(frozen=True)
class OcbVariant(KernelVariant):
    """conv_direct_ocb.cl: `ocb` output channels (a multiple of 4: the weights are read as
    float4) at `pxb` consecutive pixels per work item."""
    ocb: int
    pxb: int

    @property
    def name(self) -> str:
        return f"ocb{self.ocb}_px{self.pxb}"

    def applies(self, plan: ConvPlan) -> bool:
        return self in ocb_variants(plan)

    def launches(self, plan: ConvPlan) -> list[KernelLaunch]:
        g, ocb, pxb = plan.g, self.ocb, self.pxb
        items_x = -(-g["OW"] // pxb)          # the kernel guards the last group's edge
        return [KernelLaunch(
            source=defines(**plan.sizes, OCB=ocb, PXB=pxb, LX=_OCB_GROUP_X)
            + kernel_source("conv_direct_ocb.cl"),
            entry="conv_direct_ocb",
            # the block's weights in __local memory: [CG * KH * KW][OCB]
            args=plan.kernel_args + (Arg.local(g["CG"] * g["KH"] * g["KW"] * ocb * 4),),
            global_size=(-(-items_x // _OCB_GROUP_X) * _OCB_GROUP_X, g["OH"],
                         g["NB"] * g["G"] * -(-g["OG"] // ocb)),
            local_size=(_OCB_GROUP_X, 1, 1), label=f"{plan.label}_{self.name}")]


@dataclass(frozen=True)
class CpuDirectVariant(KernelVariant):
    """conv_cpu.cl, a direct kernel shaped for CPU OpenCL compilers: where none of
    _cpu_kernels.py's variants applies (weights not constant, depthwise rows too wide)."""

    @property
    def name(self) -> str:
        return "cpu"

    def applies(self, plan: ConvPlan) -> bool:
        return plan.on_cpu and plan.g["RANK"] != 3

    def launches(self, plan: ConvPlan) -> list[KernelLaunch]:
        g = plan.g
        ocb = min(_CPU_CHANNEL_BLOCK, g["OG"])
        return [KernelLaunch(
            source=defines(**plan.sizes, OCB=ocb) + kernel_source("conv_cpu.cl"),
            entry="conv_cpu", args=plan.kernel_args,
            global_size=(-(-g["OW"] // 8) * 8, g["OH"], g["NB"] * g["G"] * -(-g["OG"] // ocb)),
            label=f"{plan.label}_cpu")]


@dataclass(frozen=True)
class Conv3dVariant(KernelVariant):
    """conv3d.cl, the one kernel of 3-D convolutions on every device."""

    @property
    def name(self) -> str:
        return "conv3d"

    def applies(self, plan: ConvPlan) -> bool:
        return plan.g["RANK"] == 3

    def launches(self, plan: ConvPlan) -> list[KernelLaunch]:
        g = plan.g
        return [KernelLaunch(
            source=defines(**plan.sizes) + kernel_source("conv3d.cl"),
            entry="conv3d_direct", args=plan.kernel_args,
            global_size=(g["OW"], g["OH"], g["NB"] * g["O"] * g["OD"]),
            label=f"conv3d_{g['KD']}x{g['KH']}x{g['KW']}_direct")]


def conv_variants(plan: ConvPlan) -> tuple[KernelVariant, ...]:
    """Every variant for the plan, the heuristic's choice first; never empty. On a GPU: GEMM
    tilings (in the copy pipeline where the device has cp.async and the operands allow it) and,
    for 3x3 stride-1 windows over constant weights, Winograd F(4x4, 3x3) and F(2x2, 3x3), and
    the direct kernels; or, for few output channels per group (depthwise), the direct kernel under
    a few work-group shapes. On a CPU device: the micro-tiles of the blocked kernel, or the
    rows per work item of the depthwise one, else conv_cpu.cl; and Winograd's CPU form
    (_winograd.CpuWinogradVariant, first for wide 3x3 stride-1 layers). 3-D has one
    variant."""
    g = plan.g
    if g["RANK"] == 3:
        return (Conv3dVariant(),)
    if plan.on_cpu:
        return with_cpu_winograd(conv_cpu_variants(g, plan.weights is not None, plan.device)
                                 or (CpuDirectVariant(),), plan)
    direct = DirectVariant()
    if g["OG"] <= DIRECT_MAX_OG:
        return (direct,) + tuple(DirectVariant(group) for group in _DIRECT_GROUPS)
    n, batch = gemm_n_batch(g)
    k = g["CG"] * g["KH"] * g["KW"]
    gemms = with_pipeline(gemm_variants(g["OG"], n, k, batch, plan.target, plan.max_threads),
                          plan, g["OG"], n, k, batch, plan.target)
    listed = with_winograd(gemms, plan)
    blocked, split = ocb_variants(plan), split_variants(plan)
    if g["OG"] > _OCB_MAX or not (blocked or split):
        return listed + blocked + split + (direct,)
    # Few channels: `--tuning fast` times the direct kernel and two of the blocked ones
    # right after the GEMM heuristic's choice (which stays first, what `--tuning off`
    # runs). On an H100, the TCN's 25-channel convolutions (bench/gpu_layers.py, tuning
    # full): at batch 1, where most of the GPU is idle and the longest work item sets the
    # time, one output per item (direct, 12.5 us) beat every blocked kernel (15-16 us);
    # at batch 64 the small block at two pixels and the whole group at one (29-30 us)
    # beat the rest (31-34 us) and the best GEMM (58 us). Where the outputs are too few to
    # fill the device, the channel-split kernels take the blocked ones' places.
    # Winograd, where it applies, keeps its place second.
    head = 2 if len(listed) > 1 and isinstance(listed[1], WinogradVariant) else 1
    first, rest = (split, blocked) if split else (blocked[:2], blocked[2:])
    return listed[:head] + (direct,) + first + listed[head:] + rest


def split_variants(plan: ConvPlan) -> tuple[SplitVariant, ...]:
    """The channel-split variants (1-D or 2-D, on a GPU): each output's channels split among 4
    or 8 work items, where one output per work item would leave most of the device idle
    (fewer outputs than `target` work-groups of _SPLIT_ITEMS_PER_GROUP) and each slice still
    gets two channels or more. None for a folded channel shuffle or where the direct kernel is
    the whole list (OG <= DIRECT_MAX_OG)."""
    g = plan.g
    outputs = g["NB"] * g["O"] * g["OH"] * g["OW"]
    if not plan.on_gpu_2d or plan.shuffle > 1 or g["OG"] <= DIRECT_MAX_OG or \
            outputs >= plan.target * _SPLIT_ITEMS_PER_GROUP or g["NB"] * g["O"] > _MAX_GRID_YZ:
        return ()
    return tuple(SplitVariant(cs) for cs in _SPLITS
                 if g["CG"] >= 2 * cs and _SPLIT_GROUP_X * cs <= plan.max_threads)


def ocb_variants(plan: ConvPlan) -> tuple[OcbVariant, ...]:
    """The channel-blocked variants (1-D or 2-D, on a GPU): channel blocks of the group's
    channels rounded up to a multiple of 4 (up to _OCB_MAX) and of _OCB_SMALL, each at 1 and 2
    pixels per work item. First the smallest block at the most pixels, then the largest at one
    (conv_variants says why), then the rest, largest block first. None for a folded channel
    shuffle (the kernel reads the channels in order), where the direct kernel is listed instead
    (OG <= DIRECT_MAX_OG), or where a block's weights would not fit in __local memory."""
    g = plan.g
    whole = -(-g["OG"] // 4) * 4
    if not plan.on_gpu_2d or plan.shuffle > 1 or g["OG"] <= DIRECT_MAX_OG or \
            plan.max_threads < _OCB_GROUP_X:
        return ()
    window = g["CG"] * g["KH"] * g["KW"]
    blocks = [b for b in {whole, _OCB_SMALL} if b <= min(whole, _OCB_MAX)
              and window * b * 4 <= _OCB_MAX_LOCAL_BYTES
              and max(g["NB"] * g["G"] * -(-g["OG"] // b), g["OH"]) <= _MAX_GRID_YZ]
    pairs = [(ocb, pxb) for ocb in blocks for pxb in (1, 2) if pxb <= g["OW"]]
    if not pairs:
        return ()
    small, whole_block = min(p[0] for p in pairs), max(p[0] for p in pairs)
    ordered = dict.fromkeys([(small, max(p[1] for p in pairs if p[0] == small)),
                             (whole_block, 1)] + sorted(pairs, reverse=True))
    return tuple(OcbVariant(ocb, pxb) for ocb, pxb in ordered)
