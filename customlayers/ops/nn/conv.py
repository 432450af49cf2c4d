"""Convolution and GroupConvolution (opset1), 1-D, 2-D and 3-D spatial.

Weights are input 1 (OIYX; GroupConvolution GOIYX), uploaded once by the executor like any Const.
Bias is a separate Add in the IR. On a GPU the work runs as a tiled implicit GEMM (conv_gemm.cl
over the shared gemm.cl, planned in _gemm.py), as Winograd F(2x2, 3x3) or F(4x4, 3x3) for 3x3
stride-1 windows where the tuner finds it faster (conv_winograd.cl, planned in _winograd.py), or as a direct
kernel (conv_direct.cl) when each group has so few output channels that a GEMM tile would be
mostly empty (depthwise). In between, with a few dozen output channels per group (a TCN's 25 ->
25 channels, kernel 7), the GEMM pads M up to its tile, launches too few work-groups at batch 1
and loops over a short K in barriered steps: there the tuner also times a direct kernel that
keeps a block of output channels in registers (conv_direct_ocb.cl, variants `ocb{OCB}_px{PXB}`),
where each input read feeds OCB channels and every work item reads the same weight from
__local memory at once; and, where the layer's outputs are too few to fill the device (that
TCN at batch 1), one that splits each output's input channels among several work items
(conv_direct_split.cl, variants `split{CS}`), so that no work item reads a long chain of
inputs alone. On a CPU device (CompileContext.device, from the network) it
runs the register-blocked micro-kernel that _cpu_kernels.py selects (conv_cpu_blocked.cl, over
weights packed at compile time), or where that does not apply (depthwise, weights not
constant) conv_cpu.cl, a direct kernel shaped for CPU OpenCL compilers, which vectorize across
work items and emulate barriers and __local memory at a cost. The window arithmetic it shares
with pooling is in _nn.py.
3-D convolutions (NCDHW) run conv3d.cl, a separate direct kernel on every device, so the 1-D and
2-D kernels and their sources stay as they are.
Each of these kernels is a variant object listed and launched by _conv_variants.py; this
module prepares the call's plan (geometry, defines, arguments, the fused epilogue) and runs
the variant the tuner chose (CompileContext.variant) or the heuristic's first.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ...jit.launch import DEFAULT_CONTEXT
from ...jit.tensor import TensorDesc
from ._conv_variants import DIRECT_MAX_OG, ConvPlan, conv_variants
from . import _sizes
from ._epilogue import wire_epilogue
from .._nn import (AUTO_PADS, NamedOp, as_2d, as_3d, require_f32, spatial_rank,
                  window_geometry)
from ..base import OPS, Attr, register_op

_CONV_ATTRS = (
    Attr("strides", "ints", required=True),
    Attr("dilations", "ints", required=True),
    Attr("pads_begin", "ints", required=True),
    Attr("pads_end", "ints", required=True),
    Attr("auto_pad", "str", "explicit"),
)


@dataclass(frozen=True)
class InputShuffle:
    """A fact passes/shuffle_folding.py hands a convolution (CompileContext.facts): a channel
    shuffle of `group` was folded into its reads, so input 0 holds the channels in the
    shuffle's input order and the kernel reads channel c from plane IN_CHANNEL(c)."""
    group: int


def takes_shuffled_input(op_type: str, x_shape: Sequence, w_shape: Sequence,
                         group: int) -> bool:
    """Whether a convolution of type `op_type` over input 0 of `x_shape` with weights of
    `w_shape` can read its input through a channel shuffle of `group` (InputShuffle): a 2-D
    window with one input channel per group and at most DIRECT_MAX_OG outputs per group, so
    that every kernel that runs it (conv_direct.cl, conv_cpu.cl, conv_cpu_depthwise.cl) reads
    input channel c from plane IN_CHANNEL(c); and channels that the group divides."""
    op = OPS.get(op_type)
    if not isinstance(op, _ConvBase):
        return False
    x, w = tuple(x_shape or ()), tuple(w_shape or ())
    rank = 5 if op.grouped else 4
    if len(x) != 4 or len(w) != rank or not all(isinstance(d, int) for d in x + w):
        return False
    og, cg = (w[1], w[2]) if op.grouped else (w[0], w[1])
    return cg == 1 and og <= DIRECT_MAX_OG and min(w) > 0 and group > 1 and x[1] % group == 0


