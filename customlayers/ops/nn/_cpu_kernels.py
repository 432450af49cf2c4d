"""The kernels built-in ops run on CPU devices (CompileContext.device.kind == "CPU"), chosen in
one place: the variants (jit/variant.py) for one layer signature and the device's traits, best
guess first, and the launches of each. The ops take the first; the tuner can time them all
(every candidate computes the same result).

Convolution: conv_cpu_blocked.cl, a register-blocked micro-kernel (see the .cl file) over
weights packed here, once, at compile time. It needs the weights as a constant and enough
output channels per group to fill most of a vector of channels (kernel_vector_width lanes:
the device's preferred float width, 8 or 16); otherwise (depthwise, weights computed
at run time) no candidate is returned and conv.py runs its direct kernel conv_cpu.cl.
Depthwise convolution (one input channel per group) runs conv_cpu_depthwise.cl, which stages
each work item's input rows in private memory, zero-padded, and sums float8 runs along a row.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

import numpy as np

from ...jit.launch import Arg, DeviceTraits, KernelLaunch
from ...jit.variant import KernelVariant
from .._program import buffer_aligned, defines, kernel_source
from ._sizes import scalars

# fewer output channels per group than this leave most of a float8 of channels empty
MIN_BLOCKED_OG = 5


@dataclass(frozen=True)
class ConvBlocking:
    """The micro-tile of conv_cpu_blocked: OB output channels (one or two vectors of VW lanes)
    by PT output pixels, PT * OB / VW vector accumulators; VW 8 (float8) or 16 (float16)."""
    ob: int
    pt: int
    vw: int = 8


def kernel_vector_width(device: DeviceTraits) -> int:
    """The lanes of the CPU kernels' vectors: 16 where the device prefers 16 or more floats
    (AVX-512: float16 is what puts PoCL's arithmetic in zmm registers), else 8 (AVX2; SSE and
    NEON split a float8 into two registers, which the blockings count)."""
    return 16 if device.float_vector_width >= 16 else 8


def conv_blockings(og: int, device: DeviceTraits) -> list[ConvBlocking]:
    """Micro-tiles for `og` output channels per group, the default first.
    8 lanes: the accumulators get 12 of the 16 vector registers of AVX2 (the other 4 hold two
    weight vectors and the broadcast input); a float8 takes two registers where vectors are 4
    wide (SSE, NEON).
    16 lanes (AVX-512): 28 of the 32 zmm registers (the broadcast input is an operand of the
    FMA): 14 pixels x 32 channels (ResNet's, Inception's and DenseNet's outputs are multiples
    of 7 pixels), or 28 x 16 where a block of 32 would leave more channels empty than 16
    does; 8 channels or fewer stay in a float8 (AVX-512 has 32 ymm registers too)."""
    if kernel_vector_width(device) == 16:
        if og <= 8:         # a float16 would be half empty: float8 (ymm), 24 of 32 registers
            return [ConvBlocking(8, 24, 8)]
        waste = {ob: -(-og // ob) * ob - og for ob in (32, 16)}
        if og > 16 and waste[32] <= waste[16] + og // 8:
            return [ConvBlocking(32, 14, 16), ConvBlocking(32, 7, 16), ConvBlocking(16, 28, 16)]
        return [ConvBlocking(16, 28, 16), ConvBlocking(16, 14, 16)]
    width = max(1, device.float_vector_width)
    budget = 12
    per_float8 = max(1, 8 // width)
    tiles = []
    for ob in ((16, 8) if og > 8 else (8,)):
        tiles.append(ConvBlocking(ob, max(1, budget // (ob // 8 * per_float8))))
    if og > 8:     # a 4-pixel tile: more work items where the output is small (7x7)
        tiles.append(ConvBlocking(16, 4))
    return tiles


@dataclass(frozen=True)
class CpuBlockedVariant(KernelVariant):
    """conv_cpu_blocked.cl under micro-tile `tile`. Its plan: conv.py's (ConvPlan)."""
    tile: ConvBlocking

    @property
    def name(self) -> str:
        tile = self.tile
        return f"cpu{tile.ob}x{tile.pt}" + (f"v{tile.vw}" if tile.vw != 8 else "")

    def applies(self, plan) -> bool:
        return plan.on_cpu and self in conv_cpu_variants(plan.g, plan.weights is not None,
                                                         plan.device)

    def launches(self, plan) -> list[KernelLaunch]:
        return blocked_launches(plan, self.tile)


