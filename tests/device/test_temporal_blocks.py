"""TemporalBlocks (ops/nn/temporal_block.py, temporal_blocks.cl): a run of TCN temporal blocks
in one launch, against a float64 numpy reference: several channel counts, kernel sizes and
dilations, lengths that are no multiple of the tile, batch > 1, with and without the 1x1
downsample, tiles forced small by the device's local memory, and every tile the tuner may
choose (tile_candidates)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from customlayers.jit.launch import CompileContext, DeviceTraits
from customlayers.jit.tensor import TensorDesc
from customlayers.ops.base import get_op
from customlayers.ops.nn.temporal_block import (BlockShape, choose_tile, pack_block,
                                                packed_size, tile_candidates)
from op_harness import run_op

GPU_48K = CompileContext(DeviceTraits("GPU", compute_units=132, max_work_group_size=1024,
                                      local_mem_size=48 * 1024))
TINY = CompileContext(DeviceTraits("GPU", compute_units=4, max_work_group_size=256,
                                   local_mem_size=16 * 1024))
CPU = CompileContext(DeviceTraits("CPU", compute_units=2, max_work_group_size=4096,
                                  float_vector_width=16, local_mem_size=2 * 1024 * 1024))


def causal_conv(x, w, b, d):
    """float64: out[n, o, t] = b[o] + sum_{i,j} w[o, i, j] x[n, i, t - (k-1-j) d] (0 before 0)."""
    n, _, length = x.shape
    k = w.shape[2]
    out = np.zeros((n, w.shape[0], length)) + (0 if b is None else b[None, :, None])
    for j in range(k):
        shift = (k - 1 - j) * d
        if shift >= length:
            continue
        out[:, :, shift:] += np.einsum("oi,nit->not", w[:, :, j], x[:, :, :length - shift])
    return out


def reference(x, blocks, weights):
    relu = lambda v: np.maximum(v, 0)  # noqa: E731
    x = x.astype(np.float64)
    for b, (w1, b1, w2, b2, wd, bd) in zip(blocks, weights):
        h = relu(causal_conv(x, w1, b1, b.d1))
        h = relu(causal_conv(h, w2, b2, b.d2))
        res = causal_conv(x, wd, bd, 1) if b.down else x
        x = relu(h + res)
    return x


def make(blocks, rng):
    weights = []
    for b in blocks:
        def w(o, i, k):
            return (rng.standard_normal((o, i, k)) * 0.8 / np.sqrt(i * k)).astype(np.float32)

        def bias(o):
            return (rng.standard_normal(o) * 0.1).astype(np.float32)
        wd, bd = (w(b.cout, b.cin, 1), bias(b.cout)) if b.down else (None, None)
        weights.append((w(b.cout, b.cin, b.k1), bias(b.cout), w(b.cout, b.cout, b.k2),
                        bias(b.cout), wd, bd))
    return weights


def attrs_of(blocks):
    text = lambda v: ",".join(str(int(a)) for a in v)  # noqa: E731
    return {"channels": text([blocks[0].cin] + [b.cout for b in blocks]),
            "kernels": text(k for b in blocks for k in (b.k1, b.k2)),
            "dilations": text(d for b in blocks for d in (b.d1, b.d2)),
            "downsample": text(int(b.down) for b in blocks)}


def within_the_device(ctx, device):
    """The settings, with local memory and the work-group size no larger than the test
    device's own: a tile chosen for 2 MB of (CPU) local memory cannot launch on a GPU's 48 KB
    (OUT_OF_RESOURCES), while the kernel's arithmetic is what the test checks."""
    traits = ctx.device
    return replace(ctx, device=replace(
        traits, local_mem_size=min(traits.local_mem_size, int(device.local_mem_size)),
        max_work_group_size=min(traits.max_work_group_size, int(device.max_work_group_size))))


def run_blocks(cl_env, blocks, batch, length, ctx, seed=0):
    ctx = within_the_device(ctx, cl_env[2])
    rng = np.random.default_rng(seed)
    weights = make(blocks, rng)
    params = np.concatenate([pack_block(*w) for w in weights])
    x = rng.standard_normal((batch, blocks[0].cin, length)).astype(np.float32)
    got = run_op(cl_env, "TemporalBlocks", [x, params], attrs_of(blocks), ctx=ctx)[0]
    return got, reference(x, blocks, weights)


