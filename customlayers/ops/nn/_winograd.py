"""Winograd F(2x2, 3x3) and F(4x4, 3x3) for 3x3, stride-1 convolutions: when they apply, the
variants the tuner may time, the weight transform (done here once, at compile time), and the
launches of conv_winograd.cl (input transform, a batched GEMM, output transform with the fused
epilogue). The batched GEMM is one per group and element of the tile, the images side by side
along its N. On a GPU it runs in the transforms' program on the shared gemm.cl, under its
tilings or, on devices with cp.async, gemm_async.cl's pipeline (its operands are plain matrices
in whole float4s); on a CPU device (CpuWinogradVariant) the transforms are a program of their
own and the GEMM is conv_cpu_blocked.cl's grouped 1x1 convolution.

F(2x2, 3x3) computes a 2x2 output block with 16 multiplies per channel pair where the implicit
GEMM spends 36 (2.25x fewer), at the cost of two extra passes through memory (the transformed
input V is 4x the input, the GEMM's output M 4x the output); F(4x4, 3x3) a 4x4 block with 36
where the GEMM spends 144 (4x fewer), with V and M 2.25x the input and output. A win where the
layer is compute-bound (many channels), a loss where the channels are few. Rounding: F(2x2)'s
transforms combine at most 4 terms per side with coefficients of 1, the weight transform's 0.5s
are exact (and it runs in float64), and each GEMM element sums CG terms where the direct kernel
chains CG * 9: its error measures at or below the direct kernel's. F(4x4)'s coefficients (up to
8 in the output transform, 1/6 and 1/24 in the weights) amplify rounding: its error measures a
few times the direct kernel's (tests/device/test_conv_winograd.py states the bounds each is
held to).

Variants (WinogradVariant): `winograd{m}x{m}` (the batched GEMM under the GEMM heuristic's
tiling) and `winograd{m}x{m}_<gemm variant>` (under that tiling, ops/nn/_variants.py's names;
`_a<P>`: the pipeline's).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

import numpy as np

from ...jit.launch import Arg, KernelLaunch
from ...jit.variant import KernelVariant
from . import _sizes
from ._cpu_kernels import MIN_BLOCKED_OG, ConvBlocking, blocked_launches, conv_blockings
from ._gemm import gemm_launches
from ._sizes import scalars
from .._program import defines, kernel_source
from ._variants import (GemmVariant, async_variants, fills_device, gemm_variants,
                        pipeline_defines)

# the output blocks: F(m x m, 3x3) for m in BLOCKS, in the order the tuner lists them
BLOCKS = (4, 2)
# each one's weight transform G ((m + 2) x 3): U = G g G^T. F(4x4)'s interpolation points are
# 0, -1, 1, -2, 2 and infinity, as conv_winograd.cl's B^T and A^T
G_MATRICES = {
    2: np.array([[1.0, 0.0, 0.0],
                 [0.5, 0.5, 0.5],
                 [0.5, -0.5, 0.5],
                 [0.0, 0.0, 1.0]]),
    4: np.array([[1 / 4, 0.0, 0.0],
                 [-1 / 6, -1 / 6, -1 / 6],
                 [-1 / 6, 1 / 6, -1 / 6],
                 [1 / 24, 1 / 12, 1 / 6],
                 [1 / 24, -1 / 12, 1 / 6],
                 [0.0, 0.0, 1.0]]),
}


def prefix(block: int) -> str:
    """The variant names' stem: winograd2x2, winograd4x4."""
    return f"winograd{block}x{block}"

# below these channels per group the GEMM is too thin for the saved multiplies to pay for the
# two extra passes through memory: Winograd is still listed, but last (timed by `full` only)
PROMISING_CG = PROMISING_OG = 16
# every scratch buffer stays under the smallest CL_DEVICE_MAX_MEM_ALLOC_SIZE that OpenCL allows
# a GPU (128 MiB): past it, the network would refuse to compile a choice the tuner made
MAX_SCRATCH_BYTES = 128 << 20
# the batched GEMM's NDRange dimension 2 holds G * (m + 2)^2 work-groups: CUDA-based drivers
# map it to a grid's z extent, which stops at 65535. (A split-K multiplies it by its slices, at
# most K / 128: reaching the limit so would take CG >= 1024 with G >= 456, whose V is past
# MAX_SCRATCH_BYTES first.)
MAX_GEMM_BATCH = 65535
# the transforms' NDRange dimension 0 (the GEMM's columns) is padded to a multiple of this
TILE_MULTIPLE = 32
# other GEMM tilings listed for `full` (the heuristic's next cheapest)
EXTRA_TILINGS = 2


