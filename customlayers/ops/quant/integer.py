"""MatMulInteger and ConvInteger (ONNX opset 10) as built-in ops of the same names: int8/uint8
operands minus their zero points, the products summed in int32 exactly (quant_integer.cl; no
float on the way, so sums past 2^24 stay exact). The translation supplies zero points of 0
where the model gives none, so both ops take four inputs.

MatMulInteger: A [..., M, K] and B [..., K, N] with equal batch dims or one side without batch
(broadcast); A's zero point one value or one per row (M), B's one value or one per column (N).
ConvInteger: x N,C,[H,]W and w OC,C/group,[KH,]KW, explicit pads; x's zero point one value,
w's one value or one per output channel.
"""
from __future__ import annotations

import numpy as np

from ...errors import BindingError
from ...jit.launch import Arg, DEFAULT_CONTEXT, KernelLaunch
from .._program import global_1d, numel, program_text, shape_of
from ..base import Attr, Op, register_op

OPERAND_TYPES = ("i8", "u8")


class _Integer(Op):
    input_count = (4, 4)
    entry = ""

    def where(self, attrs) -> str:
        return f"layer '{getattr(attrs, 'layer', '?')}' ({self.type})"

    def check_types(self, attrs, inputs) -> None:
        for k, what in ((0, "input 0"), (1, "input 1")):
            if inputs[k].dtype not in OPERAND_TYPES:
                raise BindingError(f"{self.where(attrs)}: {what} is {inputs[k].dtype}; "
                                   f"supported: {', '.join(OPERAND_TYPES)}")
            if inputs[k + 2].dtype != inputs[k].dtype:
                raise BindingError(f"{self.where(attrs)}: the zero point of {what} is "
                                   f"{inputs[k + 2].dtype}, the operand {inputs[k].dtype}")

    def zp_step(self, attrs, desc, per: int, what: str) -> int:
        n = numel(shape_of(desc))
        if n == 1:
            return 0
        if n == per and len(shape_of(desc)) >= 1:
            return 1
        raise BindingError(f"{self.where(attrs)}: the zero point of {what} has shape "
                           f"{list(shape_of(desc))}; one value or {per} are supported")

    def program(self, inputs) -> str:
        return program_text(f"{self.entry}_{inputs[0].dtype}_{inputs[1].dtype}", {
            "A_TYPE": inputs[0].cl_type, "B_TYPE": inputs[1].cl_type,
            "AZP_TYPE": inputs[2].cl_type, "BZP_TYPE": inputs[3].cl_type}, "quant_integer.cl")


@register_op
class MatMulInteger(_Integer):
    type = "MatMulInteger"
    entry = "matmul_integer"

    def _form(self, attrs, inputs):
        a, b = shape_of(inputs[0]), shape_of(inputs[1])
        if len(a) < 2 or len(b) < 2 or a[-1] != b[-2]:
            raise BindingError(f"{self.where(attrs)}: expected A [..., M, K] and B [..., K, N], "
                               f"found {list(a)} and {list(b)} (1-D operands are not supported)")
        ba, bb = a[:-2], b[:-2]
        if numel(ba) > 1 and numel(bb) > 1 and tuple(ba) != tuple(bb):
            raise BindingError(f"{self.where(attrs)}: batch dims {list(ba)} and {list(bb)}: only "
                               f"equal batch dims, or one operand without batch, are supported")
        batch = ba if len(ba) >= len(bb) and numel(ba) >= numel(bb) else bb
        m, k, n = a[-2], a[-1], b[-1]
        return batch, m, k, n, (m * k if numel(ba) > 1 else 0), (k * n if numel(bb) > 1 else 0)

    def infer_shapes(self, attrs, inputs, consts):
        self.check_types(attrs, inputs)
        batch, m, k, n, _, _ = self._form(attrs, inputs)
        self.zp_step(attrs, inputs[2], m, "A")
        self.zp_step(attrs, inputs[3], n, "B")
        return [((*batch, m, n), "i32")]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        batch, m, k, n, a_batch, b_batch = self._form(attrs, inputs)
        count = numel(batch) * m * n
        args = (Arg.input(0), Arg.input(1), Arg.input(2), Arg.input(3), Arg.output(0),
                Arg.scalar(np.int32(numel(batch))), Arg.scalar(np.int32(m)),
                Arg.scalar(np.int32(n)), Arg.scalar(np.int32(k)),
                Arg.scalar(np.int64(a_batch)), Arg.scalar(np.int64(b_batch)),
                Arg.scalar(np.int32(self.zp_step(attrs, inputs[2], m, "A"))),
                Arg.scalar(np.int32(self.zp_step(attrs, inputs[3], n, "B"))))
        return [KernelLaunch(self.program(inputs), self.entry, args, global_1d(count),
                             label=self.entry)]


