"""The space of tiled-GEMM kernel variants (gemm.cl) and the heuristic that ranks it: pure
description, no device. Convolution (implicit GEMM) and MatMul list these as GemmVariant
objects (jit/variant.py) from `LayerImpl.variants`; runtime/tuning/tuning.py times the first few on
the device and hands the winner back through CompileContext.variant (OpenPPL's runtime
algorithm selection: a solution space, an empirical formula that picks candidates, then JIT
and timing).

A variant is named `gemm{TM}x{TN}_{RM}x{RN}_k{S}` (its fields written out, for the tuning
cache): a TM x TN output tile per work-group, RM x RN outputs per work item, and the K loop cut
into S slices (split-K; S = 1: none); `_a{P}` after it, gemm_async.cl's pipeline of P __local
stages (on devices with cp.async, where the operands allow it: async_variants). Every variant
sums each output's K terms in the same order except split-K, which adds S partial sums: results
differ by fp32 rounding at most.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ...jit.variant import KernelVariant

TK = 16
# work items per group: fewer leave a GPU's SIMD lanes idle, more than 256 are refused by many
# drivers for a kernel with this much __local memory
MIN_THREADS, MAX_THREADS = 64, 256
# the whole space `--tuning full` times per layer (each candidate is a program to build)
MAX_VARIANTS = 16
# never a split-K slice shorter than this many K steps (the extra pass would cost more)
MIN_K_PER_SLICE = 128
# gemm.cl indexes the partial sums of a split (S x batch x M x N floats) with an int: a split
# that would pass 2^31 of them writes out of bounds, so none is offered (a split to round the
# waves up is one of a large output)
MAX_PARTIAL_SUMS = 2 ** 31 - 1


@dataclass(frozen=True)
class GemmVariant(KernelVariant):
    """A tiling of gemm.cl. Its launches are the front end's GEMM (`plan.gemm()`, a
    _gemm.GemmProblem: Convolution's implicit GEMM, MatMul's) under this tiling."""
    tm: int
    tn: int
    rm: int
    rn: int
    ksplit: int = 1
    # > 0: gemm_async.cl's pipeline of this many __local stages (copies without registers;
    # PTX cp.async where the device has it): only where the plan allows it (`applies`)
    stages: int = 0

    @property
    def name(self) -> str:
        pipeline = f"_a{self.stages}" if self.stages else ""
        return f"gemm{self.tm}x{self.tn}_{self.rm}x{self.rn}_k{self.ksplit}{pipeline}"

    @property
    def tiles(self) -> dict[str, int]:
        tiles = {"TM": self.tm, "TN": self.tn, "TK": TK, "RM": self.rm, "RN": self.rn}
        if self.stages:
            tiles.update(GEMM_STAGES=self.stages, GEMM_WAIT=self.stages - 2)
        return tiles

    @property
    def threads(self) -> int:
        return (self.tm // self.rm) * (self.tn // self.rn)

    @property
    def local_bytes(self) -> int:
        """__local memory of the pipeline's stages (each tile in its larger layout)."""
        a_tile = max(self.tm * (TK + 4), TK * (self.tm + 4))
        b_tile = max(self.tn * (TK + 4), TK * (self.tn + 4))
        return self.stages * (a_tile + b_tile) * 4

    def applies(self, plan) -> bool:
        if not self.stages:
            return True
        device = getattr(plan, "device", None)
        return bool(getattr(plan, "async_tiles", False)) and self.rm % 4 == 0 and \
            self.rn % 4 == 0 and self.stages >= 2 and \
            (device is None or self.local_bytes <= device.local_mem_size)

    def launches(self, plan) -> list:
        return plan.gemm().launches(self)


def legacy_tile(m: int, n: int) -> tuple[int, int, int, int]:
    """The fixed choice before tuning (16x16 work items, up to 4x4 outputs each; thinner tiles
    for thin GEMMs): the heuristic keeps it first, so `--tuning off` runs what it always ran."""
    tm = 16 if m <= 16 else 32 if m <= 32 else 64
    tn = 16 if n <= 16 else 32 if n <= 32 else 64
    return tm, tn, tm // 16, tn // 16


