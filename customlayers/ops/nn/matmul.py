"""MatMul (opset1): transpose_a, transpose_b, numpy broadcasting of batch dims, 1-D operands.

A fused epilogue (bias, residual, ReLU; conv_epilogue.cl) is applied where it stores.
Runs on the tiled GEMM core (gemm.cl via matmul.cl); on a CPU device on a register-blocked
kernel without __local memory (matmul_cpu.cl); or, for a single row (M == 1: the fully
connected layers of classification models), on a matrix-vector kernel that reads B once with
all of the device's lanes (matmul_gemv.cl). A SoftMax or LogSoftmax of the last axis that
followed (a classifier's head: passes/fusion.py) runs in the same kernel, one work-group per
row (matmul_softmax.cl). A folded last-step Gather (passes/pick_folding.py) makes A one element
of every run along input 0's last axis (the PickLast fact).
Each kernel is a variant object (jit/variant.py) over the call's MatMulPlan: the GEMM's tilings
(_variants.GemmVariant, listed for the tuner), or the one kernel of a row SoftMax or of M == 1.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..base import Attr, register_op
from . import _sizes
from ._cpu_kernels import kernel_vector_width
from ._epilogue import residual_strides, wire_epilogue
from ._gemm import GemmProblem, target_groups
from ._variants import gemm_variants, pipeline_defines, with_pipeline
from .._nn import NamedOp, require_f32
from .._program import buffer_aligned, defines, kernel_source
from ..view_steps import GemmLayout, OperandViews, operand_views
from ...jit.launch import Arg, DEFAULT_CONTEXT, DeviceTraits, FusedEpilogue, KernelLaunch
from ...jit.layer import LayerCall
from ...jit.tensor import TensorDesc
from ...jit.variant import KernelVariant

_GEMV_WG = 64  # work items per output row in the transposed-B matrix-vector kernel
# a fused row SoftMax (matmul_softmax.cl) keeps the row in __local memory: 16 KiB at most
ROW_SOFTMAX_MAX = 4096
# ... and computes a row with one work-group (a CPU: one work item): only for a small head (the
# TCN's 25 x 10), where one launch fewer pays; a large one (VGG's 4096 x 1000) keeps the
# matrix-vector kernel, which spreads a row over the whole device
ROW_SOFTMAX_MAX_WEIGHTS = 1 << 16
# ... and with at most this many rows: a work-group per row re-reads B from global memory, where
# the tiled GEMM shares it through __local memory (attention scores have thousands of rows)
ROW_SOFTMAX_MAX_ROWS = 1024
# work items per row of the fused SoftMax: a GPU shares each row among a group; a CPU device
# runs each row in one work item (the work-group's tree of barriers is what it emulates worst)
_SOFTMAX_WG_GPU, _SOFTMAX_WG_CPU = 64, 1


@dataclass(frozen=True)
class PickLast:
    """A fact passes/pick_folding.py hands a MatMul (CompileContext.facts): a Gather was folded
    into its reads, so input 0 has one more trailing axis and A is its element `index` along
    it, the Gather's index as written (negative: from the end, counted in the length input 0
    really has). Without it, A is input 0 as it is. gather: the folded Gather's name, for
    messages (not part of the fact's identity)."""
    index: int
    gather: str = field(default="", compare=False)


@dataclass
class MatMulPlan:
    """One MatMul call as its variants read it."""
    sizes: dict                 # M, N, K, transposes, batch strides, pick, CH_DIV CH_MOD
    batches: int
    out: tuple                  # the output's shape
    args: tuple                 # A, B, output[, bias][, residual]
    # matmul.cl's #defines: the transposes, whether A is picked (A_PICKED), the size parameters'
    # list (MATMUL_SIZES), the FUSED_* flags and CHANNEL()'s form (conv_epilogue.cl reads them)
    epilogue: str
    row_softmax: str            # "softmax" | "logsoftmax" | "" (FusedEpilogue.row_softmax)
    b_rank: int
    device: object
    on_cpu: bool
    # B's value when it is a constant [K][N] shared by every batch (a Linear's weights): the CPU
    # kernel reads it packed into panels of its columns (CpuGemmVariant)
    b_const: object = None
    baked: bool = False         # the sizes are #defines, not arguments (a GPU: _sizes.baked)

    @property
    def label(self) -> str:
        return f"matmul_{self.sizes['M']}x{self.sizes['K']}x{self.sizes['N']}"

    @property
    def async_tiles(self) -> bool:
        """Whether gemm_async.cl's pipeline can read the operands: on a GPU, every float4 group
        of A and B aligned and whole (GemmLayout.vector_reads)."""
        reads = GemmLayout.vector_reads(self.sizes)
        return not self.on_cpu and reads["GEMM_VEC_A"] == 1 and reads["GEMM_VEC_B"] == 1

    @property
    def kernel_args(self) -> tuple:
        """The layer's tensors, then the sizes (matmul.cl's MATMUL_SIZES, in order)."""
        if self.baked:
            return self.args
        return self.args + _sizes.args(self._size_values(), _sizes.MATMUL)

    def _size_values(self) -> dict:
        return dict(self.sizes, A_STEP_ARG=self.sizes["A_STEP"], A_PICK_ARG=self.sizes["A_PICK"])

    def gemm(self) -> GemmProblem:
        """The tiled GEMM (gemm.cl via matmul.cl)."""
        s = self.sizes
        return GemmProblem(self.epilogue + kernel_source("matmul_gemm.cl"), self.kernel_args,
                           s["M"], s["N"], s["K"], self.batches, self.label + "_gemm")


@dataclass(frozen=True)
class RowSoftmaxVariant(KernelVariant):
    """matmul_softmax.cl: one work-group per row (a CPU: one work item) computes the row and
    its SoftMax or LogSoftmax of the last axis."""

    @property
    def name(self) -> str:
        return "row_softmax"

    def launches(self, plan: MatMulPlan) -> list[KernelLaunch]:
        wg = _SOFTMAX_WG_CPU if plan.on_cpu else _SOFTMAX_WG_GPU
        src = (defines(WG=wg, LOG_SOFTMAX=int(plan.row_softmax == "logsoftmax"))
               + plan.epilogue + kernel_source("matmul_softmax.cl"))
        row = Arg.local(4 * plan.sizes["N"])          # the row's values, in __local memory
        return [KernelLaunch(source=src, entry="matmul_softmax", args=plan.kernel_args + (row,),
                             global_size=(plan.batches * plan.sizes["M"] * wg,),
                             local_size=(wg,), label=f"{plan.label}_{plan.row_softmax}")]


@dataclass(frozen=True)
class GemvVariant(KernelVariant):
    """A single row (M == 1): the matrix-vector kernel, which reads B once with all of the
    device's lanes (matmul_gemv.cl), or on a CPU eight outputs per work item
    (matmul_gemv_cpu.cl)."""
    cpu: bool

    @property
    def name(self) -> str:
        return "gemv_cpu" if self.cpu else "gemv"

    def launches(self, plan: MatMulPlan) -> list[KernelLaunch]:
        s, n = plan.sizes, plan.sizes["N"]
        if self.cpu:
            src = plan.epilogue + kernel_source("matmul_gemv_cpu.cl")
            return [KernelLaunch(source=src, entry="matmul_gemv_cpu", args=plan.kernel_args,
                                 global_size=(-(-n // 8), plan.batches), local_size=(1, 1),
                                 label=plan.label + "_gemv_cpu")]
        src = defines(WG=_GEMV_WG) + plan.epilogue + kernel_source("matmul_gemv.cl")
        width = n * _GEMV_WG if s["TRANSPOSE_B"] else -(-n // _GEMV_WG) * _GEMV_WG
        return [KernelLaunch(source=src, entry="matmul_gemv", args=plan.kernel_args,
                             global_size=(width, plan.batches), local_size=(_GEMV_WG, 1),
                             label=plan.label + "_gemv")]


@dataclass(frozen=True)
class CpuGemmVariant(KernelVariant):
    """M > 1 on a CPU device: matmul_cpu.cl, each work item `mr` rows by `nb` vector runs of
    columns (B [K][N]) or `nb` columns (TRANSPOSE_B), in registers, without __local memory;
    vectors of `vw` lanes (8: float8, AVX2; 16: float16, AVX-512)."""
    mr: int
    nb: int
    vw: int = 8

    @property
    def name(self) -> str:
        return f"cpu_gemm{self.mr}x{self.nb}" + (f"v{self.vw}" if self.vw != 8 else "")

    def launches(self, plan: MatMulPlan) -> list[KernelLaunch]:
        s = plan.sizes
        cols = self.nb if s["TRANSPOSE_B"] else self.vw * self.nb
        args = plan.kernel_args
        packed = plan.b_const is not None and not s["TRANSPOSE_B"]
        if packed:              # B as panels [N / cols][K][cols]: one stream per work item
            args = (args[0], Arg.const(pack_panels(plan.b_const, s["K"], s["N"], cols))) + \
                args[2:]
        src = defines(MR=self.mr, NB=self.nb, PACKED_B=int(packed), VW=self.vw) + \
            plan.epilogue + kernel_source("matmul_cpu.cl")
        rows, columns = -(-s["M"] // self.mr), -(-s["N"] // cols)
        grid = (columns, rows) if s["TRANSPOSE_B"] else (rows, columns)
        return [KernelLaunch(source=src, entry="matmul_cpu", args=args,
                             global_size=grid + (plan.batches,),
                             local_size=(1, 1, 1), label=f"{plan.label}_{self.name}")]


def pack_panels(b: np.ndarray, k: int, n: int, cols: int) -> np.ndarray:
    """B [K][N] as panels of `cols` columns, [ceil(N / cols)][K][cols], the last padded with
    zeros: the columns a work item of matmul_cpu.cl reads, contiguous along K."""
    panels = -(-n // cols)
    padded = np.zeros((k, panels * cols), np.float32)
    padded[:, :n] = np.asarray(b, np.float32).reshape(k, n)
    # page-aligned: a CPU device reads it where it lies, not from a second copy
    return buffer_aligned(padded.reshape(k, panels, cols).transpose(1, 0, 2))


def cpu_gemm_variants(transpose_b: bool, device: DeviceTraits) -> tuple[CpuGemmVariant, ...]:
    """Register blockings, the first the default: on AVX2 (8 lanes) float8 accumulators in 12
    of its 16 vector registers; on AVX-512 (16 lanes) float16 ones in 24 of its 32 (the rest
    hold the B vectors and the broadcast A). The lanes are the convolution kernels'
    (_cpu_kernels.kernel_vector_width). Measured on PoCL AVX-512 at BERT's and ViT's shapes
    (M 128-197, K and N 768-3072): 6 rows x 64 columns in float16 170-190 GFLOP/s, 6 x 32 in
    float16 130-150, 6 x 32 in float8 (the former default there) 120-130."""
    if kernel_vector_width(device) == 16:
        return (CpuGemmVariant(6, 4, 16), CpuGemmVariant(3, 4, 16)) if transpose_b else \
            (CpuGemmVariant(6, 4, 16), CpuGemmVariant(6, 2, 16))
    return (CpuGemmVariant(3, 4), CpuGemmVariant(2, 4)) if transpose_b else \
        (CpuGemmVariant(6, 2), CpuGemmVariant(4, 2))


def matmul_variants(plan: MatMulPlan) -> tuple[KernelVariant, ...]:
    """Every variant for the plan, the heuristic's first first; never empty. On a CPU the
    register-blocked kernels come first and the GPU tilings stay for the tuner."""
    s = plan.sizes
    if plan.row_softmax:
        return (RowSoftmaxVariant(),)
    if s["M"] == 1:
        return (GemvVariant(cpu=plan.on_cpu),)
    device = plan.device
    tiled = gemm_variants(s["M"], s["N"], s["K"], plan.batches, target_groups(device),
                          device.max_work_group_size if device is not None else 256)
    if plan.on_cpu:                 # a CPU device, never None
        return cpu_gemm_variants(bool(s["TRANSPOSE_B"]), device) + tiled[:2]
    return with_pipeline(tiled, plan, s["M"], s["N"], s["K"], plan.batches,
                         target_groups(device))


@register_op
class MatMul(NamedOp):
    input_count = (2, 2)
    type = "MatMul"
    attributes = (Attr("transpose_a", "bool", False), Attr("transpose_b", "bool", False))
    # passes/fusion.py may fold a following bias Add (along the output's axis 1: a Gemm's
    # bias), a residual Add and a ReLU into the store (ONNX Gemm + Relu: one kernel)
    accepts_epilogue = True
    # ... and a SoftMax/LogSoftmax of the last axis after it (Linear + bias + LogSoftmax)
    accepts_row_softmax = True
    # a bias along the last axis of a [B, S, N] output (a transformer's Linear) is fused too
    epilogue_channels_last = True
    # ... and a residual that broadcasts to the output (an attention mask added to the scores)
    accepts_broadcast_residual = True

    def _plan(self, attrs, inputs, ctx=DEFAULT_CONTEXT):
        """The GEMM view: sizes (with the operands' and the output's layouts), batch count,
        output shape."""
        require_f32(self, attrs, inputs)
        views = operand_views(self, attrs, inputs, ctx.fact(OperandViews))
        va, vb = views.views if views is not None else (None, None)
        a = tuple(va.shape) if va is not None else tuple(inputs[0].shape)
        b = tuple(vb.shape) if vb is not None else tuple(inputs[1].shape)
        pick, step = 0, 1
        fact = ctx.fact(PickLast)
        if fact is not None:
            pick = fact.index
            if len(a) >= 3 and not -a[-1] <= pick < a[-1]:
                # the model's own index, out of range for the length this request gives
                raise self.fail(attrs, f"the Gather '{fact.gather}' read in this MatMul takes "
                                       f"index {pick} of the last axis of {list(a)}, out of "
                                       f"range for its length {a[-1]} (an index must be in "
                                       f"[-{a[-1]}, {a[-1]}))")
            if len(a) < 3 or attrs["transpose_a"] or va is not None:
                raise self.fail(attrs, f"element {pick} of the last axis of input 0 "
                                       f"{list(a)} cannot be read as an untransposed A")
            a, step, pick = a[:-1], a[-1], pick % a[-1]
        if not a or not b:
            raise self.fail(attrs, f"inputs must have rank >= 1, found {list(a)} and {list(b)}")
        ta, tb = attrs["transpose_a"], attrs["transpose_b"]
        # 1-D operands: [K] is a row for A and a column for B; transposes do not apply to them
        a2 = ((1,) + a) if len(a) == 1 else (a[:-2] + (a[-1], a[-2]) if ta else a)
        b2 = (b + (1,)) if len(b) == 1 else (b[:-2] + (b[-1], b[-2]) if tb else b)
        ta, tb = ta and len(a) > 1, tb and len(b) > 1
        m, k = a2[-2:]
        k2, n = b2[-2:]
        if k != k2:
            raise self.fail(attrs, f"inner dimensions differ: A {list(a)} gives K={k}, B "
                                   f"{list(b)} gives K={k2} (transpose_a={attrs['transpose_a']},"
                                   f" transpose_b={attrs['transpose_b']})")
        layout = GemmLayout(self, attrs, views)
        b_layout = layout.operand("B", vb, b, tb, n, k)
        rank = max(len(a2), len(b2))
        abatch = (1,) * (rank - len(a2)) + a2[:-2]
        bbatch = (1,) * (rank - len(b2)) + b2[:-2]
        if GemmLayout.rows_folded(a, b, attrs["transpose_a"]):
            # one B for every batch of A, whose rows lie one after another: the batches are
            # more rows of one GEMM (a transformer's [B, S, K] x [K, N]: M = B*S, tiles that
            # fit and no batch of M == 1 running a matrix-vector kernel per row)
            rows = m
            for d in abatch:
                rows *= d
            a_rows = layout.rows("A", va, rows, k)
            if a_rows is not None:
                out = abatch + (m,) + ((n,) if len(b) > 1 else ())
                return dict(M=rows, N=n, K=k, OB1=1, A_STEP=step, A_PICK=pick, **a_rows,
                            **b_layout, **layout.output_rows(rows, n)), 1, layout.final(out)
        batch = []
        for da, db in zip(abatch, bbatch):
            if da != db and 1 not in (da, db):
                raise self.fail(attrs, f"batch dims of {list(a)} and {list(b)} do not broadcast")
            batch.append(max(da, db))
        if len(batch) > 2:
            raise self.fail(attrs, f"at most 2 batch dims are supported, found {batch}")
        out = tuple(batch) + ((m,) if len(a) > 1 else ()) + ((n,) if len(b) > 1 else ())
        ob = (1,) * (2 - len(batch)) + tuple(batch)
        return dict(M=m, N=n, K=k, OB1=ob[1], A_STEP=step, A_PICK=pick,
                    **layout.operand("A", va, a, ta, m, k), **b_layout,
                    **layout.output(tuple(batch), m, n)), ob[0] * ob[1], layout.final(out)

    def infer_shapes(self, attrs, inputs, consts, ctx=DEFAULT_CONTEXT):
        return [(self._plan(attrs, inputs, ctx)[2], "f32")]

    def outputs(self, call: LayerCall) -> list[TensorDesc]:
        # the shape depends on a fact (PickLast), which the call's context holds
        return [TensorDesc(shape, dtype) for shape, dtype in
                self.infer_shapes(call.attrs, call.inputs, call.consts, call.context)]

    def plan(self, attrs, inputs, outputs, ctx=DEFAULT_CONTEXT, consts=None) -> MatMulPlan:
        """What every variant of this call reads."""
        consts = consts or {}
        sizes, batches, out = self._plan(attrs, inputs, ctx)
        ep = ctx.epilogue or FusedEpilogue()
        # the epilogue's channels: the output's axis 1 (rank 2: a Gemm's), its last axis from
        # rank 3 on (a transformer's Linear: epilogue_channels_last)
        channels = out[-1] if len(out) >= 3 else out[1] if len(out) > 1 else 1
        wiring = wire_epilogue(self, attrs, ctx.epilogue, inputs, outputs[0], channels,
                               broadcast_residual=True)
        # ... as one of the GEMM's indices, in the ranks of the operands as the MatMul reads them
        views = operand_views(self, attrs, inputs, ctx.fact(OperandViews))
        va, vb = views.views if views is not None else (None, None)
        a_rank = len(va.shape if va is not None else inputs[0].shape) - \
            (ctx.fact(PickLast) is not None)
        b_rank = len(vb.shape if vb is not None else inputs[1].shape)
        # CHANNEL's form is text of the program, its numbers (CH_DIV, CH_MOD) arguments
        sizes.update(CH_DIV=1, CH_MOD=1)
        if len(out) >= 3:
            # a 1-D B: the last axis is A's rows, of which m counts every batch's when the
            # batches are folded into M (the row within its batch: m modulo that axis)
            channel = "(n)" if b_rank > 1 else "((m) % CH_MOD)"
            sizes["CH_MOD"] = out[-1]
        elif batches == 1 and a_rank > 2 and sizes["M"] != out[-2 if b_rank > 1 else -1]:
            # A's batches folded into M: axis 1 is a digit of the row index
            inner = 1
            for d in out[2:len(out) - (b_rank > 1)]:
                inner *= d
            channel = "((m) / CH_DIV % CH_MOD)"
            sizes.update(CH_DIV=inner, CH_MOD=out[1])
        else:
            axes = ["(batch) / OB1", "(batch) % OB1"][
                2 - (len(out) - (a_rank > 1) - (b_rank > 1)):] \
                + (["(m)"] if a_rank > 1 else []) + (["(n)"] if b_rank > 1 else [])
            channel = axes[1] if len(axes) > 1 else "0"
        # a residual that broadcasts (an attention's mask): read with its own strides
        folded = batches == 1 and len(out) >= 3 and sizes["M"] != out[-2]
        sizes.update(residual_strides(tuple(inputs[-1].shape), out, folded) if ep.residual
                     else residual_strides(out, out, folded))
        if sizes["RES_BROADCAST"] and (len(out) < 2 or len(out) > 4 or
                                       (views is not None and views.out is not None)):
            raise self.fail(attrs, f"a residual of shape {list(inputs[-1].shape)} cannot be "
                                   f"broadcast onto this MatMul's output {list(out)}")
        bake = not ctx.on_cpu                 # a GPU: the sizes as #defines (_sizes.baked)
        values = dict(sizes, A_STEP_ARG=sizes["A_STEP"], A_PICK_ARG=sizes["A_PICK"])
        size_defines = _sizes.baked(values, _sizes.MATMUL) if bake else {}
        epilogue = defines(TRANSPOSE_A=sizes["TRANSPOSE_A"], TRANSPOSE_B=sizes["TRANSPOSE_B"],
                           A_PICKED=int(ctx.fact(PickLast) is not None),
                           A_SPLIT_ROWS=sizes["A_SPLIT_ROWS"], O_SPLIT_ROWS=sizes["O_SPLIT_ROWS"],
                           RES_BROADCAST=sizes["RES_BROADCAST"],
                           MATMUL_SIZES="" if bake else _sizes.params(_sizes.MATMUL),
                           **size_defines, **wiring.flags,
                           **{"CHANNEL(batch, m, n)": channel}, **GemmLayout.alpha(views),
                           **({} if ctx.on_cpu else GemmLayout.vector_reads(sizes)),
                           **pipeline_defines(ctx.device, ctx.on_cpu))
        if ep.row_softmax and (b_rank < 2 or len(out) < 2 or sizes["N"] > ROW_SOFTMAX_MAX):
            raise self.fail(attrs, f"a {ep.row_softmax} of the last axis cannot be fused "
                                   f"into an output of shape {list(out)}")
        b_const = None
        if ctx.on_cpu and 1 in consts and b_rank == 2 and batches == 1 and vb is None and \
                not sizes["TRANSPOSE_B"] and sizes["A_STEP"] == 1:
            b_const = consts[1]
        return MatMulPlan(sizes, batches, out, wiring.args, epilogue, ep.row_softmax, b_rank,
                          ctx.device, ctx.on_cpu, b_const, bake)

    def kernel_variants(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        listed = matmul_variants(self.plan(attrs, inputs, outputs, ctx, consts))
        return listed if len(listed) > 1 else ()

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        plan = self.plan(attrs, inputs, outputs, ctx, consts)
        variant = ctx.variant if ctx.variant is not None else matmul_variants(plan)[0]
        if not variant.applies(plan):
            raise self.fail(attrs, f"variant {variant.name} does not apply to this MatMul")
        return variant.launches(plan)
