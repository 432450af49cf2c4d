"""The tiled GEMM that Convolution (implicit GEMM) and MatMul share: tile choice, NDRange, and
split-K for outputs too small to fill a GPU. Each front end supplies its own defines and
macros (how to read A and B, how to store C); gemm.cl does the rest.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ...jit.launch import Arg, KernelLaunch
from .._program import defines
from ._sizes import scalars
from ._variants import TK, GemmVariant, auto_split, legacy_tile, split_plan


def gemm_tiles(m: int, n: int) -> dict[str, int]:
    """Tile geometry for gemm.cl as chosen before tuning (the heuristic's first variant)."""
    tm, tn, rm, rn = legacy_tile(m, n)
    return {"TM": tm, "TN": tn, "TK": TK, "RM": rm, "RN": rn}


def gemm_sizes(tiles: Mapping[str, int], m: int, n: int, batch: int):
    """(global, local) NDRange for gemm_tiled: whole work-groups; the kernel guards the edge."""
    lx, ly = tiles["TN"] // tiles["RN"], tiles["TM"] // tiles["RM"]
    groups_n = -(-n // tiles["TN"])
    groups_m = -(-m // tiles["TM"])
    return (groups_n * lx, groups_m * ly, batch * tiles.get("KSPLIT", 1)), (lx, ly, 1)


# A GEMM with fewer tiles than this leaves a large GPU idle (an H100 has 132 compute units, and
# each wants two or more work-groups); split-K then cuts the K loop among more work-groups.
TARGET_GROUPS = 256


def target_groups(device=None) -> int:
    """Work-groups that fill the device: two per compute unit when the network says which device
    (CompileContext.device, a jit.launch.DeviceTraits), else TARGET_GROUPS."""
    return 2 * device.compute_units if device is not None else TARGET_GROUPS


def gemm_split(tiles: Mapping[str, int], m: int, n: int, k: int, batch: int,
               target: int = TARGET_GROUPS) -> dict[str, int]:
    """The split-K factor for gemm.cl: {"KSPLIT": s, "KCHUNK": c, "BATCHES": batch} (s = 1:
    no split). Chunks are whole TK steps, and every slice gets at least one."""
    s = auto_split(tiles["TM"], tiles["TN"], m, n, k, batch, target)
    return split_plan(GemmVariant(tiles["TM"], tiles["TN"], tiles["RM"], tiles["RN"], s), k,
                      batch)


@dataclass(frozen=True)
class GemmProblem:
    """One front end's GEMM (Convolution's implicit GEMM, MatMul): `source` holds its defines
    and macros (how to read A and B, how to store C; no tile or split defines, no sizes),
    `args` the layer's kernel arguments, its sizes last. A GemmVariant runs it under its
    tiling."""
    source: str
    args: tuple
    m: int
    n: int
    k: int
    batch: int
    label: str

    def launches(self, variant: GemmVariant) -> list[KernelLaunch]:
        return gemm_launches(self.source, self.args, variant, self.m, self.n, self.k,
                             self.batch, self.label)


def gemm_launches(source: str, args: tuple, variant: GemmVariant, m: int, n: int, k: int,
                  batch: int, label: str) -> list[KernelLaunch]:
    """gemm_tiled over (m, n, batch) with the variant's tiles, split along K when it says so.
    `source` holds the front end's defines and macros (without the tile and split defines)."""
    tiles = variant.tiles
    split = split_plan(variant, k, batch)
    plan = dict(tiles, **split)
    global_size, local_size = gemm_sizes(plan, m, n, batch)
    # (the pipeline's stages named too: profiles tell which kernel ran)
    label = f"{label}{variant.tm}x{variant.tn}_{variant.rm}x{variant.rn}" + \
        (f"_a{variant.stages}" if variant.stages else "")
    if split["KSPLIT"] == 1:
        return [KernelLaunch(source=defines(**tiles) + source,
                             entry="gemm_tiled", args=args, global_size=global_size,
                             local_size=local_size, label=label)]
    # the variant's slice count is a #define; the slice length, the batch count and the slices
    # the shape's K gives (at most the variant's) are arguments, after the front end's.
    # (Tried on an H100: one launch, the tile's last slice to finish adding the partial sums
    # after an atomic count per tile. ResNet-50 b1 went from 99 to 82 launches, but its kernels
    # took 1.33-1.36 ms against 1.13-1.31: the last slice sums up to 33 partials per output
    # alone, at the end of the wave. The reduce pass stays.)
    src = defines(**tiles, KSPLIT=variant.ksplit) + source
    partial = Arg.scratch(0, split["KSPLIT"] * batch * m * n * 4)
    args = args + (partial,) + scalars(split["KCHUNK"], split["BATCHES"], split["KSPLIT"])
    total = batch * m * n
    return [KernelLaunch(source=src, entry="gemm_tiled", args=args,
                         global_size=global_size, local_size=local_size,
                         label=f"{label}_k{split['KSPLIT']}"),
            KernelLaunch(source=src, entry="gemm_splitk_reduce", args=args,
                         global_size=(-(-total // 64) * 64,), local_size=None,
                         label=f"{label}_reduce")]