def auto_split(tm: int, tn: int, m: int, n: int, k: int, batch: int, target: int) -> int:
    """Split-K factor that lets a small output fill `target` work-groups (1: none)."""
    groups = -(-m // tm) * -(-n // tn) * batch
    if groups >= target:
        return 1
    return max(1, min(-(-target // groups), k // MIN_K_PER_SLICE, max_split(m, n, batch)))


def max_split(m: int, n: int, batch: int) -> int:
    """The most slices whose partial sums gemm.cl can index (MAX_PARTIAL_SUMS)."""
    return MAX_PARTIAL_SUMS // max(m * n * batch, 1)


def _tiles(m: int, n: int, max_threads: int):
    """Tiles of 32 to 128 (16 for a side of 16 or less), near-square blocks of 4 to 64 outputs
    per work item, 64 to max_threads work items: the shapes that do well on GPUs. One more:
    128 x 128 tiles of 16 x 8 blocks (128 work items of 128 outputs): the most reuse per
    __local read, the H100's fastest on GEMMs of a few thousand rows and columns (41.7 TFLOP/s
    against 37.8 for 8 x 8 blocks on 4096 x 3072 x 768, stop 24); 8 x 16 measured no better."""
    for tm in (16, 32, 64, 128):
        for tn in (16, 32, 64, 128):
            if (tm == 16 and m > 16) or (tn == 16 and n > 16) or tm > 2 * max(m, 32) or \
                    tn > 2 * max(n, 32):
                continue                                 # mostly padding, or too thin
            for rm in (1, 2, 4, 8):
                for rn in (1, 2, 4, 8):
                    if rm > tm // 4 or rn > tn // 4 or not 4 <= rm * rn <= 64 or \
                            max(rm, rn) > 2 * min(rm, rn):
                        continue
                    threads = (tm // rm) * (tn // rn)
                    if MIN_THREADS <= threads <= max_threads:
                        yield tm, tn, rm, rn
            if tm == tn == 128 and 128 <= max_threads:
                yield tm, tn, 16, 8


def _fragment(r: int) -> int:
    """Values a work item reads from __local memory at once along a block of r (gemm.cl's FM,
    FN)."""
    return 4 if r % 4 == 0 else 1


# An NVIDIA-sized compute unit (register file, resident work items and groups), for the
# occupancy a tiling leaves; other GPUs differ, and the tuner's timing has the last word
UNIT_REGISTERS, UNIT_THREADS, UNIT_GROUPS = 65536, 2048, 16
# registers a work item holds besides its outputs (fitted to ptxas's reports and timings on an
# H100, stop 24: 8x8 blocks take 127, 16x8 blocks 245)
BASE_REGISTERS = 96
# split-K slices shorter than this lose more to the partial sums than the fuller device wins
# (K = 768 split in 2 or 4 was slower for every tiling measured on the H100, stop 24)
MIN_K_PER_WAVE_SLICE = 512


def resident_groups(v: GemmVariant) -> int:
    """Work-groups of the variant one compute unit holds at once (registers, then threads)."""
    registers = v.rm * v.rn + BASE_REGISTERS
    return max(1, min(UNIT_REGISTERS // (v.threads * registers), UNIT_THREADS // v.threads,
                      UNIT_GROUPS))


def wave_fill(v: GemmVariant, m: int, n: int, batch: int, units: int) -> float:
    """The share of the device's resident slots the launch keeps busy over its waves: 192
    groups on 264 slots fill 0.73 of the one wave, 768 groups 0.97 of three."""
    groups = -(-m // v.tm) * -(-n // v.tn) * batch * v.ksplit
    slots = resident_groups(v) * units
    return groups / (-(-groups // slots) * slots)


def estimated_cost(v: GemmVariant, m: int, n: int, k: int, batch: int, target: int) -> float:
    """A rough relative time: the padded multiply-adds, divided by what the tile shape earns
    (register reuse per __local read, global reuse per tile) and by how fully its waves occupy
    the device (target is two groups per compute unit, _gemm.target_groups). Fitted to the
    H100's timings of 8 GEMM shapes (stop 24): its three cheapest held the fastest measured
    tiling, or one within 5% of it, on 7 of them."""
    units = max(1, target // 2)
    padded = -(-m // v.tm) * v.tm * -(-n // v.tn) * v.tn * batch * max(k, 1)
    # FMAs per __local read instruction: gemm.cl reads a block that is a multiple of 4 as
    # float4s, so 8x8 outputs cost 4 reads per k step where 2x4 cost 3
    per_item = v.rm * v.rn / (v.rm // _fragment(v.rm) + v.rn // _fragment(v.rn))
    per_tile = v.tm * v.tn / (v.tm + v.tn)          # FMAs per global value read
    cost = padded / ((per_item / (per_item + 2)) * (per_tile / (per_tile + 8)) *
                     wave_fill(v, m, n, batch, units))
    if v.ksplit > 1:                                # partial sums out and back in
        cost += (v.ksplit + 1) * m * n * batch * 64
    return cost


# the tuner asks for every layer, and a network repeats its shapes (ResNet-50's 53
# convolutions have 20); with nothing chosen, the layer asks for the first too
@lru_cache(maxsize=4096)
def gemm_variants(m: int, n: int, k: int, batch: int, target: int,
                  max_threads: int = MAX_THREADS) -> tuple[GemmVariant, ...]:
    """Every variant for this GEMM, the legacy choice first, then cheapest estimate first."""
    max_threads = min(max_threads, MAX_THREADS)
    found: dict[str, GemmVariant] = {}
    for tm, tn, rm, rn in _tiles(m, n, max_threads):
        for s in split_choices(tm, tn, m, n, k, batch, target):
            v = GemmVariant(tm, tn, rm, rn, s)
            found[v.name] = v
    ranked = sorted(found.values(), key=lambda v: estimated_cost(v, m, n, k, batch, target))
    tm, tn, rm, rn = legacy_tile(m, n)
    first = GemmVariant(tm, tn, rm, rn, auto_split(tm, tn, m, n, k, batch, target))
    rest = tuple(v for v in ranked if v != first)
    return (first,) + rest[:MAX_VARIANTS - 1]


# gemm_async.cl's tilings, fastest first on an H100 (stop 24, TFLOP/s on BERT/ViT shapes:
# 64x128 of 8x8 blocks with 2 stages 38-43, 64x64 with 3 stages 37-41, 128x64 with 3 36-38).
# 128x128 tiles were timed again on ViT-B/16 b32's four GEMMs with their epilogues (H100,
# later): 16x8 blocks 22-37 TFLOP/s, 8x8 30-41, 8x16 21-34, against 35-42 for the first above
# (cuBLAS runs the K = 3072 one at 45 with 128x128 tiles); none was added
ASYNC_TILINGS = ((64, 128, 8, 8, 2), (64, 64, 8, 8, 3), (128, 64, 8, 8, 3))


def async_variants(m: int, n: int, k: int, batch: int, target: int) -> tuple[GemmVariant, ...]:
    """gemm_async.cl's tilings for this GEMM, each with the split-K (none, or one that rounds
    the waves up on a long K) the estimate prefers."""
    found = []
    for tm, tn, rm, rn, stages in ASYNC_TILINGS:
        found.append(min((GemmVariant(tm, tn, rm, rn, s, stages)
                          for s in split_choices(tm, tn, m, n, k, batch, target)),
                         key=lambda v: estimated_cost(v, m, n, k, batch, target)))
    return tuple(found)


def fills_device(m: int, n: int, batch: int, target: int) -> bool:
    """Whether the pipeline's first tiling has at least one whole tile of columns and gives
    the device (target: two work-groups per compute unit, _gemm.target_groups) a work-group per
    compute unit before any split-K: a GEMM large enough for the pipeline's latency hiding to
    pay for its build. A pipelined program takes 0.6-1.1 s to build on an H100, gemm.cl's
    smaller tilings 0.2-0.35 s, and --tuning fast builds every candidate it times on a model's
    first load (ResNet-50 b1's with the pipelined forms timed: 9.65-11.12 s against
    8.66-9.12 s before them, the same H100, interleaved)."""
    tm, tn = ASYNC_TILINGS[0][:2]
    return n >= tn and -(-m // tm) * -(-n // tn) * batch >= max(1, target // 2)


def with_pipeline(listed: tuple, plan, m: int, n: int, k: int, batch: int,
                  target: int) -> tuple:
    """`listed` with gemm_async.cl's tilings right after its first (the heuristic's choice,
    what `--tuning off` runs), so that `--tuning fast` times them: where the plan's device has
    cp.async and its operands allow the pipeline (the plan's `async_tiles`: MatMul's, a 1x1
    convolution's). A plan whose input is copied a value at a time (`async_by_value`: a 1x1
    convolution over 7x7 planes, or strided) has them there only where the GEMM fills the
    device (fills_device), else last (timed by `full`): at batch 1 they cost a cold load
    their builds and won nothing measured."""
    device = plan.device
    if device is None or not device.async_copy or not plan.async_tiles:
        return listed
    piped = tuple(v for v in async_variants(m, n, k, batch, target) if v.applies(plan))
    if getattr(plan, "async_by_value", False) and not fills_device(m, n, batch, target):
        return tuple(listed) + piped
    return tuple(listed[:1]) + piped + tuple(listed[1:])


def pipeline_defines(device, on_cpu: bool) -> dict:
    """The front end's defines of gemm.cl for the device: on a GPU whose traits say it has
    cp.async, GEMM_ASYNC_PTX (gemm_async.cl's copies in PTX, read only by its variants); on a
    CPU device, GEMM_ROLLED (its loops not unrolled: PoCL compiles a variant in a third of the
    time, and a CPU runs its own GEMM kernels unless it times these)."""
    if on_cpu:
        return {"GEMM_ROLLED": 1}
    return {"GEMM_ASYNC_PTX": 1} if device is not None and device.async_copy else {}


def split_choices(tm: int, tn: int, m: int, n: int, k: int, batch: int,
                  target: int) -> list[int]:
    """The split-K factors worth ranking for a tile: none, the one that fills the device
    (auto_split), and where K is long those that round the waves up (wave_fill), never more
    partial sums than gemm.cl indexes (max_split)."""
    waves = {s for s in (2, 3, 4)
             if k // s >= MIN_K_PER_WAVE_SLICE and s <= max_split(m, n, batch)}
    return sorted({1, auto_split(tm, tn, m, n, k, batch, target)} | waves)


def split_plan(v: GemmVariant, k: int, batch: int) -> dict[str, int]:
    """gemm.cl's split defines for the variant: KSPLIT slices of KCHUNK (whole TK steps)."""
    chunk = -(-(-(-k // v.ksplit)) // TK) * TK
    return {"KSPLIT": -(-k // chunk), "KCHUNK": chunk, "BATCHES": batch}
