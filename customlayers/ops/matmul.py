"""MatMul (opset1): transpose_a, transpose_b, numpy broadcasting of batch dims, 1-D operands.

A fused epilogue (bias, residual, ReLU; conv_epilogue.cl) is applied where it stores.
Runs on the tiled GEMM core (gemm.cl via matmul.cl), or, for a single row (M == 1: the fully
connected layers of classification models), on a matrix-vector kernel that reads B once with
all of the device's lanes (matmul_gemv.cl). A SoftMax or LogSoftmax of the last axis that
followed (a classifier's head: passes/fusion.py) runs in the same kernel, one work-group per
row (matmul_softmax.cl). A folded last-step Gather (passes/pick_folding.py) makes A one element
of every run along input 0's last axis (PICK).
"""
from __future__ import annotations

from .base import Attr, register_op
from ._gemm import gemm_choice, gemm_launches, target_groups
from ._variants import gemm_variants
from ._nn import NamedOp, require_f32
from ._program import defines, kernel_source
from ..jit.launch import Arg, DEFAULT_CONTEXT, FusedEpilogue, KernelLaunch

_GEMV_WG = 64  # work items per output row in the transposed-B matrix-vector kernel
# a folded Gather (passes/pick_folding.py): input 0 has one more trailing axis, and A is its
# element PICK along it, the Gather's index as written (negative: from the end, counted in the
# length input 0 really has); "" (no fold): A is input 0 as it is
PICK = "customlayers.a_pick_last"
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


