"""ONNX Attention (opset 23-25) and RotaryEmbedding (opset 23) onto the built-in ops of
ops/attention/: one IR Attention node computes Y (and qk_matmul_output where asked); the
present_key/present_value outputs are the past concatenated with the new keys and values,
made here from IR Reshape/Transpose/Concat (3-D K and V are viewed as (batch, kv heads, seq,
head size) first), only where the model names them."""
from __future__ import annotations

import numpy as np

from ..translate import float_text, optional_input, rank_of, translates

_FLAG = {True: "true", False: "false"}


def _as_heads(r, value: str, heads: int, name: str) -> str:
    """A 3-D (batch, seq, heads * size) value as 4-D (batch, heads, seq, size)."""
    split = f"{name}/split"
    r.emit("Reshape", [value, r.const(f"{split}/shape", np.array([0, 0, heads, -1], np.int64))],
           [split], split, {"special_zero": "true"})
    out = f"{name}/heads"
    r.emit("Transpose", [split, r.const(f"{out}/order", np.array([0, 2, 1, 3], np.int64))],
           [out], out)
    return out


def _present(r, node, name: str, k: int, past: str | None, rank: int, heads: int) -> None:
    """present_key (k=1) or present_value (k=2): past ++ the new ones along the sequence."""
    new = node.input[k]
    out = node.output[k]
    if rank == 3:
        new = _as_heads(r, new, heads, f"{name}/present{k}")
    if past is not None:
        r.emit("Concat", [past, new], [out], f"{name}/present{k}", {"axis": "2"})
    else:
        r.alias[out] = r.alias.get(new, new)


def _check_heads(r, node, rank: int, q_heads: int, kv_heads: int) -> None:
    """Refuse at load what the shapes known here already rule out: Q, K, V of other ranks,
    hidden sizes that do not split into the heads, query heads that are not a multiple of the
    key/value heads (GQA). The op checks the rest (and these, for dims known only later)."""
    shapes = [r.known_shape(v) for v in node.input[:3]]
    if any(s is not None and len(s) != rank for s in shapes) or rank not in (3, 4):
        r.refuse(f"Q, K and V must all be 3-D or all 4-D; found "
                 f"{', '.join(r.describe_shape(x) for x in node.input[:3])}")
    q, k, v = ((s[1] if rank == 4 else s[2]) if s is not None else None for s in shapes)
    if rank == 3:
        for what, dim, heads in (("Q", q, q_heads), ("K", k, kv_heads), ("V", v, kv_heads)):
            if isinstance(dim, int) and dim % heads:
                r.refuse(f"{what}'s hidden size {dim} does not split into {heads} heads")
        q, k = q_heads, kv_heads
    v_differs = rank == 4 and isinstance(v, int) and v != k
    if isinstance(q, int) and isinstance(k, int) and (q % k or v_differs):
        r.refuse(f"{q} query heads need a whole number of groups of the {k} key/value heads "
                 f"(GQA), and K and V the same heads; found "
                 f"{', '.join(r.describe_shape(x) for x in node.input[:3])}")


@translates("Attention")
def _attention(r, node, name: str, attrs: dict) -> None:
    mask, past_key, past_value, nonpad = (optional_input(node, k) for k in (3, 4, 5, 6))
    if (past_key is None) != (past_value is None):
        r.refuse("past_key and past_value must be given together")
    if nonpad is not None and past_key is not None:
        r.refuse("nonpad_kv_seqlen cannot be combined with past_key/past_value (the ONNX "
                 "reference refuses it)")
    outputs = list(node.output) + [""] * (4 - len(node.output))
    rank = rank_of(r, node.input[0], "Attention")
    q_heads, kv_heads = int(attrs.get("q_num_heads", 0)), int(attrs.get("kv_num_heads", 0))
    if rank == 3 and (q_heads <= 0 or kv_heads <= 0):
        r.refuse("3-D Q, K, V need the q_num_heads and kv_num_heads attributes")
    _check_heads(r, node, rank, q_heads, kv_heads)
    ir = {"q_num_heads": str(q_heads), "kv_num_heads": str(kv_heads),
          "is_causal": _FLAG[bool(attrs.get("is_causal", 0))],
          "softcap": float_text(attrs.get("softcap", 0.0)),
          "qk_matmul_output_mode": str(int(attrs.get("qk_matmul_output_mode", 0))),
          "qk_output": _FLAG[bool(outputs[3])],
          "softmax_precision": str(int(attrs.get("softmax_precision", 0))),
          "has_past": _FLAG[past_key is not None], "has_mask": _FLAG[mask is not None],
          "has_nonpad": _FLAG[nonpad is not None],
          "left_window_size": str(int(attrs.get("left_window_size", -1))),
          "right_window_size": str(int(attrs.get("right_window_size", -1)))}
    if "scale" in attrs:
        ir["scale"] = repr(float(attrs["scale"]))
    inputs = list(node.input[:3]) + ([past_key, past_value] if past_key else []) + \
        [i for i in (mask, nonpad) if i is not None]
    r.emit("Attention", inputs, [outputs[0]] + ([outputs[3]] if outputs[3] else []), name, ir)
    for k, past in ((1, past_key), (2, past_value)):
        if outputs[k]:
            _present(r, node, name, k, past, rank, kv_heads)


@translates("RotaryEmbedding")
def _rotary(r, node, name: str, attrs: dict) -> None:
    positions = optional_input(node, 3)
    ir = {"interleaved": _FLAG[bool(attrs.get("interleaved", 0))],
          "rotary_embedding_dim": str(int(attrs.get("rotary_embedding_dim", 0))),
          "num_heads": str(int(attrs.get("num_heads", 0))),
          "has_positions": _FLAG[positions is not None]}
    r.emit("RotaryEmbedding", list(node.input[:3]) + ([positions] if positions else []),
           [node.output[0]], name, ir)
