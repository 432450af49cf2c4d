"""TemporalBlocks: a run of TCN temporal blocks as one launch (temporal_blocks.cl), made by the
graph rewrite passes/temporal/block_fusion.py; not a layer a model names.

Each block maps (N, C_in, T) to (N, C_out, T):
    h = relu(conv1(x) + b1); h2 = relu(conv2(h) + b2); out = relu(h2 + residual)
where conv1 and conv2 are causal dilated 1-D convolutions (padding (k-1)*d before the start
only) and the residual is x itself (C_in == C_out) or a 1x1 convolution of it plus a bias.
On the GPU a launch costs about 10 us, as much as such a block's work at batch 1: the seed's TCN
(8 blocks, 25 channels) ran in 17 launches, and runs in 4 of these (on an H100 at batch 1,
0.10-0.11 ms of kernels against 0.16-0.25 ms unfused: a GPU's default, launch_bound).

Attributes (text, as the rewrite writes them): channels (C_0, C_1, ..., C_n: block i maps
C_i to C_i+1), kernels and dilations (two per block: conv1's, conv2's), downsample (one 0/1 per
block). Input 1 holds every block's weights and biases, packed by `pack_block`: one buffer.

The work-groups tile (batch, residue mod D, phase position): D is the gcd of the run's
dilations, so each residue is an independent sequence (temporal_blocks.cl says more) and the
deep blocks' halo, in phase positions, stays as small as the shallow ones'. The tile is chosen
per launch from the device's local memory (CL_DEVICE_LOCAL_MEM_SIZE) by a small cost model, or
by the tuner (runtime/tuning) timing the model's choice against smaller tiles that give every
compute unit work (TileVariant, tile_candidates).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import numpy as np

from ...errors import BindingError
from ...jit.launch import Arg, DEFAULT_CONTEXT, DeviceTraits, KernelLaunch
from ...jit.variant import KernelVariant
from .._program import program_text, shape_of
from ..base import Attr, Op, register_op

FIELDS = 16                       # ints per block in the kernel's table (temporal_blocks.cl)
# every conformant (full profile) OpenCL device has this much local memory: a run the rewrite
# fuses fits it with a useful tile, so no device needs the unfused graph back
GUARANTEED_LOCAL_BYTES = 32 * 1024
MIN_TILE = 16                     # phase positions of the smallest tile worth a launch
# a GPU's step that reads its weights from global memory (WLOCAL 0), against local: the seed's
# TCN's runs at batch 1 on an H100, the same tile (.device/probe/tcn_tiles.py)
GLOBAL_WEIGHT_COST = 2.4
_INT_LIMIT = 2 ** 31 - 1
# A GPU fuses a run by default (Network's fuse_temporal_blocks=None) where each of its
# convolutions, as a launch of its own, is launch-bound: at most this many multiply-adds per
# compute unit. On an H100 (.device/probe/tcn_fuse_batches.py, the seed's TCN, the inference
# with device buffers, fused against unfused) the fused runs took 0.74x at batch 1, 0.52-0.70x
# at 2 to 16, 0.90x at 32 (a convolution 0.83 M multiply-adds a unit) and 1.25x at 64 (1.66 M):
# past that, recomputing each tile's halo costs more than the launches saved.
LAUNCH_BOUND_MACS_PER_UNIT = 1_200_000


@dataclass(frozen=True)
class BlockShape:
    """One temporal block: channels in and out, each convolution's kernel size and dilation,
    and whether the residual is a 1x1 convolution (else x itself)."""
    cin: int
    cout: int
    k1: int
    d1: int
    k2: int
    d2: int
    down: bool


def _padded(c: int) -> int:
    return -(-c // 4) * 4


def block_sizes(block: BlockShape) -> list[int]:
    """Floats of w1, b1, w2, b2, wd, bd in the packed layout (wd, bd 0 without downsample)."""
    cip, cop = _padded(block.cin), _padded(block.cout)
    down = int(block.down)
    return [cip * block.k1 * cop, cop, cop * block.k2 * cop, cop, down * cip * cop, down * cop]


def packed_size(blocks: list[BlockShape]) -> int:
    return sum(sum(block_sizes(b)) for b in blocks)


def pack_block(w1, b1, w2, b2, wd=None, bd=None) -> np.ndarray:
    """One block's weights (conv weights (C_out, C_in, k); biases (C_out,) or None) as the
    kernel reads them: each weight [C_in rounded up to 4][tap][C_out rounded up to 4], zero
    padded (the kernel reads its input channels four at a time)."""
    cout = w1.shape[0]
    cop = _padded(cout)

    def weight(w):
        w = np.asarray(w, np.float32).transpose(1, 2, 0)          # [cin][tap][cout]
        cin = w.shape[0]
        return np.pad(w, ((0, _padded(cin) - cin), (0, 0), (0, cop - cout))).reshape(-1)

    def bias(b):
        b = np.zeros(cout, np.float32) if b is None else np.asarray(b, np.float32).reshape(-1)
        return np.pad(np.broadcast_to(b, (cout,)), (0, cop - cout))

    parts = [weight(w1), bias(b1), weight(w2), bias(b2)]
    if wd is not None:
        parts += [weight(wd), bias(bd)]
    return np.concatenate(parts).astype(np.float32)


def halos(blocks: list[BlockShape], dil: int) -> list[tuple[int, int, int]]:
    """Per block, (input, middle, output) halo in phase positions: how far before a tile's
    first position each of its windows starts for the last block's tile to be exact."""
    out, found = 0, []
    for b in reversed(blocks):
        mid = out + (b.k2 - 1) * (b.d2 // dil)
        inp = mid + (b.k1 - 1) * (b.d1 // dil)
        found.append((inp, mid, out))
        out = inp
    return found[::-1]


def run_dilation(blocks: list[BlockShape]) -> int:
    return math.gcd(*(d for b in blocks for d in (b.d1, b.d2)))


def _channels(blocks: list[BlockShape]) -> int:
    return max(_padded(c) for b in blocks for c in (b.cin, b.cout))


def launch_bound(blocks: list[BlockShape], batch: int, length: int,
                 device: DeviceTraits) -> bool:
    """Whether one launch for the run beats one per convolution on `device`: a GPU whose
    every convolution of the run is at most LAUNCH_BOUND_MACS_PER_UNIT multiply-adds a compute
    unit. Never a CPU: PoCL ran the fused kernel 2x slower (passes/__init__.py)."""
    if device.kind == "CPU":
        return False
    most = max(batch * length * b.cout * max(b.cin * b.k1, b.cout * b.k2) for b in blocks)
    return most <= LAUNCH_BOUND_MACS_PER_UNIT * max(device.compute_units, 1)


def _region_bytes(channels: int, window: int, residues: int) -> int:
    """The three activation regions of a tile: each channel's row holds the window's positions
    and one of zeros (the causal padding), per residue."""
    return 3 * channels * (window + 1) * residues * 4


def min_local_bytes(blocks: list[BlockShape], length: int | None = None) -> int:
    """Local memory of the smallest tile worth a launch (MIN_TILE positions, one residue)."""
    dil = run_dilation(blocks)
    window = MIN_TILE + halos(blocks, dil)[0][0]
    if length is not None:
        window = min(window, -(-length // dil))
    return _region_bytes(_channels(blocks), window, 1)


def fits_every_device(blocks: list[BlockShape], length: int | None = None) -> bool:
    """The smallest useful tile of the run fits the local memory every OpenCL device has."""
    guaranteed = DeviceTraits("GPU", local_mem_size=GUARANTEED_LOCAL_BYTES)
    return min_local_bytes(blocks, length) <= local_budget(guaranteed)


@dataclass(frozen=True)
class Tile:
    r: int            # residues per work-group
    m: int            # phase positions per work-group
    pb: int           # positions per work item (the program's PB)
    window: int       # the largest window (tile and halo) in phase positions
    local_size: int
    r_tiles: int
    m_tiles: int
    phase_len: int
    local_bytes: int
    # each stage's weights copied to local memory first (the program's WLOCAL): a GPU's
    # choice where they fit (an H100 ran the seed's TCN's runs 2.2-2.6x faster at batch 1)
    wlocal: bool = False


def stage_weight_bytes(blocks: list[BlockShape]) -> int:
    """The largest stage's weights, bias and downsample as packed (WLOCAL's local region)."""
    most = 0
    for b in blocks:
        w1, b1, w2, b2, wd, bd = block_sizes(b)
        most = max(most, w1 + b1, w2 + b2 + wd + bd)
    return 4 * most


def local_budget(device: DeviceTraits | None) -> int:
    """The local memory a work-group may take: the device's less 1 KB (a driver may keep some
    for itself), a CPU's capped near its L2 (PoCL reports megabytes, which a tile would only
    spill from the cache)."""
    device = device or DeviceTraits()
    size = device.local_mem_size - 1024
    return min(size, 256 * 1024) if device.kind == "CPU" else size


def _stages(blocks, hs, r: int, m: int, pb: int, phase_len: int) -> list[tuple[int, int]]:
    """(work items, loop iterations per item) of each convolution stage of a tile."""
    stages = []
    for b, (_, mid, out) in zip(blocks, hs):
        cbs = _padded(b.cout) // 4
        stages.append((cbs * r * -(-min(m + mid, phase_len) // pb), b.cin * b.k1))
        stages.append((cbs * r * -(-min(m + out, phase_len) // pb),
                       b.cout * b.k2 + b.cin * b.down))
    return stages


def _tiles(blocks: list[BlockShape], batch: int, length: int,
           device: DeviceTraits | None) -> list[tuple[float, Tile, int]]:
    """(estimated time, tile, work-groups) of every tile whose three regions (and on a GPU,
    for a tile with wlocal, the largest stage's weights) fit the device's local memory.
    Counted in instructions of a loop iteration (a weight load, PB local loads, 4 * PB
    multiply-adds, the index arithmetic): a compute unit's time is the larger of its
    work-groups' instructions over its issue rate (GPU: 4 warps a cycle; CPU: one core of
    `float_vector_width` lanes) and their chains of iterations one after another, as many at
    once as fit (batch 1 on a GPU is this latency: few, short chains win)."""
    device = device or DeviceTraits()
    dil = run_dilation(blocks)
    phase_len = -(-length // dil)
    hs = halos(blocks, dil)
    ch = _channels(blocks)
    budget = local_budget(device)
    gpu = device.kind != "CPU"
    warp, issue = (32, 4) if gpu else (max(device.float_vector_width, 1), 1)
    max_group = max(1, min(512 if gpu else 256, device.max_work_group_size))
    found = []
    # a GPU stages each stage's weights in local memory where they fit beside the tile (one
    # read of the L2 a stage, not one a multiply-add step); a CPU reads them where they are
    weight_options = ((stage_weight_bytes(blocks), True), (0, False)) if gpu else ((0, False),)
    r_options = [r for r in (32, 16, 8, 4, 2, 1) if r <= dil] or [1]
    m_options = sorted({m for m in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
                        if m < phase_len} | {phase_len})
    for (wbytes, wlocal), pb, r, m in ((w, pb, r, m) for w in weight_options for pb in (4, 1)
                                       for r in r_options for m in m_options):
        per_iteration = (5 * pb + 4) * (1 if wlocal or not gpu else GLOBAL_WEIGHT_COST)
        window = min(m + hs[0][0], phase_len)
        nbytes = _region_bytes(ch, window, r) + wbytes       # then the weights
        if nbytes > budget:
            continue
        stages = _stages(blocks, hs, r, m, pb, phase_len)
        most = max(items for items, _ in stages)
        group = min(max_group, -(-most // warp) * warp)
        chain = sum(-(-items // group) * iters * per_iteration + 300
                    for items, iters in stages)
        work = sum(-(-items // warp) * iters * per_iteration for items, iters in stages)
        groups = batch * -(-dil // r) * -(-phase_len // m)
        per_unit = -(-groups // max(device.compute_units, 1))
        resident = max(1, min(2048 // group, 4 * budget // nbytes)) if gpu else 1
        time = max(per_unit * work / issue, chain * -(-per_unit // resident))
        found.append((time, Tile(r, m, pb, window, group, -(-dil // r),
                                 -(-phase_len // m), phase_len, nbytes, wlocal), groups))
    return found


def choose_tile(blocks: list[BlockShape], batch: int, length: int,
                device: DeviceTraits | None) -> Tile | None:
    """The tile of least estimated time (_tiles) whose three regions fit the device's local
    memory; None when none does. On an H100 it chose the fastest tile of each run of the seed's
    TCN at batch 1 and 64 (.device/probe/tcn_tiles.py, every tile timed); elsewhere it may
    not: tile_candidates gives the tuner others."""
    found = _tiles(blocks, batch, length, device)
    return min(found, key=lambda f: f[0])[1] if found else None


def tile_candidates(blocks: list[BlockShape], batch: int, length: int,
                    device: DeviceTraits | None) -> list[Tile]:
    """The tiles the tuner times, the cost model's first (the one run with tuning off, and by
    a CPU's `fast`), then per PB (4, 1) the tile of most positions that still gives every
    compute unit a work-group, then per PB the same among tiles that take at most a third of
    the local memory (three work-groups resident on a unit: its latency hidden); no
    duplicates, then the largest tile of PB 4. At batch 1 the first kind spreads a small window
    over the whole GPU, at large batches the second trades recomputed halo for occupancy, the
    last recomputes least: what the cost model weighs, roughly. Each tier prefers the tiles
    with their weights in local memory (a GPU's). The tuner's `fast` times the first four."""
    device = device or DeviceTraits()
    found = _tiles(blocks, batch, length, device)
    if not found:
        return []

    def preferred(kept):
        """Of these, the tiles with their weights in local memory where there are any (a GPU
        ran them twice as fast)."""
        return [f for f in kept if f[0].wlocal] or kept

    units = max(device.compute_units, 1)
    listed = [min(found, key=lambda f: f[0])[1]]
    for most_bytes in (None, local_budget(device) // 3):
        for pb in (4, 1):
            kept = preferred([(tile, groups) for _, tile, groups in found if tile.pb == pb and
                              (most_bytes is None or tile.local_bytes <= most_bytes)])
            if not kept:
                continue
            enough = [f for f in kept if f[1] >= units]
            # the most positions a work-group (fewest recomputed), else the most work-groups
            tile = max(enough, key=lambda f: (f[0].r * f[0].m, f[0].m))[0] if enough else \
                max(kept, key=lambda f: (f[1], f[0].m))[0]
            if tile not in listed:
                listed.append(tile)
    # and the other way: the fewest positions recomputed (the largest tile that fits), PB 4
    largest = max((tile for tile, _ in preferred([(t, g) for _, t, g in found if t.pb == 4])),
                  key=lambda t: (t.r * t.m, t.m), default=None)
    if largest is not None and largest not in listed:
        listed.append(largest)
    return listed


@dataclass(frozen=True)
class TileVariant(KernelVariant):
    """One tile of a TemporalBlocks call, for the tuner (jit/variant.py)."""
    tile: Tile

    @property
    def name(self) -> str:
        wlocal = "_wlocal" if self.tile.wlocal else ""
        return f"tile_r{self.tile.r}_m{self.tile.m}_pb{self.tile.pb}{wlocal}"

    def launches(self, plan) -> list[KernelLaunch]:
        """`plan`: the call's launches for a tile (TemporalBlocks._launches, bound)."""
        return plan(self.tile)


@register_op
class TemporalBlocks(Op):
    type = "TemporalBlocks"
    input_count = (2, 2)
    attributes = (Attr("channels", "ints", required=True), Attr("kernels", "ints", required=True),
                  Attr("dilations", "ints", required=True),
                  Attr("downsample", "ints", required=True))

    def blocks(self, attrs, inputs) -> list[BlockShape]:
        """The run's blocks, every attribute and input checked against them."""
        op = self.type
        ch, ks, ds, down = (attrs[a] for a in ("channels", "kernels", "dilations", "downsample"))
        n = len(down)
        if n < 1 or len(ch) != n + 1 or len(ks) != 2 * n or len(ds) != 2 * n:
            raise BindingError(f"{op}: expected n+1 channels, 2n kernels, 2n dilations and n "
                               f"downsample flags for n >= 1 blocks; found {len(ch)}, {len(ks)}, "
                               f"{len(ds)} and {n}")
        if min(ch) < 1 or min(ks) < 1 or min(ds) < 1 or set(down) - {0, 1}:
            raise BindingError(f"{op}: channels, kernels and dilations must be >= 1 and "
                               f"downsample 0 or 1; found {list(ch)}, {list(ks)}, {list(ds)}, "
                               f"{list(down)}")
        blocks = [BlockShape(ch[i], ch[i + 1], ks[2 * i], ds[2 * i], ks[2 * i + 1],
                             ds[2 * i + 1], bool(down[i])) for i in range(n)]
        for i, b in enumerate(blocks):
            if not b.down and b.cin != b.cout:
                raise BindingError(f"{op}: block {i} maps {b.cin} channels to {b.cout}: its "
                                   f"residual needs a downsample")
        x, params = shape_of(inputs[0]), shape_of(inputs[1])
        if any(t.dtype != "f32" for t in inputs) or len(x) != 3 or x[1] != ch[0]:
            raise BindingError(f"{op}: expected a float32 input (N, {ch[0]}, T) and float32 "
                               f"weights; found {inputs[0].dtype} {list(x)} and "
                               f"{inputs[1].dtype} weights")
        if params != (packed_size(blocks),):
            raise BindingError(f"{op}: the packed weights of these blocks are "
                               f"{packed_size(blocks)} floats; found shape {list(params)}")
        if x[0] * max(ch) * max(x[2], 1) > _INT_LIMIT:
            raise BindingError(f"{op}: input {list(x)} is past the kernel's 32-bit indices")
        return blocks

    def infer_shapes(self, attrs, inputs, consts):
        blocks = self.blocks(attrs, inputs)
        n, _, length = shape_of(inputs[0])
        return [((n, blocks[-1].cout, length), "f32")]

    def kernel_variants(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        blocks = self.blocks(attrs, inputs)
        batch, _, length = shape_of(inputs[0])
        if batch * length == 0:
            return ()
        listed = tuple(TileVariant(t) for t in tile_candidates(blocks, batch, length,
                                                               ctx.device))
        return listed if len(listed) > 1 else ()

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        blocks = self.blocks(attrs, inputs)
        batch, _, length = shape_of(inputs[0])
        if batch * length == 0:
            return []
        if isinstance(ctx.variant, TileVariant):        # the tuner's choice
            return ctx.variant.launches(partial(self._launches, blocks, batch, length))
        tile = choose_tile(blocks, batch, length, ctx.device)
        if tile is None:
            raise BindingError(f"{self.type}: {len(blocks)} block(s) of up to "
                               f"{_channels(blocks)} channels need "
                               f"{min_local_bytes(blocks, length)} bytes of local memory; the "
                               f"device has {local_budget(ctx.device)}")
        return self._launches(blocks, batch, length, tile)

    def _launches(self, blocks, batch, length, tile: Tile) -> list[KernelLaunch]:
        dil = run_dilation(blocks)
        table, offset = [], 0
        for b, (h_in, h_mid, h_out) in zip(blocks, halos(blocks, dil)):
            starts = np.cumsum([offset] + block_sizes(b))
            offset = int(starts[-1])
            table += [b.cin, b.cout, b.k1, b.d1 // dil, b.k2, b.d2 // dil, int(b.down),
                      *(int(s) for s in starts[:6]), h_in, h_mid, h_out]
        scalars = (len(blocks), length, dil, tile.r, tile.m, tile.window, _channels(blocks),
                   tile.r_tiles, tile.m_tiles, tile.phase_len)
        args = (Arg.input(0), Arg.input(1), Arg.output(0),
                Arg.const(np.array(table, np.int32))) + \
            tuple(Arg.scalar(np.int32(v)) for v in scalars) + (Arg.local(tile.local_bytes),)
        groups = batch * tile.r_tiles * tile.m_tiles
        label = f"temporal_blocks_pb{tile.pb}" + ("_wlocal" if tile.wlocal else "")
        values = {"PB": tile.pb, "WLOCAL": int(tile.wlocal)}
        # the program is one per (PB, WLOCAL); the launch's label names the whole tile the tuner
        # chose, as profiles and traces show it
        return [KernelLaunch(program_text(label, values, "temporal_blocks.cl"),
                             "temporal_blocks",
                             args, (groups * tile.local_size,), (tile.local_size,),
                             label=f"temporal_blocks_{TileVariant(tile).name}")]