@register_op
class MatMul(NamedOp):
    input_count = (2, 2)
    type = "MatMul"
    attributes = (Attr("transpose_a", "bool", False), Attr("transpose_b", "bool", False),
                  Attr(PICK, "str", ""))
    # passes/fusion.py may fold a following bias Add (along the output's axis 1: a Gemm's
    # bias), a residual Add and a ReLU into the store (ONNX Gemm + Relu: one kernel)
    accepts_epilogue = True
    # ... and a SoftMax/LogSoftmax of the last axis after it (Linear + bias + LogSoftmax)
    accepts_row_softmax = True

    def _plan(self, attrs, inputs):
        """The GEMM view: sizes, batch shape, per-input batch strides, output shape."""
        require_f32(self, attrs, inputs)
        a, b = tuple(inputs[0].shape), tuple(inputs[1].shape)
        pick, step = 0, 1
        if attrs[PICK] != "":
            try:
                pick = int(attrs[PICK])
            except ValueError:
                raise self.fail(attrs, f"{PICK}={attrs[PICK]!r} is not an index") from None
            if len(a) < 3 or attrs["transpose_a"] or not -a[-1] <= pick < a[-1]:
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
        rank = max(len(a2), len(b2))
        abatch = (1,) * (rank - len(a2)) + a2[:-2]
        bbatch = (1,) * (rank - len(b2)) + b2[:-2]
        batch = []
        for da, db in zip(abatch, bbatch):
            if da != db and 1 not in (da, db):
                raise self.fail(attrs, f"batch dims of {list(a)} and {list(b)} do not broadcast")
            batch.append(max(da, db))
        if len(batch) > 2:
            raise self.fail(attrs, f"at most 2 batch dims are supported, found {batch}")
        out = tuple(batch) + ((m,) if len(a) > 1 else ()) + ((n,) if len(b) > 1 else ())
        pad = (1,) * (2 - len(batch))
        ob, ab, bb = pad + tuple(batch), pad + abatch, pad + bbatch
        # batch strides in elements; 0 where the input is broadcast along that dim
        a_bs = (ab[1] * m * k if ab[0] > 1 else 0, m * k if ab[1] > 1 else 0)
        b_bs = (bb[1] * k * n if bb[0] > 1 else 0, k * n if bb[1] > 1 else 0)
        return dict(M=m, N=n, K=k, TRANSPOSE_A=int(ta), TRANSPOSE_B=int(tb), OB1=ob[1],
                    A_BS0=a_bs[0], A_BS1=a_bs[1], B_BS0=b_bs[0], B_BS1=b_bs[1],
                    A_STEP=step, A_PICK=pick), \
            ob[0] * ob[1], out

    def infer_shapes(self, attrs, inputs, consts):
        return [(self._plan(attrs, inputs)[2], "f32")]

    def kernel_variants(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        sizes, batches, _ = self._plan(attrs, inputs)
        if sizes["M"] == 1 or (ctx.epilogue is not None and ctx.epilogue.row_softmax):
            return ()         # the matrix-vector kernel, or matmul_softmax.cl: one variant
        device = ctx.device
        return gemm_variants(sizes["M"], sizes["N"], sizes["K"], batches, target_groups(device),
                             device.max_work_group_size if device is not None else 256)

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        sizes, batches, out = self._plan(attrs, inputs)
        m, n = sizes["M"], sizes["N"]
        args = (Arg.input(0), Arg.input(1), Arg.output(0))
        ep = ctx.epilogue or FusedEpilogue()
        if ep.bias:
            if inputs[2].count != out[1]:
                raise self.fail(attrs, f"the fused bias has {inputs[2].count} values for "
                                       f"{out[1]} output channels")
            args += (Arg.input(2),)
        if ep.residual:
            args += (Arg.input(len(inputs) - 1),)
        # the epilogue's channel is the output's axis 1: which of the GEMM's indices that is
        a_rank = len(inputs[0].shape) - (attrs[PICK] != "")
        b_rank = len(inputs[1].shape)
        axes = ["(batch) / OB1", "(batch) % OB1"][2 - (len(out) - (a_rank > 1) - (b_rank > 1)):] \
            + (["(m)"] if a_rank > 1 else []) + (["(n)"] if b_rank > 1 else [])
        # the epilogue's switches; its macros come with the kernel file (conv_epilogue.cl)
        epilogue_defines = defines(FUSED_BIAS=int(ep.bias), FUSED_RELU=int(ep.relu),
                                   FUSED_RESIDUAL=int(ep.residual),
                                   FUSED_PRE_RELU=int(ep.residual and ep.pre_relu),
                                   **{"CHANNEL(batch, m, n)": axes[1] if len(axes) > 1 else "0"})
        label = f"matmul_{m}x{sizes['K']}x{n}"
        if ep.row_softmax:
            if b_rank < 2 or len(out) < 2 or n > ROW_SOFTMAX_MAX:
                raise self.fail(attrs, f"a {ep.row_softmax} of the last axis cannot be fused "
                                       f"into an output of shape {list(out)}")
            wg = _SOFTMAX_WG_CPU if ctx.on_cpu else _SOFTMAX_WG_GPU
            src = (defines(**sizes, WG=wg, LOG_SOFTMAX=int(ep.row_softmax == "logsoftmax"))
                   + epilogue_defines + kernel_source("matmul_softmax.cl"))
            return [KernelLaunch(source=src, entry="matmul_softmax", args=args,
                                 global_size=(batches * m * wg,), local_size=(wg,),
                                 label=f"{label}_{ep.row_softmax}")]
        if m == 1 and ctx.on_cpu:
            src = defines(**sizes) + epilogue_defines + kernel_source("matmul_gemv_cpu.cl")
            return [KernelLaunch(source=src, entry="matmul_gemv_cpu", args=args,
                                 global_size=(-(-n // 8), batches), local_size=(1, 1),
                                 label=label + "_gemv_cpu")]
        if m == 1:
            src = (defines(**sizes, WG=_GEMV_WG) + epilogue_defines
                   + kernel_source("matmul_gemv.cl"))
            width = n * _GEMV_WG if sizes["TRANSPOSE_B"] else -(-n // _GEMV_WG) * _GEMV_WG
            return [KernelLaunch(source=src, entry="matmul_gemv", args=args,
                                 global_size=(width, batches), local_size=(_GEMV_WG, 1),
                                 label=label + "_gemv")]
        k = sizes["K"]
        chosen = gemm_choice(ctx.variant, m, n, k, batches, target_groups(ctx.device))
        return gemm_launches(defines(**sizes) + epilogue_defines
                             + kernel_source("matmul_gemm.cl"), args, chosen,
                             m, n, k, batches, label + "_gemm")
