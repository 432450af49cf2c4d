"""Transpose (opset1): output axis k is input axis order[k]; `order` is the constant input 1
(empty: reverse the axes).

Two kernels, chosen per device (the tuner may time both: TransposeVariant):
- `map`: a linear view of the input on unary_map.cl, one output per item (16 per item on a CPU,
  items_per_work_item). The CPU default: PoCL runs work-groups with barriers badly, and its
  loops of 16 elements vectorize; also the path of an empty tensor.
- `runs` / `tiled` (transpose.cl), the GPU default: the permutation coalesced first (axes
  contiguous in both tensors merged, size-1 axes dropped; _program.coalesce), then
  - `runs` where the output's innermost axis is the input's unit-stride axis too (only outer
    axes move: BERT's (1,0,2) of [S, B*H, 64], (0,2,1,3) of [B,H,S,64]): rows copied as
    they are, 4 elements a step where the row length allows;
  - `tiled` where the innermost axis moves (ViT's (0,2,1) of [B,768,197]): 32x32 tiles
    through local memory, reads coalesced in the input and writes in the output.
  The map kernel's per-element index divisions and gathered reads ran at ~380 GB/s on an H100
  (96 transposes of ViT-B/16 and BERT-base: 3.2-4.9 ms). Both move elements as unsigned
  integers of their size: any dtype, half included, bit for bit.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import BindingError
from ...jit.launch import DEFAULT_CONTEXT, Arg, KernelLaunch
from ...jit.tensor import TensorDesc
from ...jit.variant import KernelVariant
from .._program import (coalesce, dense_strides, items_per_work_item, LinearView, numel,
                        program_text, shape_of, uint_arg, unary_map_launch)
from ..base import Op, register_op

GROUP = 256                  # transpose.cl's work-group (reqd_work_group_size)
TILE = 32
# transpose_runs: at most 64 lanes a row (a warp's 32 lanes read 512 contiguous bytes as
# float4), at most 4 steps each before a row is cut into pieces
LANES = 64
CHUNK_STEPS = 4
# elements a transpose_runs item moves at once: the most whose bytes stay within 16 (a float4,
# a ulong2: a GPU's widest access) and whose count divides the row
VECTOR_WIDTHS = (16, 8, 4, 2, 1)
_ELEM = {1: "uchar", 2: "ushort", 4: "uint", 8: "ulong"}


def transpose_order(consts, rank: int) -> tuple[int, ...]:
    if 1 not in consts:
        raise BindingError("Transpose: the order (input 1) must be a constant")
    order = tuple(int(v) for v in np.asarray(consts[1]).reshape(-1))
    if not order:
        return tuple(range(rank - 1, -1, -1))
    if sorted(order) != list(range(rank)):
        raise BindingError(f"Transpose: order {list(order)} is not a permutation of the "
                           f"{rank} axes 0..{rank - 1}")
    return order


@dataclass(frozen=True)
class TransposePlan:
    """One Transpose call: its tensors, the input read as a view of the output's shape, and
    that view coalesced (dims, the output's dense strides, the input's strides)."""
    src: TensorDesc
    dst: TensorDesc
    view: LinearView
    dims: tuple[int, ...]
    out_strides: tuple[int, ...]
    in_strides: tuple[int, ...]
    per_item: int            # the map kernel's outputs per item
    group_fits: bool         # the device takes work-groups of GROUP items

    @staticmethod
    def of(src: TensorDesc, dst: TensorDesc, order, ctx) -> "TransposePlan":
        view = LinearView.dense(shape_of(src)).transpose(order)
        dims, out_strides, in_strides = coalesce(view.shape, dense_strides(view.shape),
                                                 view.strides)
        fits = ctx.device is None or ctx.device.max_work_group_size >= GROUP
        return TransposePlan(src, dst, view, dims, out_strides, in_strides,
                             items_per_work_item(ctx), fits)

    @property
    def copy_kernel(self) -> str | None:
        """transpose.cl's kernel for this call ("runs", "tiled"), or None where only the map
        kernel applies (an empty tensor, an element size without an unsigned type, a device
        whose groups are smaller than GROUP, more elements than 32-bit indices reach)."""
        count = numel(self.dims)
        if count == 0 or self.src.itemsize not in _ELEM or not self.group_fits or \
                count >= 2 ** 31:
            return None
        return "runs" if not self.dims or self.in_strides[-1] == 1 else "tiled"

    @property
    def tiles_mostly_idle(self) -> bool:
        """The tiled kernel would fill under a quarter of each 32x32 tile (an axis of fewer
        than 8 elements: NCHW -> NHWC of 3 channels), its items mostly idle: the map kernel
        comes first (the tuner may still time both)."""
        if self.copy_kernel != "tiled":
            return False
        nx, np_ = self.dims[-1], self.dims[self.in_strides.index(1)]
        return min(nx, TILE) * min(np_, TILE) * 4 < TILE * TILE


def _program(plan: TransposePlan, vec: int) -> str:
    elem = _ELEM[plan.src.itemsize]
    vector = {"VEC_T": f"{elem}{vec}"} if vec > 1 else {}
    return program_text("transpose", {"ELEM": elem, "VEC": vec, **vector}, "transpose.cl",
                        half_arithmetic=False)


def runs_launch(plan: TransposePlan, label: str) -> KernelLaunch:
    """transpose_runs: rows of `run` elements, a table of their input starts (view_index.cl's
    view_row); see transpose.cl for the groups' shape."""
    dims, in_strides = plan.dims or (1,), plan.in_strides or (1,)
    run, rows = dims[-1], numel(dims[:-1])
    vec = next(v for v in VECTOR_WIDTHS if run % v == 0 and v * plan.src.itemsize <= 16)
    steps = -(-run // vec)
    # lanes a row: enough for a short row (no idle lanes), at most LANES; a row longer than
    # CHUNK_STEPS steps of them is cut into `chunks` pieces, each its own groups (an
    # identity's one row is spread over the device)
    lanes_log2 = min(max(steps - 1, 0).bit_length(), LANES.bit_length() - 1)
    chunk = (1 << lanes_log2) * vec * CHUNK_STEPS
    chunks = -(-run // chunk)
    chunk = chunk if chunks > 1 else run
    row_groups = -(-rows // (GROUP >> lanes_log2))
    table = np.array([len(dims) - 1, 0, 1, *dims[:-1], *in_strides[:-1]], np.int32)
    args = (Arg.input(0), Arg.output(0), uint_arg(run), uint_arg(rows),
            uint_arg(lanes_log2), uint_arg(chunks), uint_arg(chunk), Arg.const(table))
    return KernelLaunch(source=_program(plan, vec), entry="transpose_runs", args=args,
                        global_size=(row_groups * chunks * GROUP,), local_size=(GROUP,),
                        label=f"{label}_runs")


def tiled_launch(plan: TransposePlan, label: str) -> KernelLaunch:
    """transpose_tiled: axis x (the output's innermost) against axis p (the input's unit
    stride), the other axes a batch; one group per 32x32 tile of each batch element."""
    dims, out_st, in_st = plan.dims, plan.out_strides, plan.in_strides
    p = in_st.index(1)
    x = len(dims) - 1
    nx, np_ = dims[x], dims[p]
    rest = [k for k in range(len(dims)) if k not in (x, p)]
    table = np.array([len(rest), *(dims[k] for k in rest), *(in_st[k] for k in rest),
                      *(out_st[k] for k in rest)], np.int32)
    tiles_x, tiles_p = -(-nx // TILE), -(-np_ // TILE)
    groups = tiles_x * tiles_p * numel([dims[k] for k in rest])
    args = (Arg.input(0), Arg.output(0), uint_arg(nx), uint_arg(np_), uint_arg(in_st[x]),
            uint_arg(out_st[p]), uint_arg(tiles_x), uint_arg(tiles_p), Arg.const(table))
    return KernelLaunch(source=_program(plan, 1), entry="transpose_tiled", args=args,
                        global_size=(groups * GROUP,), local_size=(GROUP,),
                        label=f"{label}_tiled")


@dataclass(frozen=True)
class TransposeVariant(KernelVariant):
    """How a Transpose runs: "map" (unary_map.cl), "runs" or "tiled" (transpose.cl); the
    module docstring says where each is the default."""
    kernel: str

    @property
    def name(self) -> str:
        return self.kernel

    def applies(self, plan: TransposePlan) -> bool:
        return self.kernel == "map" or self.kernel == plan.copy_kernel

    def launches(self, plan: TransposePlan) -> list[KernelLaunch]:
        if self.kernel == "runs":
            return [runs_launch(plan, "transpose")]
        if self.kernel == "tiled":
            return [tiled_launch(plan, "transpose")]
        return [unary_map_launch("transpose", plan.src, plan.dst, src_view=plan.view,
                                 per_item=plan.per_item)]


def transpose_variants(plan: TransposePlan, on_cpu: bool) -> tuple[TransposeVariant, ...]:
    """The variants that apply, the device's default first (the module docstring)."""
    if plan.copy_kernel is None:
        return (TransposeVariant("map"),)
    copy = TransposeVariant(plan.copy_kernel)
    return (TransposeVariant("map"), copy) if on_cpu or plan.tiles_mostly_idle else \
        (copy, TransposeVariant("map"))


@register_op
class Transpose(Op):
    input_count = (2, 2)
    type = "Transpose"
    reads_half = True        # map: half read and written as float (_half_io.py); copies: bits
    const_inputs = (1,)

    def infer_shapes(self, attrs, inputs, consts):
        shape = shape_of(inputs[0])
        order = transpose_order(consts, len(shape))
        return [(tuple(shape[a] for a in order), inputs[0].dtype)]

    def _variants(self, inputs, outputs, consts, ctx):
        plan = TransposePlan.of(inputs[0], outputs[0],
                                transpose_order(consts, len(inputs[0].shape)), ctx)
        return plan, transpose_variants(plan, ctx.on_cpu)

    def kernel_variants(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        listed = self._variants(inputs, outputs, consts, ctx)[1]
        return listed if len(listed) > 1 else ()

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT) -> list[KernelLaunch]:
        plan, listed = self._variants(inputs, outputs, consts, ctx)
        variant = ctx.variant if ctx.variant in listed else listed[0]
        return variant.launches(plan)
