"""passes: the graph rewrites a Network makes before it compiles, and its fusion plan.

The floor between runtime (above) and ops, jit, graph (below): pure Python over
graph.graph.Graph, run and tested without a device. May import: graph/, jit/,
ops/ (the typed facts a rewrite hands to a built-in op in Node.facts, such as
conv.InputShuffle, and the op's own rules for them) and errors/settings; never runtime/ or
pyopencl (import-linter contracts in pyproject.toml).

shape_folding.py   shape arithmetic (Shape, Gather, Concat, Range, Where, ...) folded into
                   constants: at load what the declared shapes decide, the rest per set of
                   input shapes when a plan is compiled (fold_for_shapes)
graph_edit.py      what every pass reads and rebuilds a graph with (sole_consumer, const_input,
                   rebuilt_graph)
common_nodes.py    layers that compute the same thing from the same inputs run once (the mask
                   torch expands again in every encoder layer)
window_folding.py  zero Pads and causal Slices around convolutions become their padding
shuffle_folding.py channel shuffles before depthwise convolutions become their channel order
unused_outputs.py  MaxPool index outputs nobody reads are not computed
pick_folding.py    a last-step Gather before a MatMul becomes the element the MatMul reads
gelu_folding.py    the five layers of an exported erf GELU become one Gelu layer
view_folding.py    Transposes, Reshapes, Gathers of one index and scalar Multiplys before a
                   MatMul become a strided view it reads (attention's head split)
attention_folding.py  MatMul, scale, mask Add, Softmax, MatMul become one FusedAttention layer
                   that never writes the scores (after view_folding: it takes the MatMuls' views)
temporal/          whole TCN temporal blocks: block_fusion.py's fuse_temporal_blocks (runs of
                   causal convolution blocks become one TemporalBlocks layer, one launch)
state/             rewrites that give a model a request's state: binding.py's bind_state_inputs
                   (a CausalConvWithState's past_state input and present_state output become a
                   ReadValue and an Assign; asked for, not in PASSES)
concrete_shapes.py the shapes a plan's input shapes give every port (with_concrete_shapes): what
                   the rewrites fold a model with dynamic dims by, per plan (Network)
fusion.py          the fusion plan (epilogues, channel-affine chains), made after resolution
                   from the layers' LayerImpl (not a rewrite: see Network)
stream/            a whole-window causal model [N, C, T] as the step of a stream
                   (ops/stream/program.py's StreamProgram), or a refusal naming the layer and
                   why (not a rewrite: Network.streaming calls stream/causal_stream.py)

PASSES is the ordered list Network runs (when it fuses) before it resolves the layers, and
passes_for(temporal_blocks=...) that list with LAUNCH_BOUND (fusions that cut launches, where
they pay: on a GPU, for the runs that are launch-bound there, or where asked for) after it;
FOLDING, its head, runs also when it does not (no layer runs unfolded shape arithmetic). Every
entry is a function (graph, is_builtin) -> (the rewritten graph, one note per change), with
is_builtin(node) true when the node runs its type's built-in (only those are rewritten), and
returns the graph itself with no notes when nothing changes. Adding a rewrite is one module
here and one entry below.
"""
from __future__ import annotations

from functools import partial

from ..jit.launch import DeviceTraits
from .attention_folding import fold_attention
from .common_nodes import merge_common_nodes
from .gelu_folding import fold_gelu_chains
from .pick_folding import fold_picks_into_matmuls
from .shape_folding import fold_shape_arithmetic
from .shuffle_folding import fold_channel_shuffles
from .unused_outputs import drop_unused_pool_indices
from .view_folding import fold_views_into_matmuls
from .temporal import fuse_temporal_blocks  # noqa: F401
from .window_folding import fold_into_convolutions

# required: the shapes the other passes and the layers read are constants after it
FOLDING = (fold_shape_arithmetic,)

# in this order: the shape arithmetic, then the layers that repeat another's work merged (the
# chains after them fold once), then a Pad folded into a convolution, then the
# shuffles (read by the convolutions the Pad pass may have changed), then the pool indices,
# then the picks, then the GELU chains, then the views read by MatMuls (after the picks: a
# MatMul takes one or the other), then the attention chains (over those MatMuls' views)
PASSES = FOLDING + (
    merge_common_nodes,
    fold_into_convolutions,
    fold_channel_shuffles,
    drop_unused_pool_indices,
    fold_picks_into_matmuls,
    fold_gelu_chains,
    fold_views_into_matmuls,
    fold_attention,
)

# rewrites that cut launches, run after PASSES (the temporal blocks are found in the causal
# convolutions the Pad and Slice folding made): by default (Network's fuse_temporal_blocks
# None) on a GPU for the runs that are launch-bound there (ops/nn/temporal_block.py's
# launch_bound), every run where asked for (True, the CLI's --fuse-temporal-blocks), none on
# a CPU. On an H100 (bench/gpu_peers.py) the seed's TCN at batch 1 takes 18 launches and
# 0.16-0.25 ms of kernels unfused (the inference with device buffers 0.16-0.18 ms), 5
# launches and 0.10-0.11 ms fused (0.12 ms); at 64, 0.46 ms (0.49-0.50) unfused, 0.60 ms
# (0.63-0.64) fused: each tile recomputes its halo. (Before the stage weights moved to local
# memory, the fused kernels took 0.25-0.29 ms at batch 1 and no device had gained.) On PoCL
# (2 busy cores, AVX-512): 4.7 ms fused against 2.4 ms at batch 1, 270 against 84 ms at 64
LAUNCH_BOUND = (fuse_temporal_blocks,)


def passes_for(*, temporal_blocks: bool = False, attention: bool = True,
               launch_bound_on: DeviceTraits | None = None) -> tuple:
    """The rewrites a Network runs when it fuses: PASSES (without fold_attention where
    `attention` is false: the device runs the unfused layers faster), then LAUNCH_BOUND where
    `temporal_blocks` asks for them (on any device: the tests run them on PoCL): only the runs
    launch-bound on `launch_bound_on` where it is given, else every run."""
    chosen = PASSES if attention else tuple(p for p in PASSES if p is not fold_attention)
    if not temporal_blocks:
        return chosen
    if launch_bound_on is None:
        return chosen + LAUNCH_BOUND
    return chosen + (partial(fuse_temporal_blocks, launch_bound_on=launch_bound_on),)
