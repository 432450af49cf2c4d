"""Convolution and GroupConvolution (opset1), 1-D, 2-D and 3-D spatial.

Weights are input 1 (OIYX; GroupConvolution GOIYX), uploaded once by the executor like any Const.
Bias is a separate Add in the IR. On a GPU the work runs as a tiled implicit GEMM (conv_gemm.cl
over the shared gemm.cl, planned in _gemm.py), as Winograd F(2x2, 3x3) for 3x3 stride-1 windows
where the tuner finds it faster (conv_winograd.cl, planned in _winograd.py), or as a direct
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
"""
from __future__ import annotations

import re
from typing import Sequence

from ..jit.launch import DEFAULT_CONTEXT, Arg, KernelLaunch
from ..jit.tensor import TensorDesc
from ._cpu_kernels import conv_candidates, conv_cpu_variants, depthwise_candidates
from ._gemm import gemm_choice, gemm_launches, target_groups
from ._variants import gemm_variants
from ._winograd import applies as winograd_applies, is_winograd, winograd_launches, with_winograd
from ._nn import (AUTO_PADS, NamedOp, as_2d, as_3d, require_f32, spatial_rank,
                  window_geometry)
from ._program import defines, kernel_source
from .base import Attr, register_op


# below this many output channels per group, the direct kernel beats a mostly-empty GEMM tile
DIRECT_MAX_OG = 4
# a folded channel shuffle (passes/shuffle_folding.py): its group, the input channel order
INPUT_SHUFFLE = "customlayers.input_shuffle_group"

_CONV_ATTRS = (
    Attr("strides", "ints", required=True),
    Attr("dilations", "ints", required=True),
    Attr("pads_begin", "ints", required=True),
    Attr("pads_end", "ints", required=True),
    Attr("auto_pad", "str", "explicit"),
    Attr(INPUT_SHUFFLE, "int", 1),
)

