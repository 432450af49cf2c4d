"""The tiled GEMM that Convolution (implicit GEMM) and MatMul share: tile choice, NDRange, and
split-K for outputs too small to fill a GPU. Each front end supplies its own defines and
macros (how to read A and B, how to store C); gemm.cl does the rest.
"""
from __future__ import annotations

from typing import Mapping

from ..jit.launch import Arg, KernelLaunch
from ._program import cl_source, defines


def gemm_tiles(m: int, n: int) -> dict[str, int]:
    """Tile geometry for gemm.cl: 16x16 work items, each up to 4x4 outputs; thinner tiles for
    thin GEMMs so that few work items compute padding."""
    tm = 16 if m <= 16 else 32 if m <= 32 else 64
    tn = 16 if n <= 16 else 32 if n <= 32 else 64
    return {"TM": tm, "TN": tn, "TK": 16, "RM": tm // 16, "RN": tn // 16}


def gemm_sizes(tiles: Mapping[str, int], m: int, n: int, batch: int):
    """(global, local) NDRange for gemm_tiled: whole work-groups; the kernel guards the edge."""
    lx, ly = tiles["TN"] // tiles["RN"], tiles["TM"] // tiles["RM"]
    groups_n = -(-n // tiles["TN"])
    groups_m = -(-m // tiles["TM"])
    return (groups_n * lx, groups_m * ly, batch * tiles.get("KSPLIT", 1)), (lx, ly, 1)


# A GEMM with fewer tiles than this leaves a large GPU idle (an H100 has 132 compute units, and
# each wants two or more work-groups); split-K then cuts the K loop among more work-groups.
TARGET_GROUPS = 256
# ... but never into slices shorter than this many K steps, where the extra pass costs more
MIN_K_PER_SLICE = 128


def target_groups(device=None) -> int:
    """Work-groups that fill the device: two per compute unit when the network says which device
    (CompileContext.device, a jit.launch.DeviceTraits), else TARGET_GROUPS."""
    return 2 * device.compute_units if device is not None else TARGET_GROUPS


def gemm_split(tiles: Mapping[str, int], m: int, n: int, k: int, batch: int,
               target: int = TARGET_GROUPS) -> dict[str, int]:
    """The split-K factor for gemm.cl: {"KSPLIT": s, "KCHUNK": c, "BATCHES": batch} (s = 1:
    no split). Chunks are whole TK steps, and every slice gets at least one."""
    groups = -(-m // tiles["TM"]) * -(-n // tiles["TN"]) * batch
    ksplit = 1
    if groups < target:
        ksplit = max(1, min(-(-target // groups), k // MIN_K_PER_SLICE))
    tk = tiles["TK"]
    chunk = -(-(-(-k // ksplit)) // tk) * tk
    ksplit = -(-k // chunk)
    return {"KSPLIT": ksplit, "KCHUNK": chunk, "BATCHES": batch}


def gemm_launches(source: str, args: tuple, tiles: Mapping[str, int], m: int, n: int, k: int,
                  batch: int, label: str, target: int = TARGET_GROUPS) -> list[KernelLaunch]:
    """gemm_tiled over (m, n, batch), split along K where the output alone cannot fill a GPU.
    `source` holds the front end's defines and macros (without the tile and split defines)."""
    split = gemm_split(tiles, m, n, k, batch, target)
    plan = dict(tiles, **split)
    global_size, local_size = gemm_sizes(plan, m, n, batch)
    if split["KSPLIT"] == 1:
        return [KernelLaunch(source=defines(**tiles) + source + cl_source("gemm.cl"),
                             entry="gemm_tiled", args=args, global_size=global_size,
                             local_size=local_size, label=label)]
    src = defines(**plan) + source + cl_source("gemm.cl")
    partial = Arg.scratch(0, split["KSPLIT"] * batch * m * n * 4)
    total = batch * m * n
    return [KernelLaunch(source=src, entry="gemm_tiled", args=args + (partial,),
                         global_size=global_size, local_size=local_size,
                         label=f"{label}_k{split['KSPLIT']}"),
            KernelLaunch(source=src, entry="gemm_splitk_reduce", args=args + (partial,),
                         global_size=(-(-total // 64) * 64,), local_size=None,
                         label=f"{label}_reduce")]
