"""MaxPool (opset1 and opset8, one registration) and AvgPool (opset1, with dilations as ONNX's
AveragePool-19 has them), 1-D, 2-D and 3-D spatial.

MaxPool-8 (recognised by its index_element_type attribute) also produces output 1, the index
of each maximum, flattened from dim `axis` on. AvgPool with exclude-pad="false" divides by the
window's cells inside the padded input (ONNX Runtime and PyTorch: a ceil_torch window that runs
past pads_end counts only up to it); with rounding_type=ceil, by the whole window, as OpenVINO's
CPU plugin does (it also counts the cells that ceil adds past pads_end); with no explicit
padding at all, it divides by the cells inside the input (the CPU plugin's behaviour too,
checked in the tests).
On a CPU device (CompileContext.device) the pooling runs pool_cpu.cl at a number of output rows
per work item the tuner may choose (PoolRowsVariant); elsewhere pooling.cl.

The window's geometry (sizes, strides, dilations, pads) is a small constant buffer argument
(pool_geometry.cl names its entries), not baked into the program: one program per kind (max or
average, element type, with indices or not) serves every shape and window of a network.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..base import Attr, register_op
from .._nn import (AUTO_PADS, ROUNDING_TYPES, NamedOp, as_3d, require_f32, spatial_rank,
                  window_geometry)
from .._program import program_text
from ...dtypes import cl_type_of
from ...jit.launch import Arg, DEFAULT_CONTEXT, DeviceTraits, KernelLaunch
from ...jit.variant import KernelVariant

_INDEX_TYPES = ("i32", "i64")
# what a MaxPool's input may hold besides f32 (ONNX MaxPool-12: int8, uint8; max only compares,
# so pooling.cl runs in the type itself); an AvgPool is f32 only
_MAX_DATA_TYPES = ("f32", "i8", "u8")
_NO_END = 1 << 30          # an end of the counted extent that no window reaches
# pool_geometry.cl's entries, in order (RB: pool_cpu.cl's rows per work item, last)
GEOMETRY = ("ID IH IW OD OH OW KD KH KW SZ SY SX DZ DY DX PZ PY PX EZ EY EX").split()

_POOL_ATTRS = (
    Attr("strides", "ints", required=True),
    Attr("pads_begin", "ints", required=True),
    Attr("pads_end", "ints", required=True),
    Attr("kernel", "ints", required=True),
    Attr("rounding_type", "str", "floor"),
    Attr("auto_pad", "str", "explicit"),
)


@dataclass
class PoolPlan:
    """One pooling call as its variants read it."""
    sizes: dict                 # the geometry, GEOMETRY's names -> values
    kind: dict                  # the program's defines (POOL_MAX, DATA_T, WITH_INDICES, ...)
    axis_span: int              # MaxPool-8's indices are flat over this many elements
    out: tuple                  # the output's shape
    planes: int                 # N * C * OD
    with_indices: bool          # MaxPool-8's output 1 too
    label: str                  # maxpool_3x3
    device: object
    on_cpu: bool


@dataclass(frozen=True)
class PoolVariant(KernelVariant):
    """pooling.cl, one output per work item (a GPU)."""

    @property
    def name(self) -> str:
        return "pool"

    def applies(self, plan: PoolPlan) -> bool:
        return not plan.on_cpu

    def launches(self, plan: PoolPlan) -> list[KernelLaunch]:
        return [KernelLaunch(source=program_text("pool", plan.kind, "pooling.cl"),
                             entry="pool", args=pool_args(plan, rows=1),
                             global_size=(plan.out[-1], plan.sizes["OH"], plan.planes),
                             label=plan.label)]


def pool_args(plan: PoolPlan, rows: int) -> tuple[Arg, ...]:
    """input, output, the geometry (with `rows`, pool_cpu.cl's RB), then MaxPool-8's indices
    and the span they are flat over."""
    geometry = Arg.const(np.array([plan.sizes[k] for k in GEOMETRY] + [rows], np.int32))
    args = (Arg.input(0), Arg.output(0), geometry)
    if plan.with_indices:
        args += (Arg.output(1), Arg.scalar(np.int64(plan.axis_span)))
    return args


def pool_rows(oh: int, planes: int, device: DeviceTraits) -> list[int]:
    """Output rows per work item of pool_cpu, the default first: enough items for 8 (then 2)
    per compute unit, each a whole row or more."""
    found: list[int] = []
    for target in (8, 2):
        rows = max(1, min(oh, planes * oh // (target * device.compute_units)))
        if rows not in found:
            found.append(rows)
    return found


@dataclass(frozen=True)
class PoolRowsVariant(KernelVariant):
    """pool_cpu.cl at `rows` output rows per work item (an argument: every choice is the same
    program)."""
    rows: int

    @property
    def name(self) -> str:
        return f"rows{self.rows}"

    def applies(self, plan: PoolPlan) -> bool:
        return plan.on_cpu and self.rows in pool_rows(plan.sizes["OH"], plan.planes,
                                                      plan.device)

    def launches(self, plan: PoolPlan) -> list[KernelLaunch]:
        return [KernelLaunch(source=program_text("pool_cpu", plan.kind, "pool_cpu.cl"),
                             entry="pool_cpu", args=pool_args(plan, self.rows),
                             global_size=(-(-plan.sizes["OH"] // self.rows), plan.planes),
                             local_size=(1, 1), label=f"rows{self.rows}")]


def pool_variants(plan: PoolPlan) -> tuple[KernelVariant, ...]:
    """On a CPU device, pool_cpu.cl's rows per work item (pool_rows); elsewhere pooling.cl."""
    if plan.on_cpu and "DATA_T" not in plan.kind:   # pool_cpu.cl is float8 runs
        return tuple(PoolRowsVariant(r) for r in pool_rows(plan.sizes["OH"], plan.planes,
                                                           plan.device))
    return (PoolVariant(),)


class _PoolBase(NamedOp):
    input_count = (1, 1)
    is_max = True

    def check(self, attrs):
        self.check_choice(attrs, "auto_pad", AUTO_PADS)
        self.check_choice(attrs, "rounding_type", ROUNDING_TYPES)

    def _geometry(self, attrs, inputs):
        if not self.is_max or inputs[0].dtype not in _MAX_DATA_TYPES:
            require_f32(self, attrs, inputs[:1])
        x = inputs[0].shape
        rank = spatial_rank(self, attrs, inputs[0], max_spatial=3)
        dilations = attrs.get("dilations") or (1,) * rank
        out, pb, pe = window_geometry(self, attrs, x[2:], attrs["kernel"], attrs["strides"],
                                      dilations, attrs["rounding_type"].lower())
        sizes = {}
        # where an AvgPool that counts padding stops counting: the end of pads_end, or (ceil,
        # OpenVINO's whole window) nowhere
        whole = attrs["rounding_type"].lower() == "ceil"
        ends = [_NO_END if whole else n + e for n, e in zip(x[2:], pe)]
        # 1-D and 2-D windows are 3-D ones with trivial leading axes (the compiler drops them)
        for names, values, fill in (("ID IH IW", x[2:], 1), ("OD OH OW", out, 1),
                                    ("KD KH KW", attrs["kernel"], 1),
                                    ("SZ SY SX", attrs["strides"], 1),
                                    ("DZ DY DX", dilations, 1), ("PZ PY PX", pb, 0),
                                    ("EZ EY EX", ends, 1)):
            sizes.update(zip(names.split(), as_3d(values, fill)))
        return sizes, tuple(x[:2]) + tuple(out), any(pb) or any(pe)

    def _extra_defines(self, attrs, inputs, padded: bool) -> dict:
        raise NotImplementedError

    def _axis_span(self, attrs, shape) -> int:
        return 0

    def plan(self, attrs, inputs, ctx=DEFAULT_CONTEXT) -> PoolPlan:
        sizes, out, padded = self._geometry(attrs, inputs)
        extra = self._extra_defines(attrs, inputs, padded)
        if inputs[0].dtype != "f32":
            extra["DATA_T"] = inputs[0].cl_type
        with_indices = bool(extra.get("WITH_INDICES"))
        span = self._axis_span(attrs, inputs[0].shape) if with_indices else 0
        kind = "max" if self.is_max else "avg"
        window = "x".join(str(sizes[k]) for k in ("KD", "KH", "KW") if k != "KD" or
                          len(out) == 5)
        return PoolPlan(sizes, extra, span, out, out[0] * out[1] * sizes["OD"], with_indices,
                        f"{kind}pool_{window}", ctx.device, ctx.on_cpu)

    def kernel_variants(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        listed = pool_variants(self.plan(attrs, inputs, ctx))
        return listed if len(listed) > 1 else ()

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        plan = self.plan(attrs, inputs, ctx)
        listed = pool_variants(plan)
        variant = ctx.variant if ctx.variant in listed else listed[0]
        launches = variant.launches(plan)
        if plan.on_cpu:
            return [replace(launch, label=f"{plan.label}_cpu_{launch.label}")
                    for launch in launches]
        return launches


@register_op
class MaxPool(_PoolBase):
    type = "MaxPool"
    attributes = _POOL_ATTRS + (
        Attr("dilations", "ints", None),               # opset8
        Attr("index_element_type", "str", None),       # opset8: present -> second output
        Attr("axis", "int", 0),                        # opset8
    )

    def check(self, attrs):
        super().check(attrs)
        t = attrs.get("index_element_type")
        if t is not None and t.lower() not in _INDEX_TYPES:
            raise self.fail(attrs, f"attribute 'index_element_type'='{t}' is not one of "
                                   f"{', '.join(_INDEX_TYPES)}")

    def _axis_span(self, attrs, shape) -> int:
        axis = attrs["axis"] + (len(shape) if attrs["axis"] < 0 else 0)
        if not 0 <= axis < len(shape):
            raise self.fail(attrs, f"attribute 'axis'={attrs['axis']} is out of range for "
                                   f"rank {len(shape)}")
        span = 1
        for d in shape[axis:]:
            span *= d
        return span

    def infer_shapes(self, attrs, inputs, consts):
        _, out, _ = self._geometry(attrs, inputs)
        t = attrs.get("index_element_type")
        if t is None:
            return [(out, inputs[0].dtype)]
        self._axis_span(attrs, inputs[0].shape)
        return [(out, inputs[0].dtype), (out, t.lower())]

    def _extra_defines(self, attrs, inputs, padded):
        t = attrs.get("index_element_type")
        if t is None:
            return dict(POOL_MAX=1, WITH_INDICES=0)
        return dict(POOL_MAX=1, WITH_INDICES=1, INDEX_T=cl_type_of(t.lower()))


@register_op
class AvgPool(_PoolBase):
    type = "AvgPool"
    is_max = False
    attributes = _POOL_ATTRS + (Attr("exclude-pad", "bool", required=True),
                                Attr("dilations", "ints", None))   # ONNX AveragePool-19

    def infer_shapes(self, attrs, inputs, consts):
        return [(self._geometry(attrs, inputs)[1], "f32")]

    def _extra_defines(self, attrs, inputs, padded):
        return dict(POOL_MAX=0, WITH_INDICES=0,
                    COUNT_PAD=int(not attrs["exclude-pad"] and padded))