class _ConvBase(NamedOp):
    input_count = (2, 2)
    attributes = _CONV_ATTRS
    grouped = False
    # passes/fusion.py may fold a following per-channel bias Add and ReLU into the store: the
    # CompileContext's epilogue then says so (with a bias, it is input 2)
    accepts_epilogue = True
    folds_scale = True
    def check(self, attrs):
        self.check_choice(attrs, "auto_pad", AUTO_PADS)

    def _geometry(self, attrs, inputs: Sequence[TensorDesc]) -> dict[str, int]:
        require_f32(self, attrs, inputs[:2])
        rank = spatial_rank(self, attrs, inputs[0], max_spatial=3)
        x, w = inputs[0].shape, inputs[1].shape
        want = rank + (3 if self.grouped else 2)
        if len(w) != want:
            layout = "GOI" if self.grouped else "OI"
            raise self.fail(attrs, f"weights (input 1) have shape {list(w)}; expected rank "
                                   f"{want} ({layout} + {rank} kernel axes)")
        groups, og, cg = (w[0], w[1], w[2]) if self.grouped else (1, w[0], w[1])
        if cg * groups != x[1]:
            raise self.fail(attrs, f"input 0 has {x[1]} channels, the weights {list(w)} expect "
                                   f"{cg * groups} ({groups} group(s) of {cg})")
        kernel = w[-rank:]
        out, pb, _ = window_geometry(self, attrs, x[2:], kernel, attrs["strides"],
                                     attrs["dilations"])
        if rank == 3:
            sizes = dict(NB=x[0], C=x[1], O=groups * og, G=groups, CG=cg, OG=og,
                         RANK=rank, OUT=tuple(out))
            for names, values in (("ID IH IW", x[2:]), ("OD OH OW", out), ("KD KH KW", kernel),
                                  ("SZ SY SX", attrs["strides"]),
                                  ("DZ DY DX", attrs["dilations"]), ("PZ PY PX", pb)):
                sizes.update(zip(names.split(), as_3d(values, 1)))
            return sizes
        ih, iw = as_2d(x[2:], 1)
        oh, ow = as_2d(out, 1)
        kh, kw = as_2d(kernel, 1)
        sy, sx = as_2d(attrs["strides"], 1)
        dy, dx = as_2d(attrs["dilations"], 1)
        py, px = as_2d(pb, 0)
        return dict(NB=x[0], C=x[1], IH=ih, IW=iw, O=groups * og, OH=oh, OW=ow, G=groups,
                    CG=cg, OG=og, KH=kh, KW=kw, SY=sy, SX=sx, DY=dy, DX=dx, PY=py, PX=px,
                    RANK=rank, OUT=tuple(out))

    def infer_shapes(self, attrs, inputs, consts):
        g = self._geometry(attrs, inputs)
        return [((g["NB"], g["O"]) + g["OUT"], "f32")]

    def plan(self, attrs, inputs: Sequence[TensorDesc], outputs: Sequence[TensorDesc],
             consts, ctx=DEFAULT_CONTEXT) -> ConvPlan:
        """What every variant of this call reads (_conv_variants.ConvPlan)."""
        g = self._geometry(attrs, inputs)
        # the sizes are kernel arguments (_sizes.py); the 2-D kernels' window is a #define
        names = _sizes.CONV_3D if g["RANK"] == 3 else _sizes.CONV_2D
        bake = not ctx.on_cpu                 # a GPU: the sizes as #defines (_sizes.baked)
        sizes: dict = {"CONV_SIZES": ""} if bake else {"CONV_SIZES": _sizes.params(names)}
        if bake:
            sizes.update(_sizes.baked(g, names))
        if g["RANK"] != 3:
            sizes.update(KH=g["KH"], KW=g["KW"])
        fact = ctx.fact(InputShuffle)
        shuffle = fact.group if fact is not None else 1
        if shuffle > 1:       # only folded where each group reads one channel (direct kernels)
            if not takes_shuffled_input(self.type, inputs[0].shape, inputs[1].shape, shuffle):
                raise self.fail(attrs, f"a channel shuffle of group {shuffle} cannot be folded "
                                       f"into this convolution")
            sizes["IN_CHANNEL(c)"] = f"(((c) % {shuffle}) * (C / {shuffle}) + (c) / {shuffle})"
        wiring = wire_epilogue(self, attrs, ctx.epilogue, inputs, outputs[0], g["O"])
        sizes.update(wiring.flags)
        return ConvPlan(g, sizes, wiring.args, () if bake else _sizes.args(g, names),
                        consts.get(1),
                        ctx.device, ctx.on_cpu, shuffle)

    def kernel_variants(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        """Candidates for the tuner (_conv_variants.conv_variants), when there are several."""
        listed = conv_variants(self.plan(attrs, inputs, outputs, consts, ctx))
        return listed if len(listed) > 1 else ()

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        plan = self.plan(attrs, inputs, outputs, consts, ctx)
        variant = ctx.variant if ctx.variant is not None else conv_variants(plan)[0]
        if not variant.applies(plan):
            raise self.fail(attrs, f"variant {variant.name} needs {variant.needs}"
                            if variant.needs else
                            f"variant {variant.name} does not apply to this convolution")
        return variant.launches(plan)


@register_op
class Convolution(_ConvBase):
    type = "Convolution"


@register_op
class GroupConvolution(_ConvBase):
    type = "GroupConvolution"
    grouped = True