def tiles(g: Mapping[str, int], block: int = 2) -> tuple[int, int]:
    """(TILES_Y, TILES_X): block x block output tiles per image, a partial one at each far
    edge."""
    return -(-g["OH"] // block), -(-g["OW"] // block)


def columns(g: Mapping[str, int], block: int = 2) -> tuple[int, int]:
    """(NT, NP): the GEMM's columns that are tiles (every image's, side by side), and V's and
    M's row length, NT rounded up to whole float4s (conv_winograd.cl's NT and NP)."""
    ty, tx = tiles(g, block)
    nt = g["NB"] * ty * tx
    return nt, -(-nt // 4) * 4


def _gemm_shape(g: Mapping[str, int], block: int = 2) -> tuple[int, int, int, int]:
    """(m, n, k, batch) of the batched GEMM: M[e] = U[e] (OG x CG) x V[e] (CG x NP) for each
    group and element e of the (block + 2)^2 tile."""
    return g["OG"], columns(g, block)[1], g["CG"], g["G"] * (block + 2) ** 2


def _scratch_bytes(g: Mapping[str, int], block: int = 2) -> tuple[int, int]:
    """Bytes of V [G][WE][CG][NP] and of M [G][WE][OG][NP]."""
    m, n, k, batch = _gemm_shape(g, block)
    return batch * k * n * 4, batch * m * n * 4


def applies(g: Mapping[str, int], weights: np.ndarray | None, block: int = 2) -> bool:
    """A 2-D 3x3 window, stride and dilation 1, weights known at compile time (the transform is
    done on the host), scratch buffers every GPU can allocate, and a GEMM batch every driver
    launches."""
    return (weights is not None and g["RANK"] == 2 and g["KH"] == g["KW"] == 3
            and g["SY"] == g["SX"] == g["DY"] == g["DX"] == 1
            and max(_scratch_bytes(g, block)) <= MAX_SCRATCH_BYTES
            and _gemm_shape(g, block)[3] <= MAX_GEMM_BATCH)


@dataclass(frozen=True)
class WinogradVariant(KernelVariant):
    """Winograd F(block x block, 3x3) with its batched GEMM under `tiling` (None: the GEMM
    heuristic's first). Its plan is conv.py's (_conv_variants.ConvPlan)."""
    tiling: GemmVariant | None = None
    block: int = 2
    needs = "a 3x3, stride-1 window and constant weights"

    @property
    def name(self) -> str:
        stem = prefix(self.block)
        return stem if self.tiling is None else f"{stem}_{self.tiling.name}"

    def applies(self, plan) -> bool:
        return not plan.on_cpu and applies(plan.g, plan.weights, self.block) and \
            (self.tiling is None or self.tiling.applies(_GemmOperands(plan)))

    def launches(self, plan) -> list[KernelLaunch]:
        return winograd_launches(plan.g, plan.sizes, plan.weights, plan.args, plan.size_args,
                                 self.tiling, plan.target, f"conv2d_{plan.shape}",
                                 plan.device, plan.on_cpu, self.block)


def vector_reads(g: Mapping[str, int], on_cpu: bool) -> tuple[int, int]:
    """gemm.cl's GEMM_VEC_A and GEMM_VEC_B for the batched GEMM: U's rows are CG long (float4s
    where CG is a multiple of 4), V's NP (always); a GPU's buffers only, as the implicit
    GEMM's (_conv_variants.ConvPlan.vector_reads)."""
    return int(not on_cpu and g["CG"] % 4 == 0), int(not on_cpu)


class _GemmOperands:
    """The batched GEMM as GemmVariant.applies reads a plan: its device, and whether
    gemm_async.cl's pipeline can read its operands (both in float4s)."""

    def __init__(self, plan):
        self.device = plan.device
        self.async_tiles = vector_reads(plan.g, plan.on_cpu) == (1, 1)


def with_winograd(gemms: tuple[KernelVariant, ...], plan) -> tuple[KernelVariant, ...]:
    """The GEMM variants of the plan (a ConvPlan) with Winograd's added where they apply. The
    heuristic's first choice stays first. For layers with many channels the Winograd forms come
    next, so that `--tuning fast` (the first four) times three of them: on a device with
    cp.async F(4x4) and F(2x2) in the pipeline's best-ranked tiling where their GEMMs fill
    the device (_variants.fills_device), then `winograd2x2`;
    elsewhere `winograd4x4`, `winograd2x2` (up to 32 output channels per group conv_variants
    keeps only the first of them there, before its few-channel kernels); for few channels
    they come after the GEMMs. Other tilings of their GEMMs come last (timed by `full`)."""
    g = plan.g
    operands = _GemmOperands(plan)
    pipelined = plan.device is not None and plan.device.async_copy
    first, extra = [], []
    for block in BLOCKS:
        if not applies(g, plan.weights, block):
            continue
        m, n, k, batch = _gemm_shape(g, block)
        piped = tuple(v for v in async_variants(m, n, k, batch, plan.target)
                      if v.applies(operands)) if pipelined else ()
        if piped and not fills_device(m, n, batch, plan.target):
            # a small GEMM (batch 1): the pipelined forms are `full`'s, after the others
            extra += [WinogradVariant(tiling, block) for tiling in piped]
            piped = ()
        tilings = gemm_variants(m, n, k, batch, plan.target,
                                plan.max_threads)[1:1 + EXTRA_TILINGS]
        first += [WinogradVariant(tiling, block) for tiling in piped[:1]] or \
            [WinogradVariant(None, block)]
        extra += [WinogradVariant(tiling, block) for tiling in piped[1:] + tilings]
        if piped:
            extra.insert(0, WinogradVariant(None, block))
    if not first:
        return gemms
    # F(2x2) under the heuristic's tiling, where the pipeline came first, stays among the four
    legacy = WinogradVariant(None, 2)
    if legacy in extra:
        extra.remove(legacy)
        first.append(legacy)
    first, extra = tuple(first), tuple(extra)
    if g["CG"] >= PROMISING_CG and g["OG"] >= PROMISING_OG:
        return gemms[:1] + first + gemms[1:] + extra
    return gemms + first + extra


def transform_weights(weights: np.ndarray, g: Mapping[str, int], block: int = 2) -> np.ndarray:
    """OIYX (or GOIYX) 3x3 weights -> U = G w G^T as [G][WE][OG][CG] float32 (WE = (block +
    2)^2; element e = WT i + j of the tile outermost per group, so one GEMM's A is one
    contiguous OG x CG matrix). Computed in float64, rounded once."""
    matrix = G_MATRICES[block]
    w = np.asarray(weights, np.float64).reshape(g["G"], g["OG"], g["CG"], 3, 3)
    # two tensordots (BLAS) rather than one three-operand einsum: the same sums, 2.3x faster
    # (ResNet-50's 512x512 layer: 0.06 s, 0.14 s), and every load of a model does this again
    wg = np.tensordot(w, matrix, axes=([4], [1]))               # [G][OG][CG][k][j]
    u = np.tensordot(matrix, wg, axes=([1], [3]))               # [i][G][OG][CG][j]
    u = u.transpose(1, 0, 4, 2, 3)                              # [G][i][j][OG][CG]
    return np.ascontiguousarray(u.reshape(g["G"], (block + 2) ** 2, g["OG"], g["CG"]),
                                np.float32)


def winograd_launches(g: Mapping[str, int], sizes: Mapping[str, int], weights: np.ndarray,
                      args: tuple, size_args: tuple, tiling: GemmVariant | None, target: int,
                      label: str, device=None, on_cpu: bool = False,
                      block: int = 2) -> list[KernelLaunch]:
    """The launches for geometry `g` with the batched GEMM under `tiling` (None: the
    heuristic's first) (conv.py's _geometry, with `sizes` its defines: the window, the size
    parameters' list, the FUSED_* flags). `args` are the layer's (input, weights, output[, bias]
    [, residual]): the transformed weights replace input 1; `size_args` the sizes (ConvPlan's),
    which every kernel takes after its buffers, then TILES_Y and TILES_X. `device` (DeviceTraits
    or None) and `on_cpu` choose the GEMM's float4 reads and its pipeline's copies; `block`
    the output tile (F(2x2) or F(4x4))."""
    m, n, k, batch = _gemm_shape(g, block)
    if tiling is None:
        tiling = gemm_variants(m, n, k, batch, target)[0]
    v, mt = _scratch(g, block)
    u = Arg.const(transform_weights(weights, g, block))
    vec_a, vec_b = vector_reads(g, on_cpu)
    source = defines(**sizes, WINO_M=block, GEMM_VEC_A=vec_a, GEMM_VEC_B=vec_b,
                     **pipeline_defines(device, on_cpu)) + kernel_source("conv_winograd.cl")
    shape = size_args + scalars(*tiles(g, block))
    gemm = gemm_launches(source, (v, u, mt) + shape, tiling, m, n, k, batch,
                         f"{label}_{prefix(block)}_gemm")
    # the transforms are in the GEMM's program: one build per variant
    return _around(gemm, gemm[0].source, g, block, args, shape, v, mt, label)


def _scratch(g: Mapping[str, int], block: int) -> tuple[Arg, Arg]:
    """V and M, scratch 1 and 2 (scratch 0 is the GEMM's own: gemm.cl's split-K partial sums,
    conv_cpu_blocked's padded copy, which a 1x1 window never makes)."""
    v_bytes, m_bytes = _scratch_bytes(g, block)
    return Arg.scratch(1, v_bytes), Arg.scratch(2, m_bytes)


def _around(gemm: list[KernelLaunch], program: str, g: Mapping[str, int], block: int,
            args: tuple, shape: tuple, v: Arg, mt: Arg, label: str) -> list[KernelLaunch]:
    """`gemm` between the input transform and the output transform (with the layer's epilogue)
    of conv_winograd.cl's `program`; `args` the layer's (input, weights, output[, bias]
    [, residual]), `shape` the sizes the transforms take after their buffers."""
    m, n, k, _ = _gemm_shape(g, block)
    nt, _ = columns(g, block)
    stem = prefix(block)

    # columns rounded up to whole warps, so the driver's work-group is never an odd divisor of
    # the column count (the kernels guard the tail): the input transform writes all NP (its
    # padding zeros), the output transform reads the NT that are tiles
    def whole(items: int) -> int:
        return -(-items // TILE_MULTIPLE) * TILE_MULTIPLE
    return ([KernelLaunch(source=program, entry="winograd_input", args=(args[0], v) + shape,
                          global_size=(whole(n), k, g["G"]), label=f"{label}_{stem}_input")]
            + gemm +
            [KernelLaunch(source=program, entry="winograd_output",
                          args=(mt,) + tuple(args[2:]) + shape,
                          global_size=(whole(nt), m, g["G"]),
                          label=f"{label}_{stem}_output")])


@dataclass(frozen=True)
class CpuWinogradVariant(KernelVariant):
    """Winograd F(block x block, 3x3) on a CPU device: conv_winograd.cl's transforms (a program
    of their own, WINOGRAD_TRANSFORMS_ONLY) around its batched GEMM run as conv_cpu_blocked.cl's
    grouped 1x1 convolution under micro-tile `tile`: V [G][WE][CG][NP] is one image of G * WE
    groups of CG channels over a plane of NP pixels (the tiles), U the groups' 1x1 weights,
    packed as that kernel packs them, and M [G][WE][OG][NP] its output. Its plan is conv.py's
    ConvPlan."""
    block: int
    tile: ConvBlocking
    needs = "a 3x3, stride-1 window, constant weights and a CPU device"

    @property
    def name(self) -> str:
        tile = self.tile
        return f"cpu_{prefix(self.block)}_{tile.ob}x{tile.pt}" + \
            (f"v{tile.vw}" if tile.vw != 8 else "")

    def applies(self, plan) -> bool:
        return plan.on_cpu and plan.g["OG"] >= MIN_BLOCKED_OG and \
            applies(plan.g, plan.weights, self.block)

    def launches(self, plan) -> list[KernelLaunch]:
        return cpu_winograd_launches(plan, self.block, self.tile)


# F(4x4) comes first on a CPU device (the kernel `--tuning fast` runs there) where its GEMMs
# have at least CPU_FIRST_TILES columns (the tiles of every image) and CPU_FIRST_CHANNELS
# channels, its 4x4 tiles hold at least CPU_FIRST_FILL of outputs that exist, and V stays
# within CPU_FIRST_V_BYTES. Measured on PoCL (AVX-512, 2 cores), against the blocked kernel:
# - at batch 1, ResNet-50's layers: 128 channels over 28x28 (49 tiles) 0.66-0.69x, 64 over
#   56x56 (196) 0.77-0.93x; but 256 over 14x14 (16 tiles) 1.07-1.65x and 512 over 7x7 (4)
#   1.6-1.8x, where conv_cpu_blocked's tile of 14 pixels is mostly empty;
# - tiles mostly outside the plane: 64 channels over 5x5 at batch 12 (64 outputs computed for
#   25) 1.64x, where 4x4 planes at batch 48 ran 0.42x and 7x7 at batch 16 (49 of 64) 0.39x;
# - a V of 29 MB (64 channels over 224x224, or over 56x56 at batch 16) 1.2-1.6x, where 14.5
#   MB (128 over 112x112) ran 0.66x: past the caches the transforms' passes cost more than
#   the multiplies saved.
# Whole models, both forms in one process, interleaved: ResNet-50 0.963-0.974 of the time,
# Inception v1 0.92-0.93, VGG19 0.68 (a review's run). (F(2x2): 0.79-1.27x at 14x14,
# 1.0-2.0x elsewhere: for `full`.)
CPU_FIRST_TILES, CPU_FIRST_CHANNELS = 48, 64
CPU_FIRST_FILL = 0.75
CPU_FIRST_V_BYTES = 16 << 20


def cpu_winograd_variants(plan) -> tuple[CpuWinogradVariant, ...]:
    """F(4x4) then F(2x2), each under the blocked kernel's default micro-tile for OG channels,
    where they apply on a CPU device."""
    if not plan.on_cpu or plan.device is None or plan.g["OG"] < MIN_BLOCKED_OG:
        return ()
    tile = conv_blockings(plan.g["OG"], plan.device)[0]
    return tuple(CpuWinogradVariant(block, tile) for block in BLOCKS
                 if applies(plan.g, plan.weights, block))


def with_cpu_winograd(listed: tuple[KernelVariant, ...], plan) -> tuple[KernelVariant, ...]:
    """The CPU kernels' variants with Winograd's added where they apply: F(4x4) first where
    its GEMMs are wide enough to pay (CPU_FIRST_TILES, CPU_FIRST_CHANNELS), else after the
    blocked kernel's micro-tiles (timed by `full`)."""
    found = cpu_winograd_variants(plan)
    g = plan.g
    if found and found[0].block == 4 and _pays_on_cpu(g):
        return found[:1] + listed + found[1:]
    return listed + found


def _pays_on_cpu(g: Mapping[str, int]) -> bool:
    """Where F(4x4) came out ahead of the blocked kernel on PoCL (CPU_FIRST_*)."""
    ty, tx = tiles(g, 4)
    fill = g["OH"] * g["OW"] / (ty * tx * 16)
    return (columns(g, 4)[0] >= CPU_FIRST_TILES and fill >= CPU_FIRST_FILL
            and min(g["CG"], g["OG"]) >= CPU_FIRST_CHANNELS
            and _scratch_bytes(g, 4)[0] <= CPU_FIRST_V_BYTES)


class _GroupedPointPlan:
    """The batched GEMM as conv_cpu_blocked reads a plan (_cpu_kernels.blocked_launches): a 1x1
    convolution of one image, G * WE groups, over a plane of 1 x NP pixels, no epilogue."""

    def __init__(self, plan, block: int, v: Arg, mt: Arg):
        g = plan.g
        m, n, k, batch = _gemm_shape(g, block)
        self.g = dict(NB=1, C=batch * k, IH=1, IW=n, O=batch * m, OH=1, OW=n, G=batch, CG=k,
                      OG=m, KH=1, KW=1, SY=1, SX=1, DY=1, DX=1, PY=0, PX=0, RANK=2)
        self.sizes = {"CONV_SIZES": _sizes.params(_sizes.CONV_2D), "KH": 1, "KW": 1,
                      "FUSED_BIAS": 0, "FUSED_RESIDUAL": 0, "FUSED_PRE_RELU": 0,
                      "FUSED_RELU": 0, "FUSED_GELU": 0}
        self.size_args = _sizes.args(self.g, _sizes.CONV_2D)
        u = transform_weights(plan.weights, g, block)              # [G][WE][OG][CG]
        self.weights = u.reshape(batch * m, k, 1, 1)
        self.args = (v, None, mt)
        self.device = plan.device


def cpu_winograd_launches(plan, block: int, tile: ConvBlocking) -> list[KernelLaunch]:
    """The input transform, the batched GEMM as conv_cpu_blocked's grouped 1x1 convolution,
    and the output transform with the layer's epilogue, for conv.py's ConvPlan on a CPU
    device (its sizes kernel arguments: the transforms take CONV_SIZES, then TILES_Y and
    TILES_X)."""
    g = plan.g
    v, mt = _scratch(g, block)
    program = defines(**plan.sizes, WINO_M=block, WINOGRAD_TRANSFORMS_ONLY=1) + \
        kernel_source("conv_winograd.cl")
    shape = plan.size_args + scalars(*tiles(g, block))
    label = "conv2d_3x3_cpu"
    gemm = [replace(launch, label=f"{label}_{prefix(block)}_gemm")
            for launch in blocked_launches(_GroupedPointPlan(plan, block, v, mt), tile)]
    return _around(gemm, program, g, block, plan.args, shape, v, mt, label)