# work-group shapes the tuner tries for the direct kernel (besides the driver's choice)
_DIRECT_GROUPS = ((16, 4), (32, 4), (8, 8), (64, 1))
# conv_direct_ocb.cl's variants `ocb{OCB}_px{PXB}`: OCB output channels (a multiple of 4: the
# weights are read as float4) at PXB consecutive pixels per work item
_OCB_NAME = re.compile(r"ocb(\d+)_px(\d+)")
# more accumulators than OCB * PXB = 64 would spill registers; past 32 channels per group a GEMM
# tile is mostly full, and only the small block is listed (last: timed by `--tuning full`)
_OCB_MAX, _OCB_SMALL = 32, 8
# work items per group along x: two warps (NVIDIA) or one wavefront (AMD); fewer would copy the
# block's weights into __local memory more often per output
_OCB_GROUP_X = 64
# the block's weights in __local memory: OpenCL's minimum CL_DEVICE_LOCAL_MEM_SIZE, so every
# device that reports itself a GPU has this much
_OCB_MAX_LOCAL_BYTES = 32 << 10
# NDRange dimensions 1 and 2 run one work-group per index: CUDA-based drivers map them to a
# grid's y and z extents, which stop at 65535
_MAX_GRID_YZ = 65535
# conv_direct_split.cl's variants `split{CS}`: each output's channels split among CS work items
_SPLIT_NAME = re.compile(r"split(\d+)")
_SPLITS = (4, 8)
# work items per group along x (one warp): CS of them share an output
_SPLIT_GROUP_X = 32
# the split kernels are listed where one output per work item leaves the device this idle: fewer
# outputs than work items per compute unit times target_groups (two groups per unit)
_SPLIT_ITEMS_PER_GROUP = 256
# output channels one work item of conv_cpu.cl accumulates in registers (measured on PoCL with
# AVX-512: 16 beat 8 and 4 on ResNet-like layers)
_CPU_CHANNEL_BLOCK = 16


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

    def kernel_variants(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        """Candidates for the tuner: GEMM tilings (1x1 windows read the input as a plain
        matrix in all of them) and, for 3x3 stride-1 windows over constant weights, Winograd
        F(2x2, 3x3) (_winograd.py), the direct kernels (one output per work item; output
        channels blocked in registers; an output's channels split among work items, for layers
        that leave the device idle); or, for few output channels per group (depthwise), the
        direct kernel under a few work-group shapes. On a CPU device: the micro-tiles of the
        blocked kernel, or the rows per work item of the depthwise one. 3-D has one variant."""
        g = self._geometry(attrs, inputs)
        device = ctx.device
        if g["RANK"] == 3:
            return ()
        if ctx.on_cpu:
            names = conv_cpu_variants(g, consts.get(1) is not None, device)
            return names if len(names) > 1 else ()
        if g["OG"] <= DIRECT_MAX_OG:
            return ("direct",) + tuple(f"direct_{x}x{y}" for x, y in _DIRECT_GROUPS)
        max_threads = _max_threads(device)
        n, batch = _gemm_n_batch(g)
        gemms = gemm_variants(g["OG"], n, g["CG"] * g["KH"] * g["KW"], batch,
                              target_groups(device), max_threads)
        listed = with_winograd(gemms, g, consts.get(1), target_groups(device), max_threads)
        blocked = _ocb_variants(g, attrs, max_threads)
        split = _split_variants(g, attrs, target_groups(device), max_threads)
        if g["OG"] > _OCB_MAX or not (blocked or split):
            return listed + blocked + split + ("direct",)
        # Few channels: `--tuning fast` times the direct kernel and two of the blocked ones
        # right after the GEMM heuristic's choice (which stays first, what `--tuning off`
        # runs). On an H100, the TCN's 25-channel convolutions (bench/gpu_layers.py, tuning
        # full): at batch 1, where most of the GPU is idle and the longest work item sets the
        # time, one output per item (direct, 12.5 us) beat every blocked kernel (15-16 us);
        # at batch 64 the small block at two pixels and the whole group at one (29-30 us)
        # beat the rest (31-34 us) and the best GEMM (58 us). Where the outputs are too few to
        # fill the device, the channel-split kernels take the blocked ones' places.
        # Winograd, where it applies, keeps its place second.
        head = 2 if len(listed) > 1 and is_winograd(listed[1]) else 1
        first, rest = (split, blocked) if split else (blocked[:2], blocked[2:])
        return listed[:head] + ("direct",) + first + listed[head:] + rest

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        g = self._geometry(attrs, inputs)
        sizes = {k: v for k, v in g.items() if k not in ("NB", "RANK", "OUT")}
        shuffle = attrs[INPUT_SHUFFLE]
        if shuffle > 1:       # only folded where each group reads one channel (direct kernels)
            if g["CG"] != 1 or g["OG"] > DIRECT_MAX_OG or g["RANK"] != 2 or g["C"] % shuffle:
                raise self.fail(attrs, f"a channel shuffle of group {shuffle} cannot be folded "
                                       f"into this convolution")
            sizes["IN_CHANNEL(c)"] = \
                f"(((c) % {shuffle}) * {g['C'] // shuffle} + (c) / {shuffle})"
        shape = f"{g['KH']}x{g['KW']}" if g["RANK"] == 2 else f"{g['KW']}"
        epilogue = ctx.epilogue
        bias, relu, residual = (epilogue.bias, epilogue.relu, epilogue.residual) \
            if epilogue is not None else (False, False, False)
        if bias and inputs[2].count != g["O"]:
            raise self.fail(attrs, f"the fused bias has {inputs[2].count} values for "
                                   f"{g['O']} output channels")
        args = (Arg.input(0), Arg.input(1), Arg.output(0)) + ((Arg.input(2),) if bias else ())
        if residual:         # the other side of a residual Add: the layer's last input
            if tuple(inputs[-1].shape) != tuple(outputs[0].shape):
                raise self.fail(attrs, f"the fused residual has shape {list(inputs[-1].shape)}"
                                       f", the output {list(outputs[0].shape)}")
            args += (Arg.input(len(inputs) - 1),)
        sizes.update(FUSED_BIAS=int(bias), FUSED_RELU=int(relu), FUSED_RESIDUAL=int(residual),
                     FUSED_PRE_RELU=int(residual and epilogue is not None and epilogue.pre_relu))
        if g["RANK"] == 3:
            return [KernelLaunch(
                source=defines(**sizes) + kernel_source("conv3d.cl"),
                entry="conv3d_direct", args=args,
                global_size=(g["OW"], g["OH"], g["NB"] * g["O"] * g["OD"]),
                label=f"conv3d_{g['KD']}x{g['KH']}x{g['KW']}_direct")]
        device = ctx.device
        if ctx.on_cpu:
            names = conv_cpu_variants(g, consts.get(1) is not None, device)
            only = ctx.variant if ctx.variant in names else (names[0] if names else None)
            candidates = conv_candidates(g, sizes, consts.get(1), args, device, only) or \
                depthwise_candidates(g, sizes, args, device, only)
            if candidates:
                return candidates[0]
            ocb = min(_CPU_CHANNEL_BLOCK, g["OG"])
            return [KernelLaunch(
                source=defines(**sizes, OCB=ocb) + kernel_source("conv_cpu.cl"),
                entry="conv_cpu", args=args,
                global_size=(-(-g["OW"] // 8) * 8, g["OH"], g["NB"] * g["G"] * -(-g["OG"] // ocb)),
                label=f"conv{g['RANK']}d_{shape}_cpu")]
        variant = ctx.variant or (self.kernel_variants(attrs, inputs, outputs, consts, ctx)
                                  or ("direct",))[0]
        if variant.startswith("direct"):
            local = None
            glob = (g["OW"], g["OH"], g["NB"] * g["O"])
            if variant != "direct":      # the kernel guards the edge: round up to whole groups
                lx, ly = (int(v) for v in variant[len("direct_"):].split("x"))
                local = (lx, ly, 1)
                glob = (-(-glob[0] // lx) * lx, -(-glob[1] // ly) * ly, glob[2])
            return [KernelLaunch(
                source=defines(**sizes) + kernel_source("conv_direct.cl"),
                entry="conv_direct", args=args, global_size=glob, local_size=local,
                label=f"conv{g['RANK']}d_{shape}_{variant}")]
        split = _SPLIT_NAME.fullmatch(variant)
        if split:
            if variant not in _split_variants(g, attrs, target_groups(device),
                                              _max_threads(device)):
                raise self.fail(attrs, f"variant {variant} does not apply to this convolution")
            cs = int(split.group(1))
            return [KernelLaunch(
                source=defines(**sizes, CS=cs, LX=_SPLIT_GROUP_X)
                + kernel_source("conv_direct_split.cl"),
                entry="conv_direct_split", args=args,
                global_size=(-(-g["OW"] // _SPLIT_GROUP_X) * _SPLIT_GROUP_X, g["OH"] * cs,
                             g["NB"] * g["O"]),
                local_size=(_SPLIT_GROUP_X, cs, 1), label=f"conv{g['RANK']}d_{shape}_{variant}")]
        blocked = _OCB_NAME.fullmatch(variant)
        if blocked:
            if variant not in _ocb_variants(g, attrs, _max_threads(device)):
                raise self.fail(attrs, f"variant {variant} does not apply to this convolution")
            ocb, pxb = (int(v) for v in blocked.groups())
            items_x = -(-g["OW"] // pxb)          # the kernel guards the last group's edge
            return [KernelLaunch(
                source=defines(**sizes, OCB=ocb, PXB=pxb, LX=_OCB_GROUP_X)
                + kernel_source("conv_direct_ocb.cl"),
                entry="conv_direct_ocb", args=args,
                global_size=(-(-items_x // _OCB_GROUP_X) * _OCB_GROUP_X, g["OH"],
                             g["NB"] * g["G"] * -(-g["OG"] // ocb)),
                local_size=(_OCB_GROUP_X, 1, 1), label=f"conv{g['RANK']}d_{shape}_{variant}")]
        if is_winograd(variant):
            if not winograd_applies(g, consts.get(1)):
                raise self.fail(attrs, f"variant {variant} needs a 3x3, stride-1 window and "
                                       f"constant weights")
            return winograd_launches(g, sizes, consts.get(1), args, variant,
                                     target_groups(device), f"conv2d_{shape}")
        m, k = g["OG"], g["CG"] * g["KH"] * g["KW"]
        n, batch = _gemm_n_batch(g)
        one_by_one = int(g["KH"] == g["KW"] == g["SY"] == g["SX"] == 1 and g["PY"] == g["PX"] == 0)
        chosen = gemm_choice(variant, m, n, k, batch, target_groups(device))
        return gemm_launches(defines(**sizes, CONV_1X1=one_by_one, NB=g["NB"])
                             + kernel_source("conv_gemm.cl"), args, chosen, m, n, k,
                             batch, f"conv{g['RANK']}d_{shape}_gemm")


def _gemm_n_batch(g: dict) -> tuple[int, int]:
    """(N, GEMMs) of the implicit GEMM: the images lie side by side along N, one GEMM per group
    (conv_gemm.cl), so that small planes fill whole tiles."""
    return g["NB"] * g["OH"] * g["OW"], g["G"]


def _max_threads(device) -> int:
    return device.max_work_group_size if device is not None else 256


def _split_variants(g: dict[str, int], attrs, target: int, max_threads: int) -> tuple[str, ...]:
    """conv_direct_split.cl's variants for geometry `g` (1-D or 2-D, on a GPU): each output's
    channels split among 4 or 8 work items, where one output per work item would leave most of
    the device idle (fewer outputs than `target` work-groups of _SPLIT_ITEMS_PER_GROUP) and
    each slice still gets two channels or more. None for a folded channel shuffle or where the
    direct kernel is the whole list (OG <= DIRECT_MAX_OG)."""
    outputs = g["NB"] * g["O"] * g["OH"] * g["OW"]
    if attrs[INPUT_SHUFFLE] > 1 or g["OG"] <= DIRECT_MAX_OG or \
            outputs >= target * _SPLIT_ITEMS_PER_GROUP or g["NB"] * g["O"] > _MAX_GRID_YZ:
        return ()
    return tuple(f"split{cs}" for cs in _SPLITS
                 if g["CG"] >= 2 * cs and _SPLIT_GROUP_X * cs <= max_threads)


def _ocb_variants(g: dict[str, int], attrs, max_threads: int) -> tuple[str, ...]:
    """conv_direct_ocb.cl's variants for geometry `g` (1-D or 2-D, on a GPU): channel blocks of
    the group's channels rounded up to a multiple of 4 (up to _OCB_MAX) and of _OCB_SMALL, each
    at 1 and 2 pixels per work item. First the smallest block at the most pixels, then the
    largest at one (kernel_variants says why), then the rest, largest block first. None for a
    folded channel shuffle (the kernel reads the channels in order), where the direct kernel is
    listed instead (OG <= DIRECT_MAX_OG), or where a block's weights would not fit in __local
    memory."""
    whole = -(-g["OG"] // 4) * 4
    if attrs[INPUT_SHUFFLE] > 1 or g["OG"] <= DIRECT_MAX_OG or max_threads < _OCB_GROUP_X:
        return ()
    window = g["CG"] * g["KH"] * g["KW"]
    blocks = [b for b in {whole, _OCB_SMALL} if b <= min(whole, _OCB_MAX)
              and window * b * 4 <= _OCB_MAX_LOCAL_BYTES
              and max(g["NB"] * g["G"] * -(-g["OG"] // b), g["OH"]) <= _MAX_GRID_YZ]
    pairs = [(ocb, pxb) for ocb in blocks for pxb in (1, 2) if pxb <= g["OW"]]
    if not pairs:
        return ()
    small, whole_block = min(p[0] for p in pairs), max(p[0] for p in pairs)
    ordered = dict.fromkeys([(small, max(p[1] for p in pairs if p[0] == small)),
                             (whole_block, 1)] + sorted(pairs, reverse=True))
    return tuple(f"ocb{ocb}_px{pxb}" for ocb, pxb in ordered)


@register_op
class Convolution(_ConvBase):
    type = "Convolution"


@register_op
class GroupConvolution(_ConvBase):
    type = "GroupConvolution"
    grouped = True
