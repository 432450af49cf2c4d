"""Convolution and GroupConvolution (opset1), 1-D and 2-D spatial.

Weights are input 1 (OIYX; GroupConvolution GOIYX), uploaded once by the executor like any Const.
Bias is a separate Add in the IR. The work runs as a tiled implicit GEMM (conv_gemm.cl over the
shared gemm.cl), or as a direct kernel (conv_direct.cl) when each group has so few output
channels that a GEMM tile would be mostly empty (depthwise).

Also home of the window arithmetic shared with pooling (output size, auto_pad) and the small
helpers the other op modules of this family use (layer name, #define block, tile choice).
"""
from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import BindingError
from ..jit.tensor import TensorDesc
from ..runtime.launch import Arg, KernelLaunch
from .base import Attr, Op, register_op

AUTO_PADS = ("explicit", "notset", "valid", "same_upper", "same_lower")
ROUNDING_TYPES = ("floor", "ceil", "ceil_torch")


# -- helpers shared by the op modules of this family ----------------------------------------
@lru_cache(maxsize=None)
def cl_source(name: str) -> str:
    """The text of customlayers/ops/<name>.cl (package data)."""
    return resources.files(__package__).joinpath(f"{name}.cl").read_text(encoding="utf-8")


def layer_of(attrs: Mapping[str, Any]) -> str:
    """The layer name recorded by NamedOp.parse_attributes, for messages."""
    return str(attrs.get("_layer", "?"))


def defines(**values: int | float | str) -> str:
    """A block of `#define NAME VALUE` lines; floats keep full precision."""
    lines = []
    for name, value in values.items():
        if isinstance(value, bool):
            value = int(value)
        if isinstance(value, float):
            value = f"{value!r}f" if np.isfinite(value) else ("INFINITY" if value > 0 else "-INFINITY")
        if isinstance(value, (int, str)) and str(value).startswith("-"):
            value = f"({value})"  # so that `-NAME` and `x-NAME` stay what they say
        lines.append(f"#define {name} {value}")
    return "\n".join(lines) + "\n"


def require_f32(op: Op, attrs, descs: Sequence[TensorDesc]) -> None:
    for i, d in enumerate(descs):
        if d.dtype != "f32":
            raise BindingError(f"layer '{layer_of(attrs)}' ({op.type}): input {i} is {d.dtype}; "
                               f"this built-in runs f32 only")


class NamedOp(Op):
    """An Op that remembers its layer's name in attrs['_layer'] and checks its attributes when
    the model is loaded (`check`), so every later message can name the layer."""

    def parse_attributes(self, raw, layer):
        attrs = super().parse_attributes(raw, layer)
        attrs["_layer"] = layer
        self.check(attrs)
        return attrs

    def check(self, attrs: dict[str, Any]) -> None:
        """Raise BindingError for unsupported attribute values."""

    def fail(self, attrs, message: str) -> BindingError:
        return BindingError(f"layer '{layer_of(attrs)}' ({self.type}): {message}")

    def check_choice(self, attrs, name: str, allowed: Sequence[str]) -> None:
        value = attrs.get(name)
        if value is not None and value.lower() not in allowed:
            raise self.fail(attrs, f"attribute '{name}'='{value}' is not one of "
                                   f"{', '.join(allowed)}")