@register_op
class ConvInteger(_Integer):
    type = "ConvInteger"
    entry = "conv_integer"
    attributes = (Attr("strides", "ints", ()), Attr("dilations", "ints", ()),
                  Attr("pads_begin", "ints", ()), Attr("pads_end", "ints", ()),
                  Attr("group", "int", 1))

    def _geometry(self, attrs, inputs) -> list[int]:
        x, w = shape_of(inputs[0]), shape_of(inputs[1])
        group = attrs["group"]
        if len(x) not in (3, 4) or len(w) != len(x) or group < 1 or x[1] % group \
                or w[0] % group or w[1] * group != x[1]:
            raise BindingError(f"{self.where(attrs)}: expected x N,C,[H,]W and w OC,C/group,"
                               f"[KH,]KW (1-D or 2-D) with group {group}; found {list(x)} and "
                               f"{list(w)}")
        k = len(x) - 2
        lift = (lambda v, fill: [fill] * (2 - k) + list(v))   # 1-D: a height of 1
        vals = [lift(attrs[a] or [d] * k, d) for a, d in
                (("strides", 1), ("dilations", 1), ("pads_begin", 0), ("pads_end", 0))]
        if any(len(v) != 2 for v in vals):
            raise BindingError(f"{self.where(attrs)}: strides, dilations and pads need {k} "
                               f"values each")
        (sy, sx), (dy, dx), (py, px), (ey, ex) = vals
        (h, wd), (kh, kw) = lift(x[2:], 1), lift(w[2:], 1)
        oh = (h + py + ey - dy * (kh - 1) - 1) // sy + 1
        ow = (wd + px + ex - dx * (kw - 1) - 1) // sx + 1
        if oh <= 0 or ow <= 0:
            raise BindingError(f"{self.where(attrs)}: the output would be empty ({oh}x{ow})")
        return [x[0], x[1], h, wd, w[0], oh, ow, kh, kw, sy, sx, dy, dx, py, px, group,
                self.zp_step(attrs, inputs[3], w[0], "w")]

    def infer_shapes(self, attrs, inputs, consts):
        self.check_types(attrs, inputs)
        if numel(shape_of(inputs[2])) != 1:
            raise BindingError(f"{self.where(attrs)}: x's zero point must be one value, found "
                               f"shape {list(shape_of(inputs[2]))}")
        g = self._geometry(attrs, inputs)
        spatial = [g[5], g[6]] if len(shape_of(inputs[0])) == 4 else [g[6]]
        return [((g[0], g[4], *spatial), "i32")]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        g = self._geometry(attrs, inputs)
        count = g[0] * g[4] * g[5] * g[6]
        args = (Arg.input(0), Arg.input(1), Arg.input(2), Arg.input(3), Arg.output(0),
                Arg.const(np.array(g, np.int32)))
        return [KernelLaunch(self.program(inputs), self.entry, args, global_1d(count),
                             label=f"{self.entry}_{g[7]}x{g[8]}")]
