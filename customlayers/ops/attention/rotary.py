"""ONNX RotaryEmbedding (opset 23) on rotary.cl, one work-item per output element, with the
ONNX reference's semantics (onnx/reference/ops/op_rotary_embedding.py): 4-D (batch, heads, seq,
head size) or 3-D (batch, seq, hidden) input with num_heads, the first rotary_embedding_dim
features of each head rotated (all when 0) in interleaved or half-split pairs, cos/sin rows
taken at position_ids (IR attribute has_positions: input 3) or, without them, the caches'
(batch, seq) rows themselves."""
from __future__ import annotations

import numpy as np

from ...errors import BindingError
from ...jit.launch import Arg, DEFAULT_CONTEXT, KernelLaunch
from .._program import global_1d, numel, program_text, shape_of
from ..base import Attr, Op, register_op


@register_op
class RotaryEmbedding(Op):
    type = "RotaryEmbedding"
    input_count = (3, 4)
    attributes = (Attr("interleaved", "bool", False), Attr("rotary_embedding_dim", "int", 0),
                  Attr("num_heads", "int", 0), Attr("has_positions", "bool", False))

    def _geometry(self, attrs, inputs) -> dict[str, int]:
        op = self.type
        want = 4 if attrs["has_positions"] else 3
        if len(inputs) != want:
            raise BindingError(f"{op}: expected {want} inputs, found {len(inputs)}")
        x, cos, sin = (shape_of(t) for t in inputs[:3])
        dtype = inputs[0].dtype
        if dtype not in ("f32", "f64") or inputs[1].dtype != dtype or inputs[2].dtype != dtype:
            raise BindingError(f"{op}: input, cos_cache and sin_cache must share the element "
                               f"type f32 (or f64); found "
                               f"{', '.join(t.dtype for t in inputs[:3])}")
        if len(x) == 4:
            b, h, s, hd = x
        elif len(x) == 3:
            b, s, hidden = x
            h = attrs["num_heads"]
            if h <= 0 or hidden % h:
                raise BindingError(f"{op}: a 3-D input {list(x)} needs num_heads dividing its "
                                   f"last dim; found num_heads={h}")
            hd = hidden // h
        else:
            raise BindingError(f"{op}: the input must be 3-D (batch, seq, hidden) or 4-D "
                               f"(batch, heads, seq, head size); found {list(x)}")
        rd = attrs["rotary_embedding_dim"] or hd
        if rd % 2 or rd > hd:
            raise BindingError(f"{op}: rotary_embedding_dim {rd} must be even and at most the "
                               f"head size {hd}")
        half = rd // 2
        if attrs["has_positions"]:
            pos = inputs[3]
            if len(cos) != 2 or cos[1] != half or sin != cos or pos.dtype != "i64" or \
                    shape_of(pos) != (b, s):
                raise BindingError(f"{op}: with position_ids, cos_cache and sin_cache must be "
                                   f"(max position, {half}) and position_ids int64 ({b}, {s}); "
                                   f"found {list(cos)}, {list(sin)}, {pos.dtype} "
                                   f"{list(shape_of(pos))}")
            cb, max_pos = 0, cos[0]
        else:
            if len(cos) != 3 or cos[0] not in (1, b) or cos[1:] != (s, half) or sin != cos:
                raise BindingError(f"{op}: without position_ids, cos_cache and sin_cache must "
                                   f"be ({b}, {s}, {half}); found {list(cos)} and {list(sin)}")
            cb, max_pos = (0 if cos[0] == 1 else s * half), 0
        return dict(S=s, H=h, HD=hd, RD=rd, CB=cb, MAX_POS=max_pos, RANK=len(x))

    def infer_shapes(self, attrs, inputs, consts):
        self._geometry(attrs, inputs)
        return [(shape_of(inputs[0]), inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        g = self._geometry(attrs, inputs)
        dtype = inputs[0].dtype
        count = numel(shape_of(inputs[0]))
        values = {"T": "double" if dtype == "f64" else "float",
                  "SEQ_MAJOR": int(g["RANK"] == 3), "INTERLEAVED": int(attrs["interleaved"]),
                  "HAS_POSITIONS": int(attrs["has_positions"])}
        args = [Arg.input(k) for k in range(len(inputs))] + [Arg.output(0)]
        args += [Arg.scalar(np.int32(v)) for v in (count, g["S"], g["H"], g["HD"], g["RD"],
                                                   g["CB"], g["MAX_POS"])]
        label = f"rotary_{dtype}"
        return [KernelLaunch(program_text(label, values, "rotary.cl"), "rotary", tuple(args),
                             global_1d(count), label=label)]
