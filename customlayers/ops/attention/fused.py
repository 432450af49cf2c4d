"""FusedAttention: softmax(Q K^T * scale + mask) V in one launch (attention_tiled.cl), the layer
passes/attention_folding.py makes of the MatMul, scale, mask Add, Softmax, MatMul chain that
exporters write for scaled dot-product attention. The scores are never written to global memory
(ViT-B/16 at batch 32: 197 x 197 per head, 60 MB a layer, written once and read twice by the
three layers it replaces).

Inputs: Q, K, V and, with has_mask, an additive float mask. As a layer of its own, Q is
[..., S, D], K [..., T, D] and V [..., T, DV] with the same (at most two) batch axes, the mask
broadcasts to [..., S, T], and the output is [..., S, DV]. Where the pass folded layers that
only re-index (the head split of a projection, the Transpose of K, the head merge after) into
the reads and the store, the fact AttentionViews holds the views: the inputs are then the
tensors those chains start from, read through the views, and the output is the tensor the
chain after would have made.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...jit.launch import Arg, DEFAULT_CONTEXT, KernelLaunch
from ...jit.layer import LayerCall
from ...jit.tensor import TensorDesc
from .._nn import NamedOp
from .._program import LinearView, program_text, shape_of
from ..base import Attr, register_op

# the kernel's tile (attention_tiled.cl): TR x TC items, 4 rows each, KC float4s of keys each.
# On an H100 (kernel alone, one run) a 16 x 8 tile with the next block prefetched took ViT-B/16's
# heads at batch 32 (32 x 12 x 197 x 64) in 244 us, against 232 us for torch's
# scaled_dot_product_attention and 309 us for torch's MatMul, Softmax, MatMul; 8 x 8: 281 us,
# 12 x 8: 265 us, 16 x 4 with 2 float4s: 274 us, without the prefetch: 263 us. Skipping the
# arithmetic of warps past the last row: 236 us (torch 229 in that run). At batch 1: 39 us
# (torch 44); BERT-base's heads at 32 (seq 128, a mask): 91 us (torch 93).
# On PoCL (2 cores) 8 x 4 with 2 float4s: 5.8 ms for ViT's heads at batch 1, 16 x 8: 7.0 ms.
# ViT's 197 rows are 3 blocks of 64 and a tail of 5, and the tail's groups stream all of K and
# V as a whole block's do: on an H200 the 192 rows alone took 182 us, the 5 alone 39 us (104.6
# with 4 x 8, 50.9 with 8 x 8), all 197 at once 224-226 us. Larger blocks, with P^T kept in K^T's
# __local space so that they fit (one barrier more per block of keys), did not pay: 32 x 4
# (128 rows) 222.0 against 223.5 us at batch 32 but 54.2 against 32.1 at batch 1; 24 x 8 250;
# 16 x 8 with the barrier 260 (stop 33, .device/probe/attn_tiles.py).
GPU_TILES = ((16, 8, 1, True), (8, 8, 1, True), (4, 8, 1, False))   # largest that fits first
CPU_TILE = (8, 4, 2, False)
# the head sizes the kernel takes (its register blocks hold 4 rows x DV / TC outputs)
MAX_HEAD = 64
_INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class AttentionViews:
    """A fact passes/attention_folding.py hands a FusedAttention (Node.facts): the views each
    input is read through and the output written through, all 4-D (batch 1, batch 2, row,
    column): q [B1, B2, S, D], k [B1, B2, T, D], v [B1, B2, T, DV], out [B1, B2, S, DV] in a
    buffer of shape out_shape. sources: the input tensors' shapes the views were made for."""
    q: LinearView
    k: LinearView
    v: LinearView
    out: LinearView
    out_shape: tuple
    sources: tuple


