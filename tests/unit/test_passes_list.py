"""passes.PASSES: the graph rewrites a Network runs, in their order, each (graph, is_builtin) ->
(graph, notes), and all of them run in a process that never loads OpenCL."""
import subprocess
import sys
from pathlib import Path

import numpy as np

from customlayers.passes import PASSES
from customlayers.passes.attention_folding import fold_attention
from customlayers.passes.common_nodes import merge_common_nodes
from customlayers.passes.gelu_folding import fold_gelu_chains
from customlayers.passes.pick_folding import fold_picks_into_matmuls
from customlayers.passes.shape_folding import fold_shape_arithmetic
from customlayers.passes.shuffle_folding import fold_channel_shuffles
from customlayers.passes.unused_outputs import drop_unused_pool_indices
from customlayers.passes.view_folding import fold_views_into_matmuls
from customlayers.passes.window_folding import fold_into_convolutions
from interop_graphs import Builder

ROOT = Path(__file__).resolve().parents[2]


def test_the_passes_run_in_the_order_network_always_ran_them():
    assert list(PASSES) == [fold_shape_arithmetic, merge_common_nodes, fold_into_convolutions,
                            fold_channel_shuffles,
                            drop_unused_pool_indices, fold_picks_into_matmuls, fold_gelu_chains,
                            fold_views_into_matmuls, fold_attention]


def test_every_pass_returns_the_graph_itself_when_nothing_changes():
    b = Builder()
    x = b.param("x", (1, 2, 3, 3))
    b.result(b.op("Add", [x, b.const(np.float32(1))], (1, 2, 3, 3)))
    for rewrite in PASSES:
        assert rewrite(b.g, lambda n: True) == (b.g, [])


def test_the_passes_run_without_opencl():
    code = ("import sys\n"
            "from customlayers.passes import PASSES\n"
            "from customlayers.passes.fusion import plan_network_fusion\n"
            "from customlayers.graph.graph import Graph\n"
            "g = Graph()\n"
            "for rewrite in PASSES:\n"
            "    g, notes = rewrite(g, lambda n: True)\n"
            "plan_network_fusion(g, [], {}, lambda n: False)\n"
            "assert 'pyopencl' not in sys.modules, 'pyopencl was imported'\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
