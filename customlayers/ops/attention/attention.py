"""ONNX Attention (opset 23, 24; and 25's sliding window) as one op on attention.cl: one
work-group per query row computes the row's scores, a max-subtracted softmax and the weighted
sum of the values, with the ONNX reference's semantics (onnx/reference/ops/op_attention.py):
masks (bool or float, broadcast over batch and heads, shorter than the keys: the keys past the
mask are masked), causal from the past length or nonpad_kv_seqlen, softcap, GQA heads, the
optional qk_matmul_output in its four modes, fully masked rows giving 0.

Inputs of the IR node: Q, K, V, then past_key and past_value (attribute has_past), attn_mask
(has_mask), nonpad_kv_seqlen (has_nonpad). The ONNX translation (graph/onnx/ops/attention.py)
makes present_key/present_value from the same tensors with Concat/Transpose, so this op writes
Y and, with qk_output, qk_matmul_output (B, QH, S, total keys).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...errors import BindingError
from ...jit.launch import Arg, DEFAULT_CONTEXT, KernelLaunch
from .._program import dense_strides, program_text, shape_of
from ..base import Attr, Op, register_op

_FLOATS = ("f32", "f64")
# ONNX TensorProto codes softmax_precision may name, and the type the softmax then runs in
_PRECISION = {1: "float", 11: "double"}


@dataclass(frozen=True)
class _Geometry:
    """The sizes and strides of one call (see attention.cl for what each means)."""
    batch: int
    q_heads: int
    kv_heads: int
    q_len: int          # S
    past: int           # P
    total: int          # P + new keys
    head: int           # D
    v_head: int         # DV
    strides: tuple      # QB, QHS, QS, KB, KHS, KS, VB, VHS, VS, YB, YHS, YS
    mask: tuple         # MB, MHS, MS, MASK_LEN
    rank: int


def _heads_view(shape, heads: int, what: str, op: str):
    """(batch, heads, seq, head size) and the (batch, head, row) strides of a 3-D (B, S, H*D)
    or 4-D (B, H, S, D) tensor."""
    if len(shape) == 4:
        b, h, s, d = shape
        return (b, h, s, d), (h * s * d, s * d, d)
    b, s, hidden = shape
    if heads <= 0 or hidden % heads:
        raise BindingError(f"{op}: {what} of shape {list(shape)} is 3-D and its last dim "
                           f"{hidden} does not split into {heads} heads (q_num_heads/"
                           f"kv_num_heads must be given and divide the hidden sizes)")
    d = hidden // heads
    return (b, heads, s, d), (s * hidden, d, hidden)


@register_op
class Attention(Op):
    type = "Attention"
    input_count = (3, 7)
    attributes = (Attr("q_num_heads", "int", 0), Attr("kv_num_heads", "int", 0),
                  Attr("scale", "float", None), Attr("is_causal", "bool", False),
                  Attr("softcap", "float", 0.0), Attr("qk_matmul_output_mode", "int", 0),
                  Attr("qk_output", "bool", False), Attr("softmax_precision", "int", 0),
                  Attr("has_past", "bool", False), Attr("has_mask", "bool", False),
                  Attr("has_nonpad", "bool", False), Attr("left_window_size", "int", -1),
                  Attr("right_window_size", "int", -1))

    # -- the inputs ------------------------------------------------------------------------
    @staticmethod
    def _ports(attrs) -> dict[str, int]:
        ports, k = {}, 3
        for name, flag in (("past_key", "has_past"), ("past_value", "has_past"),
                           ("mask", "has_mask"), ("nonpad", "has_nonpad")):
            if attrs[flag]:
                ports[name], k = k, k + 1
        return ports

    def _geometry(self, attrs, inputs) -> _Geometry:
        op = self.type
        ports = self._ports(attrs)
        if len(inputs) != 3 + len(ports):
            raise BindingError(f"{op}: expected {3 + len(ports)} inputs (Q, K, V"
                               f"{''.join(', ' + p for p in ports)}), found {len(inputs)}")
        q, k, v = (shape_of(t) for t in inputs[:3])
        if not (len(q) == len(k) == len(v)) or len(q) not in (3, 4):
            raise BindingError(f"{op}: Q, K and V must all be 3-D (batch, seq, hidden) or all "
                               f"4-D (batch, heads, seq, head size); found {list(q)}, "
                               f"{list(k)}, {list(v)}")
        dtype = inputs[0].dtype
        if dtype == "f16":
            raise BindingError(f"{op}: float16 Q, K, V are not supported yet (float or double)")
        if dtype not in _FLOATS or any(t.dtype != dtype for t in inputs[:3]):
            raise BindingError(f"{op}: Q, K and V must share one of the element types "
                               f"{', '.join(_FLOATS)}; found "
                               f"{', '.join(t.dtype for t in inputs[:3])}")
        (b, qh, s, d), qst = _heads_view(q, attrs["q_num_heads"], "Q", op)
        (kb, kvh, kl, kd), kst = _heads_view(k, attrs["kv_num_heads"], "K", op)
        (vb, vh, vl, dv), vst = _heads_view(v, attrs["kv_num_heads"], "V", op)
        if kd != d or (kb, kvh, kl) != (b, vh, vl) or vb != b:
            raise BindingError(f"{op}: K must be (batch {b}, kv heads, kv seq, head size {d}) "
                               f"and V (batch {b}, the same kv heads and kv seq, v head size); "
                               f"found K {list(k)} and V {list(v)} (as heads: K {[kb, kvh, kl, kd]}"
                               f", V {[vb, vh, vl, dv]})")
        if qh % kvh:
            raise BindingError(f"{op}: {qh} query heads do not divide into groups of the {kvh} "
                               f"key/value heads (GQA needs q heads = a multiple of kv heads)")
        past = 0
        if "past_key" in ports:
            pk, pv = (inputs[ports[n]] for n in ("past_key", "past_value"))
            pks, pvs = shape_of(pk), shape_of(pv)
            if len(pks) != 4 or pks[:2] != (b, kvh) or pks[3] != d or \
                    pvs != (b, kvh, pks[2], dv) or pk.dtype != dtype or pv.dtype != dtype:
                raise BindingError(f"{op}: past_key must be ({b}, {kvh}, past, {d}) and "
                                   f"past_value ({b}, {kvh}, past, {dv}) of {dtype}; found "
                                   f"{list(pks)} and {list(pvs)}")
            past = pks[2]
        total = past + kl
        mask = (0, 0, 0, 1)
        if "mask" in ports:
            mask = self._mask_strides(inputs[ports["mask"]], dtype, (b, qh, s, total))
        if "nonpad" in ports:
            t = inputs[ports["nonpad"]]
            if t.dtype != "i64" or shape_of(t) != (b,):
                raise BindingError(f"{op}: nonpad_kv_seqlen must be int64 of shape ({b},); "
                                   f"found {t.dtype} {list(shape_of(t))}")
        ys = (qh * s * dv, s * dv, dv) if len(q) == 4 else (s * qh * dv, dv, qh * dv)
        return _Geometry(b, qh, kvh, s, past, total, d, dv, (*qst, *kst, *vst, *ys), mask,
                         len(q))

    def _mask_strides(self, mask, dtype: str, full: tuple) -> tuple:
        """(MB, MHS, MS, MASK_LEN): a mask of rank 1 to 4 whose dims before the last are 1 or
        the (batch, heads, query rows) they stand for, and whose last dim is at most the keys."""
        shape = shape_of(mask)
        if mask.dtype not in ("u8", dtype) or not 1 <= len(shape) <= 4 or \
                shape[-1] > full[3] or any(m not in (1, f) for m, f in zip(
                    shape[:-1], full[len(full) - len(shape):-1])):
            raise BindingError(f"{self.type}: attn_mask must be bool or {dtype}, of rank 1 to 4, "
                               f"broadcast to (batch, heads, q seq, keys) = {list(full)} with at "
                               f"most {full[3]} keys; found {mask.dtype} {list(shape)}")
        lead = (1,) * (4 - len(shape)) + shape
        strides = dense_strides(lead)
        return tuple(0 if lead[a] == 1 else strides[a] for a in range(3)) + (shape[-1],)

    # -- the op ----------------------------------------------------------------------------
    def _check_attrs(self, attrs, dtype: str) -> None:
        mode = attrs["qk_matmul_output_mode"]
        if mode not in (0, 1, 2, 3):
            raise BindingError(f"{self.type}: qk_matmul_output_mode {mode} is not one of 0-3")
        precision = attrs["softmax_precision"]
        if precision and precision not in _PRECISION:
            raise BindingError(f"{self.type}: softmax_precision {precision} is not supported "
                               f"(FLOAT (1) or DOUBLE (11); the softmax runs in float or double)")
        if attrs["softcap"] < 0 or not math.isfinite(attrs["softcap"]):
            raise BindingError(f"{self.type}: softcap {attrs['softcap']} must be 0 (off) or "
                               f"positive")

    def infer_shapes(self, attrs, inputs, consts):
        g = self._geometry(attrs, inputs)
        dtype = inputs[0].dtype
        self._check_attrs(attrs, dtype)
        y = (g.batch, g.q_heads, g.q_len, g.v_head) if g.rank == 4 else \
            (g.batch, g.q_len, g.q_heads * g.v_head)
        outs = [(y, dtype)]
        if attrs["qk_output"]:
            outs.append(((g.batch, g.q_heads, g.q_len, g.total), dtype))
        return outs

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        g = self._geometry(attrs, inputs)
        dtype = inputs[0].dtype
        ports = self._ports(attrs)
        wide = dtype == "f64" or attrs["softmax_precision"] == 11
        acc, acc_size = ("double", 8) if wide else ("float", 4)
        limit = ctx.device.max_work_group_size if ctx.device is not None else 256
        # a GPU shares a row among 64 items; a CPU runs it on one (a PoCL work-group's items
        # are a loop around each stretch between barriers: a BERT-base head set, 12x128x128x64,
        # took 18 ms with one item per row, 29 ms with 16, 23 ms with 4)
        wg = 1 if ctx.on_cpu else min(64, 1 << (max(1, limit).bit_length() - 1))
        mask = inputs[ports["mask"]] if "mask" in ports else None
        causal, nonpad = bool(attrs["is_causal"]), "nonpad" in ports
        window = attrs["left_window_size"] >= 0 or attrs["right_window_size"] >= 0
        values = {
            "T": "double" if dtype == "f64" else "float", "ACC": acc, "WG": wg,
            "HAS_PAST": int("past_key" in ports),
            "MASK_KIND": 0 if mask is None else (1 if mask.dtype == "u8" else 2),
            "HAS_NONPAD": int(nonpad), "NONPAD_OFFSET": int(nonpad and "past_key" not in ports),
            "CAUSAL": int(causal), "WINDOW": int(window),
            "SOFTCAP": int(attrs["softcap"] > 0),
            "QK_MODE": attrs["qk_matmul_output_mode"] if attrs["qk_output"] else -1,
        }
        args = [Arg.input(0), Arg.input(1), Arg.input(2)]
        args += [Arg.input(ports[p]) for p in ("past_key", "past_value", "mask", "nonpad")
                 if p in ports]
        args += [Arg.output(0)] + ([Arg.output(1)] if attrs["qk_output"] else [])
        rows = g.batch * g.q_heads * g.q_len
        scale = attrs["scale"] if attrs["scale"] is not None else 1.0 / math.sqrt(g.head)
        i32 = np.int32
        args += [Arg.scratch(0, rows * g.total * acc_size), Arg.local(g.head * acc_size),
                 Arg.local(wg * acc_size)]
        args += [Arg.scalar(i32(x)) for x in (
            g.q_heads, g.q_heads // g.kv_heads, g.q_len, g.past, g.total, g.head, g.v_head,
            *g.strides, *g.mask)]
        real = np.float64 if wide else np.float32        # the kernel's ACC
        args += [Arg.scalar(real(scale)), Arg.scalar(real(attrs["softcap"])),
                 Arg.scalar(i32(attrs["left_window_size"])),
                 Arg.scalar(i32(attrs["right_window_size"]))]
        label = f"attention_{dtype}"
        return [KernelLaunch(program_text(label, values, "attention.cl"), "attention",
                             tuple(args), (rows * wg,), (wg,), label=label)]