@dataclass(frozen=True)
class DepthwiseRowsVariant(KernelVariant):
    """conv_cpu_depthwise.cl at `rows` output rows per work item. Its plan: conv.py's."""
    rows: int

    @property
    def name(self) -> str:
        return f"dw_rows{self.rows}"

    def applies(self, plan) -> bool:
        return plan.on_cpu and self in conv_cpu_variants(plan.g, plan.weights is not None,
                                                         plan.device)

    def launches(self, plan) -> list[KernelLaunch]:
        return depthwise_launches(plan, self.rows)


def conv_cpu_variants(g: Mapping[str, int], weights_known: bool,
                      device: DeviceTraits) -> tuple[KernelVariant, ...]:
    """The CPU kernels' variants for a convolution of geometry `g`, the default first:
    micro-tiles (conv_blockings) or, for depthwise layers, rows per work item
    (depthwise_rows); () where neither applies (conv.py runs conv_cpu.cl)."""
    if weights_known and g["OG"] >= MIN_BLOCKED_OG:
        return tuple(CpuBlockedVariant(t) for t in conv_blockings(g["OG"], device))
    return tuple(DepthwiseRowsVariant(rb) for rb in depthwise_rows(g, device))


def conv_candidates(plan) -> list[list[KernelLaunch]]:
    """Launch lists computing the 1-D/2-D convolution of `plan` (conv.py's ConvPlan) with
    conv_cpu_blocked, one per micro-tile; [] where it does not apply."""
    if plan.weights is None or plan.g["OG"] < MIN_BLOCKED_OG:
        # depthwise stays on conv_cpu.cl: a row-wise kernel over the padded copy, vectorized
        # by LLVM along the row, measured 0.5-2x its time on ShuffleNet's layers (1.6x faster
        # at 14x14, 2x slower at 56x56 stride 2: PoCL's cost per work-group and the extra pad
        # launch dominate layers of 2 MFLOP)
        return []
    return [blocked_launches(plan, tile) for tile in conv_blockings(plan.g["OG"], plan.device)]


# the most of an operand a core's cache is taken to hold between work items: PoCL reports the
# last-level cache (shared, 260 MB on the 2-core test machine) as the global memory cache, a
# core's own L2 is 1-2 MiB on the x86 servers measured here
CORE_CACHE_BYTES = 1 << 20


