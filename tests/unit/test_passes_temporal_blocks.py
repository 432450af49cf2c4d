"""passes/temporal/block_fusion.py on models read from ONNX (no device): runs of TCN temporal
blocks become TemporalBlocks layers as a Network asked for them rewrites them (passes_for), in every
causal form, and what must stay apart stays as written."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from customlayers.graph.load import read_model
from customlayers.jit.launch import DeviceTraits
from customlayers.ops.nn.temporal_block import BlockShape, launch_bound, packed_size
from customlayers.passes import LAUNCH_BOUND, PASSES, passes_for
from customlayers.passes.temporal import fuse_temporal_blocks
from tcn_models import Spec, tcn_model

pytest.importorskip("onnx")
# appended: tests/ stays first (bench/ has a models.py of its own)
sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))
from gpu_peers import onnx_tcn  # noqa: E402


H100 = DeviceTraits("GPU", compute_units=132, max_work_group_size=1024, local_mem_size=48 * 1024)


def rewritten(path, is_builtin=lambda n: True, launch_bound_on=None):
    graph = read_model(path)
    notes = []
    for rewrite in passes_for(temporal_blocks=True, launch_bound_on=launch_bound_on):
        graph, more = rewrite(graph, is_builtin)
        notes += more
    return graph, notes


def fused(graph):
    return [n for n in graph.topological_order() if n.type == "TemporalBlocks"]


def test_the_block_fusion_runs_after_passes_only_where_asked_for():
    assert passes_for(temporal_blocks=True) == PASSES + LAUNCH_BOUND
    assert passes_for() == passes_for(temporal_blocks=False) == PASSES
    assert LAUNCH_BOUND == (fuse_temporal_blocks,)


def test_a_gpu_fuses_by_default_only_the_runs_that_are_launch_bound_on_it(tmp_path):
    """Network's default (fuse_temporal_blocks None) on a GPU: the seed's TCN fuses at the
    batches where an H100 ran it faster fused (up to 32), not at 64 (1.25x slower fused), and
    not where the batch or the length is left open; a CPU never."""
    seed = [BlockShape(1 if i == 0 else 25, 25, 7, 2 ** i, 7, 2 ** i, i == 0) for i in range(8)]
    assert launch_bound(seed[2:4], 1, 784, H100) and launch_bound(seed[2:4], 32, 784, H100)
    assert not launch_bound(seed[2:4], 64, 784, H100)
    assert not launch_bound(seed[2:4], 1, 784, DeviceTraits("CPU", compute_units=2))
    # a smaller GPU fills sooner: 16 units take batch 4, not 8
    small = DeviceTraits("GPU", compute_units=16, local_mem_size=48 * 1024)
    assert launch_bound(seed[2:4], 4, 784, small) and not launch_bound(seed[2:4], 8, 784, small)
    for batch, runs in ((1, 4), (32, 4), (64, 0)):
        graph, notes = rewritten(onnx_tcn(tmp_path / f"tcn{batch}.onnx", batch),
                                 launch_bound_on=H100)
        assert len(fused(graph)) == runs, batch
    # the length left open (torch's export with a dynamic T): nothing to decide by
    import onnx
    path = tcn_model(tmp_path / "open.onnx", 1, 50, [Spec(4, 4, 3, 1), Spec(4, 4, 3, 2)])
    model = onnx.load(str(path))
    for value in (*model.graph.input, *model.graph.output):
        value.type.tensor_type.shape.dim[2].dim_param = "T"
    onnx.save(model, str(path))
    assert fused(rewritten(path, launch_bound_on=H100)[0]) == []
    assert len(fused(rewritten(path)[0])) == 1


@pytest.mark.parametrize("weight_norm", [False, True])
def test_the_seed_tcn_becomes_four_runs_of_two_blocks(tmp_path, weight_norm):
    graph, notes = rewritten(onnx_tcn(tmp_path / "tcn.onnx", 1, weight_norm=weight_norm))
    runs = fused(graph)
    assert [n.attrs["dilations"] for n in runs] == [
        "1,1,2,2", "4,4,8,8", "16,16,32,32", "64,64,128,128"]
    assert runs[0].attrs == {"channels": "1,25,25", "kernels": "7,7,7,7",
                             "dilations": "1,1,2,2", "downsample": "1,0"}
    assert [n.name for n in runs] == ["b1o", "b3o", "b5o", "b7o"]
    assert sum("fused the temporal block" in m for m in notes) == 4
    # nothing of the blocks is left: the runs, then the head
    kinds = [n.type for n in graph.topological_order() if n.type not in ("Const", "Parameter",
                                                                         "Result")]
    assert kinds == ["TemporalBlocks"] * 4 + ["MatMul", "Add", "LogSoftmax"]
    for node in runs:                   # one packed weight buffer per run
        const = graph.nodes[graph.producer(node.id, 1)[0]]
        assert const.type == "Const" and const.value.dtype == np.float32
        assert const.value.shape == node.inputs[1].shape
    first = graph.nodes[graph.producer(runs[0].id, 1)[0]]
    assert first.value.size == packed_size([BlockShape(1, 25, 7, 1, 7, 1, True),
                                            BlockShape(25, 25, 7, 2, 7, 2, False)])
    # the weights (and weight norm's arithmetic) went with their layers: every node is read
    for node in graph:
        if node.type != "Result":
            assert graph.consumers(node.id, 0), node.name


@pytest.mark.parametrize("form", ["chomp", "pads", "pad_op"])
def test_every_causal_form_with_or_without_bias_is_a_block(tmp_path, form):
    specs = [Spec(3, 8, 3, 1, form), Spec(8, 8, 5, 3, form, bias=False)]
    graph, _ = rewritten(tcn_model(tmp_path / "m.onnx", 2, 50, specs))
    runs = fused(graph)
    assert len(runs) == 1 and runs[0].attrs == {
        "channels": "3,8,8", "kernels": "3,3,5,5", "dilations": "1,1,3,3",
        "downsample": "1,0"}


def test_a_run_ends_where_its_halo_would_pass_the_limit(tmp_path):
    # dilations 1, 2, 4 with kernel 7: two blocks need 36 positions before a tile, three 84
    specs = [Spec(4, 4, 7, 1), Spec(4, 4, 7, 2), Spec(4, 4, 7, 4)]
    graph, _ = rewritten(tcn_model(tmp_path / "m.onnx", 1, 100, specs))
    assert [n.attrs["dilations"] for n in fused(graph)] == ["1,1,2,2", "4,4"]


def test_a_value_read_elsewhere_keeps_its_block_apart(tmp_path):
    specs = [Spec(4, 4, 3, 1), Spec(4, 4, 3, 2), Spec(4, 4, 3, 4)]
    # the second block's middle ReLU is a graph output: that block stays as written
    graph, _ = rewritten(tcn_model(tmp_path / "m.onnx", 1, 40, specs, extra_output="b1r1"))
    assert [n.attrs["dilations"] for n in fused(graph)] == ["1,1", "4,4"]
    # the first block's output is a graph output: it ends the run there
    graph, _ = rewritten(tcn_model(tmp_path / "m.onnx", 1, 40, specs, extra_output="b0o"))
    assert [n.attrs["dilations"] for n in fused(graph)] == ["1,1", "2,2,4,4"]


def test_a_custom_layer_in_a_block_keeps_it_apart(tmp_path):
    specs = [Spec(4, 4, 3, 1), Spec(4, 4, 3, 2)]
    path = tcn_model(tmp_path / "m.onnx", 1, 40, specs)
    graph, _ = rewritten(path, is_builtin=lambda n: n.name != "b1r2")
    assert [n.attrs["dilations"] for n in fused(graph)] == ["1,1"]


def test_blocks_too_wide_for_the_guaranteed_local_memory_stay_as_written(tmp_path):
    graph, notes = rewritten(tcn_model(tmp_path / "m.onnx", 1, 64, [Spec(160, 160, 3, 1)]))
    assert fused(graph) == [] and not any("temporal" in m for m in notes)
    assert fuse_temporal_blocks(graph, lambda n: True) == (graph, [])
    # a block too wide, then others: each stays as written, and the rest still fuse (found
    # by a review: the next block read the last block of the empty run the wide one left)
    wide = [Spec(128, 128, 3, 1), Spec(128, 128, 3, 2), Spec(128, 8, 3, 4), Spec(8, 8, 3, 8)]
    for launch_bound_on in (None, H100):
        graph, _ = rewritten(tcn_model(tmp_path / "w.onnx", 1, 784, wide),
                             launch_bound_on=launch_bound_on)
        assert [n.attrs["channels"] for n in fused(graph)] == ["8,8"]