def gemm_tiles(m: int, n: int) -> dict[str, int]:
    """Tile geometry for gemm.cl: 16x16 work items, each up to 4x4 outputs; thinner tiles for
    thin GEMMs so that few work items compute padding."""
    tm = 16 if m <= 16 else 32 if m <= 32 else 64
    tn = 16 if n <= 16 else 32 if n <= 32 else 64
    return {"TM": tm, "TN": tn, "TK": 16, "RM": tm // 16, "RN": tn // 16}


def gemm_sizes(tiles: Mapping[str, int], m: int, n: int, batch: int):
    """(global, local) NDRange for gemm_tiled: whole work-groups; the kernel guards the edge."""
    lx, ly = tiles["TN"] // tiles["RN"], tiles["TM"] // tiles["RM"]
    groups_n = -(-n // tiles["TN"])
    groups_m = -(-m // tiles["TM"])
    return (groups_n * lx, groups_m * ly, batch * tiles.get("KSPLIT", 1)), (lx, ly, 1)


# A GEMM with fewer tiles than this leaves a large GPU idle (an H100 has 132 compute units, and
# each wants two or more work-groups); split-K then cuts the K loop among more work-groups.
TARGET_GROUPS = 256
# ... but never into slices shorter than this many K steps, where the extra pass costs more
MIN_K_PER_SLICE = 128


def gemm_split(tiles: Mapping[str, int], m: int, n: int, k: int, batch: int) -> dict[str, int]:
    """The split-K factor for gemm.cl: {"KSPLIT": s, "KCHUNK": c, "BATCHES": batch} (s = 1:
    no split). Chunks are whole TK steps, and every slice gets at least one."""
    groups = -(-m // tiles["TM"]) * -(-n // tiles["TN"]) * batch
    ksplit = 1
    if groups < TARGET_GROUPS:
        ksplit = max(1, min(-(-TARGET_GROUPS // groups), k // MIN_K_PER_SLICE))
    tk = tiles["TK"]
    chunk = -(-(-(-k // ksplit)) // tk) * tk
    ksplit = -(-k // chunk)
    return {"KSPLIT": ksplit, "KCHUNK": chunk, "BATCHES": batch}


def gemm_launches(source: str, args: tuple, tiles: Mapping[str, int], m: int, n: int, k: int,
                  batch: int, label: str) -> list[KernelLaunch]:
    """gemm_tiled over (m, n, batch), split along K where the output alone cannot fill a GPU.
    `source` holds the front end's defines and macros (without the tile and split defines)."""
    split = gemm_split(tiles, m, n, k, batch)
    plan = dict(tiles, **split)
    global_size, local_size = gemm_sizes(plan, m, n, batch)
    if split["KSPLIT"] == 1:
        return [KernelLaunch(source=defines(**tiles) + source + cl_source("gemm"),
                             entry="gemm_tiled", args=args, global_size=global_size,
                             local_size=local_size, label=label)]
    src = defines(**plan) + source + cl_source("gemm")
    partial = Arg.scratch(0, split["KSPLIT"] * batch * m * n * 4)
    total = batch * m * n
    return [KernelLaunch(source=src, entry="gemm_tiled", args=args + (partial,),
                         global_size=global_size, local_size=local_size,
                         label=f"{label}_k{split['KSPLIT']}"),
            KernelLaunch(source=src, entry="gemm_splitk_reduce", args=args + (partial,),
                         global_size=(-(-total // 64) * 64,), local_size=None,
                         label=f"{label}_reduce")]


# -- window arithmetic (Convolution, pooling) -------------------------------------------------
def window_geometry(op: NamedOp, attrs, spatial_in: Sequence[int], kernel: Sequence[int],
                    strides: Sequence[int], dilations: Sequence[int],
                    rounding: str = "floor") -> tuple[list[int], list[int], list[int]]:
    """(output sizes, pads_begin, pads_end) per spatial axis, following auto_pad."""
    n = len(spatial_in)
    for name, values in (("strides", strides), ("dilations", dilations),
                         ("kernel", kernel)):
        if len(values) != n:
            raise op.fail(attrs, f"attribute '{name}' has {len(values)} values, the input has "
                                 f"{n} spatial axes")
        if any(v < 1 for v in values):
            raise op.fail(attrs, f"attribute '{name}' must be positive, found {list(values)}")
    auto_pad = (attrs.get("auto_pad") or "explicit").lower()
    pads_b = list(attrs.get("pads_begin") or (0,) * n)
    pads_e = list(attrs.get("pads_end") or (0,) * n)
    if auto_pad in ("explicit", "notset"):
        for name, values in (("pads_begin", pads_b), ("pads_end", pads_e)):
            if len(values) != n:
                raise op.fail(attrs, f"attribute '{name}' has {len(values)} values, the input "
                                     f"has {n} spatial axes")
            if any(v < 0 for v in values):
                raise op.fail(attrs, f"attribute '{name}' must not be negative, found {values}")
    out, begin, end = [], [], []
    for i in range(n):
        size, s = spatial_in[i], strides[i]
        k_eff = (kernel[i] - 1) * dilations[i] + 1
        if auto_pad == "valid":
            pb = pe = 0
            o = (size - k_eff) // s + 1
        elif auto_pad in ("same_upper", "same_lower"):
            o = -(-size // s)
            total = max(0, (o - 1) * s + k_eff - size)
            pb = total // 2 if auto_pad == "same_upper" else total - total // 2
            pe = total - pb
        else:
            pb, pe = pads_b[i], pads_e[i]
            span = size + pb + pe - k_eff
            if span < 0:
                o = 0
            elif rounding == "floor":
                o = span // s + 1
            else:
                o = -(-span // s) + 1
                # ceil_torch (opset14): no window may start in the end padding
                if rounding == "ceil_torch" and (o - 1) * s >= size + pb:
                    o -= 1
        if o < 1:
            raise op.fail(attrs, f"the window ({k_eff} with dilation) does not fit spatial "
                                 f"axis {i} of size {size} with pads {pb}+{pe}")
        out.append(o)
        begin.append(pb)
        end.append(pe)
    return out, begin, end


def spatial_rank(op: NamedOp, attrs, desc: TensorDesc, what: str = "input 0") -> int:
    """1 or 2 spatial axes: the input is [N, C, W] or [N, C, H, W]."""
    if len(desc.shape) not in (3, 4):
        raise op.fail(attrs, f"{what} has shape {list(desc.shape)}; expected rank 3 (N,C,W) "
                             f"or 4 (N,C,H,W)")
    return len(desc.shape) - 2


def as_2d(values: Sequence[int], fill: int) -> tuple[int, int]:
    """A 1-D spatial attribute as (y, x) with y the trivial axis."""
    values = tuple(values)
    return values if len(values) == 2 else (fill,) + values  # type: ignore[return-value]


# -- the ops ----------------------------------------------------------------------------------
_CONV_ATTRS = (
    Attr("strides", "ints", required=True),
    Attr("dilations", "ints", required=True),
    Attr("pads_begin", "ints", required=True),
    Attr("pads_end", "ints", required=True),
    Attr("auto_pad", "str", "explicit"),
)

# below this many output channels per group, the direct kernel beats a mostly-empty GEMM tile
_DIRECT_MAX_OG = 4


class _ConvBase(NamedOp):
    attributes = _CONV_ATTRS
    grouped = False
    # runtime/fusion.py may fold a following per-channel bias Add and ReLU into the store: it
    # sets attrs "_bias" (the bias is then input 2) and "_relu"
    fusable_epilogue = True

    def check(self, attrs):
        self.check_choice(attrs, "auto_pad", AUTO_PADS)

    def _geometry(self, attrs, inputs: Sequence[TensorDesc]) -> dict[str, int]:
        require_f32(self, attrs, inputs[:2])
        rank = spatial_rank(self, attrs, inputs[0])
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

    def launches(self, attrs, inputs, outputs, consts):
        g = self._geometry(attrs, inputs)
        sizes = {k: v for k, v in g.items() if k not in ("NB", "RANK", "OUT")}
        shape = f"{g['KH']}x{g['KW']}" if g["RANK"] == 2 else f"{g['KW']}"
        bias, relu = bool(attrs.get("_bias")), bool(attrs.get("_relu"))
        if bias and inputs[2].count != g["O"]:
            raise self.fail(attrs, f"the fused bias has {inputs[2].count} values for "
                                   f"{g['O']} output channels")
        args = (Arg.input(0), Arg.input(1), Arg.output(0)) + ((Arg.input(2),) if bias else ())
        sizes.update(FUSED_BIAS=int(bias), FUSED_RELU=int(relu))
        epilogue = cl_source("conv_epilogue")
        if g["OG"] <= _DIRECT_MAX_OG:
            return [KernelLaunch(
                source=defines(**sizes) + epilogue + cl_source("conv_direct"), entry="conv_direct",
                args=args, global_size=(g["OW"], g["OH"], g["NB"] * g["O"]),
                label=f"conv{g['RANK']}d_{shape}_direct")]
        m, n, k = g["OG"], g["OH"] * g["OW"], g["CG"] * g["KH"] * g["KW"]
        tiles = gemm_tiles(m, n)
        return gemm_launches(defines(**sizes) + epilogue + cl_source("conv_gemm"), args, tiles,
                             m, n, k, g["NB"] * g["G"],
                             f"conv{g['RANK']}d_{shape}_gemm{tiles['TM']}x{tiles['TN']}")


@register_op
class Convolution(_ConvBase):
    type = "Convolution"


@register_op
class GroupConvolution(_ConvBase):
    type = "GroupConvolution"
    grouped = True