def B(cin, cout, k, d, k2=None, d2=None):
    return BlockShape(cin, cout, k, d, k2 or k, d2 or d, cin != cout)


CASES = {
    # the seed's first two blocks (1 -> 25 with the downsample, dilations 1 and 2)
    "seed_pair": ([B(1, 25, 7, 1), B(25, 25, 7, 2)], 1, 784),
    "seed_deep_pair": ([B(25, 25, 7, 64), B(25, 25, 7, 128)], 2, 784),
    "one_block_down": ([B(3, 6, 3, 4)], 3, 101),
    "one_block_identity": ([B(5, 5, 2, 1)], 2, 37),
    "three_blocks_odd_channels": ([B(2, 7, 3, 1), B(7, 7, 5, 3), B(7, 9, 3, 6)], 2, 203),
    "mixed_kernels_in_a_block": ([B(4, 4, 3, 2, k2=5, d2=4)], 1, 130),
    "short_sequence": ([B(6, 6, 7, 8), B(6, 6, 7, 16)], 2, 5),
    # residues mod 6 in tiles of 4: the last residue tile is partial
    "partial_residue_tile": ([B(3, 3, 3, 6), B(3, 5, 3, 12)], 2, 50),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("ctx", [GPU_48K, TINY, CPU], ids=["gpu48k", "tiny_local", "cpu"])
def test_temporal_blocks_match_float64(cl_env, name, ctx):
    blocks, batch, length = CASES[name]
    got, want = run_blocks(cl_env, blocks, batch, length, ctx)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_the_tile_fits_the_devices_local_memory_and_splits_the_residues():
    blocks = CASES["seed_deep_pair"][0]
    for ctx in (GPU_48K, TINY):
        tile = choose_tile(blocks, 1, 784, ctx.device)
        assert tile.local_bytes <= ctx.device.local_mem_size
        assert tile.r * tile.r_tiles >= 64 and tile.m * tile.m_tiles >= 13    # all 784 steps
    # at batch 1 the 64 residues of dilation 64 spread over many work-groups
    assert choose_tile(blocks, 1, 784, GPU_48K.device).r_tiles >= 16
    # 25 channels: 3 regions of even one position and the halo do not fit 1 KB
    tiny = DeviceTraits("GPU", compute_units=4, max_work_group_size=256, local_mem_size=1024)
    assert choose_tile(blocks, 1, 784, tiny) is None


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("ctx", [GPU_48K, CPU], ids=["gpu48k", "cpu"])
def test_every_tile_the_tuner_may_choose_matches_float64(cl_env, name, ctx):
    ctx = within_the_device(ctx, cl_env[2])
    blocks, batch, length = CASES[name]
    x = np.zeros((batch, blocks[0].cin, length), np.float32)
    params = np.zeros(packed_size(blocks), np.float32)
    descs = [TensorDesc(a.shape, a.dtype) for a in (x, params)]
    op = get_op("TemporalBlocks")
    attrs = op.parse_attributes(attrs_of(blocks), "blocks")
    out = [TensorDesc(*op.infer_shapes(attrs, descs, {})[0])]
    variants = op.kernel_variants(attrs, descs, out, {}, ctx)
    tiles = [v.tile for v in variants]
    if variants:                        # one candidate only: nothing to choose
        assert tiles == tile_candidates(blocks, batch, length, ctx.device)
        assert tiles[0] == choose_tile(blocks, batch, length, ctx.device)
    for variant in variants:
        got, want = run_blocks(cl_env, blocks, batch, length, replace(ctx, variant=variant))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=variant.name)


def test_at_batch_1_the_candidates_give_every_compute_unit_work_with_pb_4_and_1():
    blocks = CASES["seed_pair"][0]
    units = GPU_48K.device.compute_units
    for batch in (1, 64):
        tiles = tile_candidates(blocks, batch, 784, GPU_48K.device)
        assert tiles[0] == choose_tile(blocks, batch, 784, GPU_48K.device)
        assert len(set(tiles)) == len(tiles) >= 3
        for pb in (4, 1):
            assert any(t.pb == pb and batch * t.r_tiles * t.m_tiles >= units for t in tiles)
        assert all(t.local_bytes <= GPU_48K.device.local_mem_size for t in tiles)