@register_op
class FusedAttention(NamedOp):
    type = "FusedAttention"
    input_count = (3, 4)
    attributes = (Attr("scale", "float", 1.0), Attr("out_scale", "float", 1.0),
                  Attr("has_mask", "bool", False))

    # -- the views ---------------------------------------------------------------------------
    def _views(self, attrs, inputs, ctx) -> AttentionViews:
        if len(inputs) != 3 + int(attrs["has_mask"]):
            raise self.fail(attrs, f"expected {3 + int(attrs['has_mask'])} inputs (Q, K, V"
                                   f"{', mask' if attrs['has_mask'] else ''}), found "
                                   f"{len(inputs)}")
        for i, t in enumerate(inputs):
            if t.dtype != "f32":
                raise self.fail(attrs, f"input {i} is {t.dtype}; FusedAttention runs f32 only")
        fact = ctx.fact(AttentionViews)
        if fact is not None:
            for port, source in enumerate(fact.sources):
                if tuple(shape_of(inputs[port])) != tuple(source):
                    raise self.fail(attrs, f"input {port} has shape "
                                           f"{list(shape_of(inputs[port]))} where the folded "
                                           f"layers read {list(source)}")
            return fact
        q, k, v = (shape_of(t) for t in inputs[:3])
        if not 2 <= len(q) <= 4 or not (len(q) == len(k) == len(v)) or \
                q[:-2] != k[:-2] or k[:-1] != v[:-1] or q[-1] != k[-1]:
            raise self.fail(attrs, f"Q [..., S, D], K [..., T, D] and V [..., T, DV] must share "
                                   f"their (at most two) batch axes, T and D; found "
                                   f"{list(q)}, {list(k)}, {list(v)}")
        views = [four_d(LinearView.dense(s)) for s in (q, k, v)]
        out_shape = q[:-1] + (v[-1],)
        return AttentionViews(*views, four_d(LinearView.dense(out_shape)), out_shape, (q, k, v))

    def infer_shapes(self, attrs, inputs, consts, ctx=DEFAULT_CONTEXT):
        views = self._views(attrs, inputs, ctx)
        self._check(attrs, views, inputs)
        return [(tuple(views.out_shape), "f32")]

    def outputs(self, call: LayerCall) -> list[TensorDesc]:
        return [TensorDesc(shape, dtype) for shape, dtype in
                self.infer_shapes(call.attrs, call.inputs, call.consts, call.context)]

    def _check(self, attrs, views: AttentionViews, inputs) -> LinearView | None:
        """The mask's view (None without one), after checking the sizes the kernel handles."""
        b1, b2, s, d = views.q.shape
        t, dv = views.k.shape[2], views.v.shape[3]
        if 0 in (b1, b2, s, t, d, dv):
            raise self.fail(attrs, f"Q {list(views.q.shape)}, K {list(views.k.shape)} and V "
                                   f"{list(views.v.shape)} must not be empty (Softmax over no "
                                   f"keys then MatMul give zeros, which this kernel does not)")
        if d > MAX_HEAD or dv > MAX_HEAD:
            raise self.fail(attrs, f"head sizes {d} (Q, K) and {dv} (V) must be at most "
                                   f"{MAX_HEAD}")
        mask = None
        if attrs["has_mask"]:
            shape = shape_of(inputs[3])
            mask = mask_view(shape, (b1, b2, s, t))
            if mask is None:
                raise self.fail(attrs, f"the mask {list(shape)} does not broadcast to the "
                                       f"scores {[b1, b2, s, t]}")
        for name, view in (("Q", views.q), ("K", views.k), ("V", views.v),
                           ("the output", views.out), ("the mask", mask)):
            if view is not None and view.offset + sum(
                    (n - 1) * abs(st) for n, st in zip(view.shape, view.strides)) > _INT_MAX:
                raise self.fail(attrs, f"{name} spans more than 2^31 elements (the kernel "
                                       f"indexes with 32-bit integers)")
        return mask

    # -- the launch --------------------------------------------------------------------------
    def _tile(self, attrs, d: int, dv: int, ctx) -> tuple[dict, int, int]:
        """(the kernel's defines, rows per work-group, items per work-group) for the device."""
        shuffle = ctx.device is not None and ctx.device.async_copy     # NVIDIA sm_80+: shfl.sync
        limit = ctx.device.local_mem_size if ctx.device is not None else 32 * 1024
        for tr, tc, kc, prefetch in (CPU_TILE,) if ctx.on_cpu else GPU_TILES:
            dp, dvp = -(-d // 4) * 4, -(-dv // (4 * tc)) * 4 * tc
            bq, bk = 4 * tr, 4 * kc * tc
            floats = dp * (bq + 4) + dp * (bk + 4) + bk * dvp + bk * (bq + 4) + \
                (0 if shuffle else bq * tc)
            if 4 * floats <= limit:
                return dict(TR=tr, TC=tc, KC=kc, D=d, DV=dv, DP=dp, DVP=dvp,
                            SHFL_PTX=int(shuffle), PREFETCH=int(prefetch)), bq, tr * tc
        raise self.fail(attrs, f"head sizes {d} and {dv} need {4 * floats} bytes of __local "
                               f"memory; the device has {limit}")

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        views = self._views(attrs, inputs, ctx)
        mask = self._check(attrs, views, inputs)
        b1, b2, s, d = views.q.shape
        t, dv = views.k.shape[2], views.v.shape[3]
        values, rows, items = self._tile(attrs, d, dv, ctx)
        values["HAS_MASK"] = int(mask is not None)
        i32 = np.int32
        no_mask = LinearView((1, 1, 1, 1), (0, 0, 0, 0), 0)
        args = [Arg.input(0), Arg.input(1), Arg.input(2),
                Arg.input(3) if mask is not None else Arg.const(np.zeros(1, np.float32)),
                Arg.output(0), Arg.scalar(i32(s)), Arg.scalar(i32(t)), Arg.scalar(i32(b2))]
        for view in (views.q, views.k, views.v, views.out, mask or no_mask):
            # a size-1 axis is only ever read at 0: its stride (which _check's spans leave
            # unbounded, [1, 2^25, 64] has one of 2^31) passes as 0
            args += [Arg.scalar(i32(view.offset))] + \
                [Arg.scalar(i32(x if n != 1 else 0)) for n, x in zip(view.shape, view.strides)]
        args += [Arg.scalar(np.float32(attrs["scale"])), Arg.scalar(np.float32(attrs["out_scale"]))]
        groups = b1 * b2 * -(-s // rows)
        label = f"attention_tiled_d{d}_v{dv}"
        return [KernelLaunch(program_text(label, values, "attention_tiled.cl"),
                             "attention_tiled", tuple(args), (groups * items,), (items,),
                             label=label)]


def mask_view(shape: tuple, scores: tuple) -> LinearView | None:
    """The kernel's view of a dense mask of `shape` over the 4-D `scores` (stride 0 along an
    axis it broadcasts); None where it does not broadcast to them."""
    lead = (1,) * (4 - len(shape)) + tuple(shape)
    if len(shape) > 4 or any(m not in (1, f) for m, f in zip(lead, scores)):
        return None
    return LinearView.dense(lead).broadcast_to(scores)


def four_d(view: LinearView) -> LinearView:
    """A view of rank 2 to 4 as 4-D: size-1 batch axes in front (the kernel's b1, b2)."""
    lead = 4 - len(view.shape)
    return LinearView((1,) * lead + tuple(view.shape), (0,) * lead + tuple(view.strides),
                      view.offset)
