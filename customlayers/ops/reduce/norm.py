"""LRN (opset1): local response normalisation over the axes given by constant input 1; and
ONNX's LpNormalization.

Following OpenVINO (checked against its CPU plugin in the tests): alpha is divided by
size ** len(axes), and the window along each axis is [i - (size-1)//2, i + (size-1)//2], so an
even size gives a window of size-1 cells. The sizes, the window and the parameters are kernel
arguments: one program (per beta == 0.75 or not) serves every LRN.
"""
from __future__ import annotations

import numpy as np

from ..base import Attr, register_op
from .._nn import NamedOp, axis_view, require_f32
from .._program import global_1d, program_text
from ...jit.launch import Arg, DEFAULT_CONTEXT, KernelLaunch


@register_op
class LRN(NamedOp):
    input_count = (2, 2)
    type = "LRN"
    attributes = (Attr("alpha", "float", required=True), Attr("beta", "float", required=True),
                  Attr("bias", "float", required=True), Attr("size", "int", required=True))
    const_inputs = (1,)

    def check(self, attrs):
        if attrs["size"] < 1:
            raise self.fail(attrs, f"attribute 'size'={attrs['size']} must be positive")

    def _axes(self, attrs, inputs, consts) -> list[int]:
        rank = len(inputs[0].shape)
        if 1 not in consts:
            raise self.fail(attrs, "input 1 (axes) must be a constant")
        axes = []
        for a in np.asarray(consts[1]).reshape(-1).tolist():
            a = int(a)
            if not -rank <= a < rank:
                raise self.fail(attrs, f"axis {a} is out of range for input 0 of rank {rank}")
            axes.append(a % rank)
        if len(set(axes)) != len(axes):
            raise self.fail(attrs, f"axes {sorted(axes)} repeat an axis")
        return axes

    def infer_shapes(self, attrs, inputs, consts):
        require_f32(self, attrs, inputs[:1])
        self._axes(attrs, inputs, consts)
        return [(inputs[0].shape, "f32")]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        axes = self._axes(attrs, inputs, consts)
        d = inputs[0].dims
        half = (attrs["size"] - 1) // 2
        # a window wider than its axis covers the whole axis: the same sum with a half of at
        # most dim - 1 (a size of 2**63 - 1 made the kernel's bounds a long it could not build)
        halves = {f"HALF{i}": (min(half, d[i] - 1) if i in axes else 0) for i in range(4)}
        scale = attrs["alpha"] / float(attrs["size"]) ** len(axes)
        src = program_text("lrn", {"BETA_3_4": int(attrs["beta"] == 0.75)}, "norm.cl")
        geo = np.array([*d[:4], *(halves[f"HALF{i}"] for i in range(4))], np.int32)
        args = (Arg.input(0), Arg.output(0), Arg.const(geo), Arg.scalar(np.float32(attrs["bias"])),
                Arg.scalar(np.float32(scale)), Arg.scalar(np.float32(attrs["beta"])))
        label = f"lrn_{attrs['size']}_axes{''.join(map(str, axes))}"
        if ctx.on_cpu and halves["HALF3"] == 0:
            return [KernelLaunch(source=src, entry="lrn_cpu", args=args,
                                 global_size=(d[2], d[0] * d[1]), local_size=(1, 1),
                                 label=label + "_cpu")]
        return [KernelLaunch(source=src, entry="lrn", args=args,
                             global_size=(d[3], d[2], d[0] * d[1]), label=label)]


@register_op
class LpNormalization(NamedOp):
    """ONNX LpNormalization (opset 1/22): x divided by its L1 (p=1) or L2 (p=2) norm along
    `axis`, f32 or f64, any rank, on lp_normalize.cl (dims as kernel arguments)."""
    input_count = (1, 1)
    type = "LpNormalization"
    attributes = (Attr("axis", "int", -1), Attr("p", "int", 2))

    def check(self, attrs):
        if attrs["p"] not in (1, 2):
            raise self.fail(attrs, f"attribute 'p'={attrs['p']} is not 1 or 2")

    def _view(self, attrs, inputs) -> tuple[int, int, int]:
        return axis_view(self, attrs, inputs[0])

    def infer_shapes(self, attrs, inputs, consts):
        self._view(attrs, inputs)
        return [(inputs[0].shape, inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        outer, length, inner = self._view(attrs, inputs)
        src = program_text("lp_normalize", {"T": inputs[0].cl_type}, "lp_normalize.cl")
        return [KernelLaunch(src, "lp_normalize", (Arg.input(0), Arg.output(0),
                                                   Arg.scalar(np.int32(length)),
                                                   Arg.scalar(np.int32(inner)),
                                                   Arg.scalar(np.int32(outer * inner)),
                                                   Arg.scalar(np.int32(attrs["p"]))),
                             global_1d(outer * inner), label=f"lp_normalize_p{attrs['p']}")]