def core_cache_bytes(device: DeviceTraits) -> int:
    """A core's share of the device's global memory cache, at most CORE_CACHE_BYTES."""
    if device.global_cache_bytes <= 0:
        return CORE_CACHE_BYTES
    return min(CORE_CACHE_BYTES, device.global_cache_bytes // max(1, device.compute_units))


def blocks_first(g: Mapping[str, int], input_floats: int, device: DeviceTraits,
                 ob: int) -> bool:
    """Whether conv_cpu_blocked's neighbouring work items should be the channel blocks of one
    pixel tile (the input read once, the weights again per tile) rather than the pixel tiles of
    one block (the default: the weights read once, the input again per block): where an
    image's input does not stay in a core's cache and the layer's weights do. Measured on
    PoCL AVX-512: DenseNet's 1x1 layers at 56x56 (128-256 -> 128) 10-20% faster, ResNet's
    256 -> 64 at 56x56 up to 40%; where the input fits (ResNet's 1x1 layers at 28x28 and
    below), the same order was up to 2x slower."""
    if -(-g["OG"] // ob) * g["G"] < 2:
        return False
    cache = core_cache_bytes(device)
    weights = g["G"] * g["OG"] * g["CG"] * g["KH"] * g["KW"] * 4
    return input_floats * 4 > cache and weights <= cache


# conv.py's #defines that conv_cpu_blocked takes as kernel arguments instead
# (the window stays a #define: see conv_cpu_blocked.cl)
RUN_TIME_DEFINES = ("FUSED_BIAS", "FUSED_RESIDUAL", "FUSED_PRE_RELU", "FUSED_RELU")


def blocked_launches(plan, tile: ConvBlocking) -> list[KernelLaunch]:
    """conv_cpu_blocked under micro-tile `tile` (and the zero-padded copy of the input it reads
    where the window leaves the input) for conv.py's ConvPlan. Its `args` are the layer's
    (input, weights, output[, bias][, residual]): the weights packed for the tile replace input
    1, and conv_cpu_blocked always takes a bias and a residual buffer; every kernel takes the
    sizes after its buffers, then the padded copy's IHP and IWP, and conv_cpu_blocked whether
    its NDRange walks channel blocks first (blocks_first) and its epilogue's switches
    (RUN_TIME_DEFINES)."""
    g, args = plan.g, plan.args
    ih, iw = g["IH"], g["IW"]
    ihp = max(ih + g["PY"], (g["OH"] - 1) * g["SY"] + (g["KH"] - 1) * g["DY"] + 1)
    iwp = max(iw + g["PX"], (g["OW"] - 1) * g["SX"] + (g["KW"] - 1) * g["DX"] + 1)
    padded = (g["PY"], g["PX"], ihp, iwp) != (0, 0, ih, iw)
    p = g["OH"] * g["OW"]
    shape = f"{g['KH']}x{g['KW']}"
    sizes = plan.size_args + scalars(ihp, iwp)

    def with_pad(label: str, launch: KernelLaunch) -> list[KernelLaunch]:
        """`launch` reading the zero-padded copy (scratch 0) where the window leaves the input."""
        if not padded:
            return [launch]
        x = Arg.scratch(0, g["NB"] * g["C"] * ihp * iwp * 4)
        # the sizes' parameter list only: one program for every convolution's copy
        pad_src = defines(CONV_SIZES=plan.sizes["CONV_SIZES"]) + kernel_source("conv_cpu_pad.cl")
        pad = KernelLaunch(source=pad_src, entry="conv_cpu_pad", args=(args[0], x) + sizes,
                           global_size=(iwp, ihp, g["NB"] * g["C"]),
                           label=f"{label}_pad")
        return [pad, replace(launch, args=(x,) + launch.args[1:])]

    ogb = -(-g["OG"] // tile.ob)
    # the epilogue's switches are arguments (conv_cpu_blocked.cl): one program per micro-tile
    # and window (and GELU), whatever the fusion
    switches = {name: int(plan.sizes[name]) for name in RUN_TIME_DEFINES if name in plan.sizes}
    src = defines(**{k: v for k, v in plan.sizes.items() if k not in RUN_TIME_DEFINES},
                  PT=tile.pt, OB=tile.ob, VW=tile.vw) + kernel_source("conv_cpu_blocked.cl")
    packed = Arg.const(pack_conv_weights(plan.weights, g, tile.ob))
    label = f"conv2d_{shape}_{CpuBlockedVariant(tile).name}"
    walk = blocks_first(g, g["C"] * ihp * iwp, plan.device, tile.ob)
    grid = (-(-p // tile.pt), g["G"] * ogb)
    # bias and residual where fused (wire_epilogue's order), else input 0: any buffer will
    # do, the kernel reads neither when its switch is 0
    has_bias, has_residual = switches.get("FUSED_BIAS", 0), switches.get("FUSED_RESIDUAL", 0)
    bias = args[3] if has_bias else args[0]
    residual = args[-1] if has_residual else args[0]
    return with_pad(label, KernelLaunch(
        source=src, entry="conv_cpu_blocked",
        args=(args[0], packed, args[2], bias, residual) + sizes +
        scalars(int(walk), has_bias, has_residual, switches.get("FUSED_PRE_RELU", 0),
                switches.get("FUSED_RELU", 0)),
        global_size=(grid[::-1] if walk else grid) + (g["NB"],), local_size=(1, 1, 1),
        label=label))


# a work item's staged input rows stay within this many floats (32 KiB: an L1 data cache, and
# far below the stack PoCL gives a work item)
MAX_STAGED_FLOATS = 8192


def _depthwise_geometry(g: Mapping[str, int]):
    """(runs of 8 per output row, staged row width, staged rows for rb output rows)."""
    runs = -(-g["OW"] // 8)
    # a staged row: the last run's loads (16 floats at stride 2) past the last tap's offset
    sw = runs * 8 * g["SX"] + (g["KW"] - 1) * g["DX"] + 1
    return runs, sw, lambda rb: (rb - 1) * g["SY"] + (g["KH"] - 1) * g["DY"] + 1


def depthwise_rows(g: Mapping[str, int], device: DeviceTraits) -> list[int]:
    """Output rows per work item of conv_cpu_depthwise, the default first: enough items to
    give every compute unit 8 (then 2), as few rows as that allows, all within
    MAX_STAGED_FLOATS; [] where the kernel does not apply (not one input channel per group,
    3-D, or rows too wide to stage)."""
    if g.get("CG") != 1 or g.get("RANK") == 3:
        return []
    _, sw, staged_rows = _depthwise_geometry(g)
    planes = g["NB"] * g["O"]
    found: list[int] = []
    for target in (8, 2):
        rb = max(1, min(g["OH"], planes * g["OH"] // (target * device.compute_units)))
        while rb > 1 and staged_rows(rb) * sw > MAX_STAGED_FLOATS:
            rb -= 1
        if staged_rows(rb) * sw <= MAX_STAGED_FLOATS and rb not in found:
            found.append(rb)
    return found


def depthwise_launches(plan, rb: int) -> list[KernelLaunch]:
    """conv_cpu_depthwise for the 2-D convolution of conv.py's ConvPlan `plan` with one input
    channel per group, `rb` output rows per work item (a depthwise_rows choice). The rows and
    the staging are arguments; the program depends on the window, the fused epilogue and
    whether the stride is 1, 2 or another."""
    g = plan.g
    runs, sw, staged_rows = _depthwise_geometry(g)
    src = defines(**plan.sizes, STRIDE_X=g["SX"] if g["SX"] in (1, 2) else 0,
                  MAX_STAGED=MAX_STAGED_FLOATS) + kernel_source("conv_cpu_depthwise.cl")
    return [KernelLaunch(
        source=src, entry="conv_cpu_depthwise",
        args=plan.kernel_args + scalars(rb, staged_rows(rb), sw, runs),
        global_size=(-(-g["OH"] // rb), g["NB"] * g["O"]), local_size=(1, 1),
        label=f"conv2d_{g['KH']}x{g['KW']}_dw_rows{rb}")]


def pack_conv_weights(weights: np.ndarray, g: Mapping[str, int], ob: int) -> np.ndarray:
    """OIYX (or GOIYX) weights -> [G][OG/OB][KH][KW][CG][OB] float32, the order in which
    conv_cpu_blocked walks K; output channels past OG (a partial last block) are zero."""
    groups, og, cg, kh, kw = g["G"], g["OG"], g["CG"], g["KH"], g["KW"]
    w = np.asarray(weights, np.float32).reshape(groups, og, cg, kh, kw)
    ogb = -(-og // ob)
    if ogb * ob != og:
        w = np.concatenate([w, np.zeros((groups, ogb * ob - og, cg, kh, kw), np.float32)], 1)
    # page-aligned: a CPU device reads it where it lies, not from a second copy
    return buffer_aligned(w.reshape(groups, ogb, ob, cg, kh, kw).transpose(0, 1, 4, 5, 3, 2))
