"""passes/temporal: rewrites of whole temporal (TCN) blocks into the layers that compute them
in one launch.

block_fusion.py   fuse_temporal_blocks (LAUNCH_BOUND, after PASSES): runs of consecutive TCN
                  temporal blocks (causal convolutions, ReLUs, residual or 1x1 downsample)
                  become one TemporalBlocks layer (ops/nn/temporal_block.py): on a
                  request's shapes where the model leaves them open (Network runs the
                  rewrites per plan then)

May import: what passes/ may (graph/, jit/, ops/, errors, dtypes) and ../graph_edit.py;
never runtime/ or pyopencl.
"""
from .block_fusion import fuse_temporal_blocks  # noqa: F401
