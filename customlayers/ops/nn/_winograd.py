"""Winograd F(2x2, 3x3) for 3x3, stride-1 convolutions on GPUs: when it applies, the variants
the tuner may time, the weight transform (done here once, at compile time), and the three
launches of conv_winograd.cl (input transform, a batched GEMM on the shared gemm.cl, output
transform with the fused epilogue). The batched GEMM is one per group and element of the 4x4
tile, the images side by side along its N, and runs under gemm.cl's tilings or, on devices
with cp.async, gemm_async.cl's pipeline (its operands are plain matrices in whole float4s).

It computes a 2x2 output block with 16 multiplies per channel pair where the implicit GEMM
spends 36 (2.25x fewer), at the cost of two extra passes through memory (the transformed input
V is 4x the input, the GEMM's output M 4x the output): a win where the layer is
compute-bound (many channels), a loss where the channels are few. Rounding: the input and
output transforms combine at most 4 terms per side, the weight transform's 0.5s are exact (and
it runs in float64), and each GEMM element sums CG terms where the direct kernel chains CG * 9:
the error measures at or below the direct kernel's (tests/device/test_conv_winograd.py states the
bound it is held to).

Variants (WinogradVariant): `winograd2x2` (the batched GEMM under the GEMM heuristic's tiling)
and `winograd2x2_<gemm variant>` (under that tiling, ops/nn/_variants.py's names; `_a<P>`:
the pipeline's).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ...jit.launch import Arg, KernelLaunch
from ...jit.variant import KernelVariant
from ._gemm import gemm_launches
from ._sizes import scalars
from .._program import defines, kernel_source
from ._variants import GemmVariant, async_variants, gemm_variants, pipeline_defines

PREFIX = "winograd2x2"
# F(2x2, 3x3)'s weight transform G (4x3): U = G g G^T
G_MATRIX = np.array([[1.0, 0.0, 0.0],
                     [0.5, 0.5, 0.5],
                     [0.5, -0.5, 0.5],
                     [0.0, 0.0, 1.0]])
# below these channels per group the GEMM is too thin for the saved multiplies to pay for the
# two extra passes through memory: Winograd is still listed, but last (timed by `full` only)
PROMISING_CG = PROMISING_OG = 16
# every scratch buffer stays under the smallest CL_DEVICE_MAX_MEM_ALLOC_SIZE that OpenCL allows
# a GPU (128 MiB): past it, the network would refuse to compile a choice the tuner made
MAX_SCRATCH_BYTES = 128 << 20
# the batched GEMM's NDRange dimension 2 holds G * 16 work-groups (times its split-K slices):
# CUDA-based drivers map it to a grid's z extent, which stops at 65535
MAX_GEMM_BATCH = 65535
# the transforms' NDRange dimension 0 (tiles) is padded to a multiple of this
TILE_MULTIPLE = 32
# other GEMM tilings listed for `full` (the heuristic's next cheapest)
EXTRA_TILINGS = 2


def tiles(g: Mapping[str, int]) -> tuple[int, int]:
    """(TILES_Y, TILES_X): 2x2 output blocks per image, a partial one at each far edge."""
    return -(-g["OH"] // 2), -(-g["OW"] // 2)


def columns(g: Mapping[str, int]) -> tuple[int, int]:
    """(NT, NP): the GEMM's columns that are tiles (every image's, side by side), and V's and
    M's row length, NT rounded up to whole float4s (conv_winograd.cl's NT and NP)."""
    ty, tx = tiles(g)
    nt = g["NB"] * ty * tx
    return nt, -(-nt // 4) * 4


def _gemm_shape(g: Mapping[str, int]) -> tuple[int, int, int, int]:
    """(m, n, k, batch) of the batched GEMM: M[e] = U[e] (OG x CG) x V[e] (CG x NP) for each
    group and element e of the 4x4 tile."""
    return g["OG"], columns(g)[1], g["CG"], g["G"] * 16


def _scratch_bytes(g: Mapping[str, int]) -> tuple[int, int]:
    """Bytes of V [G][16][CG][NP] and of M [G][16][OG][NP]."""
    m, n, k, batch = _gemm_shape(g)
    return batch * k * n * 4, batch * m * n * 4


def applies(g: Mapping[str, int], weights: np.ndarray | None) -> bool:
    """A 2-D 3x3 window, stride and dilation 1, weights known at compile time (the transform is
    done on the host), scratch buffers every GPU can allocate, and a GEMM batch every driver
    launches."""
    return (weights is not None and g["RANK"] == 2 and g["KH"] == g["KW"] == 3
            and g["SY"] == g["SX"] == g["DY"] == g["DX"] == 1
            and max(_scratch_bytes(g)) <= MAX_SCRATCH_BYTES
            and _gemm_shape(g)[3] <= MAX_GEMM_BATCH)


@dataclass(frozen=True)
class WinogradVariant(KernelVariant):
    """Winograd F(2x2, 3x3) with its batched GEMM under `tiling` (None: the GEMM heuristic's
    first). Its plan is conv.py's (_conv_variants.ConvPlan)."""
    tiling: GemmVariant | None = None
    needs = "a 3x3, stride-1 window and constant weights"

    @property
    def name(self) -> str:
        return PREFIX if self.tiling is None else f"{PREFIX}_{self.tiling.name}"

    def applies(self, plan) -> bool:
        return not plan.on_cpu and applies(plan.g, plan.weights) and \
            (self.tiling is None or self.tiling.applies(_GemmOperands(plan)))

    def launches(self, plan) -> list[KernelLaunch]:
        return winograd_launches(plan.g, plan.sizes, plan.weights, plan.args, plan.size_args,
                                 self.tiling, plan.target, f"conv2d_{plan.shape}",
                                 plan.device, plan.on_cpu)


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
    """The GEMM variants of the plan (a ConvPlan) with Winograd's added where it applies. The
    heuristic's first choice stays first; for layers with many channels `winograd2x2` comes
    second, after its pipelined form where the device has cp.async (so that `--tuning fast`,
    which times the first four, times both), and after the GEMMs otherwise; other tilings of
    its GEMM come last (timed by `full`)."""
    g = plan.g
    if not applies(g, plan.weights):
        return gemms
    m, n, k, batch = _gemm_shape(g)
    tilings = gemm_variants(m, n, k, batch, plan.target, plan.max_threads)[1:1 + EXTRA_TILINGS]
    operands = _GemmOperands(plan)
    piped = () if plan.device is None or not plan.device.async_copy else tuple(
        v for v in async_variants(m, n, k, batch, plan.target) if v.applies(operands))
    first = tuple(WinogradVariant(tiling) for tiling in piped[:1]) + (WinogradVariant(),)
    extra = tuple(WinogradVariant(tiling) for tiling in piped[1:] + tilings)
    if g["CG"] >= PROMISING_CG and g["OG"] >= PROMISING_OG:
        return gemms[:1] + first + gemms[1:] + extra
    return gemms + first + extra


def transform_weights(weights: np.ndarray, g: Mapping[str, int]) -> np.ndarray:
    """OIYX (or GOIYX) 3x3 weights -> U = G w G^T as [G][16][OG][CG] float32 (element e = 4i+j
    of the 4x4 outermost per group, so one GEMM's A is one contiguous OG x CG matrix). Computed
    in float64, rounded once."""
    w = np.asarray(weights, np.float64).reshape(g["G"], g["OG"], g["CG"], 3, 3)
    # two tensordots (BLAS) rather than one three-operand einsum: the same sums, 2.3x faster
    # (ResNet-50's 512x512 layer: 0.06 s, 0.14 s), and every load of a model does this again
    wg = np.tensordot(w, G_MATRIX, axes=([4], [1]))             # [G][OG][CG][k][j]
    u = np.tensordot(G_MATRIX, wg, axes=([1], [3]))             # [i][G][OG][CG][j]
    u = u.transpose(1, 0, 4, 2, 3)                              # [G][i][j][OG][CG]
    return np.ascontiguousarray(u.reshape(g["G"], 16, g["OG"], g["CG"]), np.float32)


def winograd_launches(g: Mapping[str, int], sizes: Mapping[str, int], weights: np.ndarray,
                      args: tuple, size_args: tuple, tiling: GemmVariant | None, target: int,
                      label: str, device=None, on_cpu: bool = False) -> list[KernelLaunch]:
    """The launches for geometry `g` with the batched GEMM under `tiling` (None: the
    heuristic's first) (conv.py's _geometry, with `sizes` its defines: the window, the size
    parameters' list, the FUSED_* flags). `args` are the layer's (input, weights, output[, bias]
    [, residual]): the transformed weights replace input 1; `size_args` the sizes (ConvPlan's),
    which every kernel takes after its buffers, then TILES_Y and TILES_X. `device` (DeviceTraits
    or None) and `on_cpu` choose the GEMM's float4 reads and its pipeline's copies."""
    m, n, k, batch = _gemm_shape(g)
    ty, tx = tiles(g)
    nt, _ = columns(g)
    if tiling is None:
        tiling = gemm_variants(m, n, k, batch, target)[0]
    v_bytes, m_bytes = _scratch_bytes(g)
    # scratch 0 is the GEMM's split-K partial sums, when it splits
    v, mt = Arg.scratch(1, v_bytes), Arg.scratch(2, m_bytes)
    u = Arg.const(transform_weights(weights, g))
    vec_a, vec_b = vector_reads(g, on_cpu)
    source = defines(**sizes, GEMM_VEC_A=vec_a, GEMM_VEC_B=vec_b,
                     **pipeline_defines(device, on_cpu)) + kernel_source("conv_winograd.cl")
    shape = size_args + scalars(ty, tx)
    gemm = gemm_launches(source, (v, u, mt) + shape, tiling, m, n, k, batch,
                         f"{label}_{PREFIX}_gemm")
    # the transforms are in the GEMM's program: one build per variant
    program = gemm[0].source
    # columns rounded up to whole warps, so the driver's work-group is never an odd divisor of
    # the column count (the kernels guard the tail): the input transform writes all NP (its
    # padding zeros), the output transform reads the NT that are tiles
    def whole(items: int) -> int:
        return -(-items // TILE_MULTIPLE) * TILE_MULTIPLE
    return ([KernelLaunch(source=program, entry="winograd_input", args=(args[0], v) + shape,
                          global_size=(whole(n), k, g["G"]), label=f"{label}_{PREFIX}_input")]
            + gemm +
            [KernelLaunch(source=program, entry="winograd_output",
                          args=(mt,) + tuple(args[2:]) + shape,
                          global_size=(whole(nt), m, g["G"]),
                          label=f"{label}_{PREFIX}_output")])
