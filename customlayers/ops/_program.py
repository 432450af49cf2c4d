"""Shared pieces of the built-in ops' kernels: program text (kernel files, #define blocks),
literals, and linear index maps.

Every data-movement op here (Transpose, Slice, Tile, Broadcast, ShuffleChannels, ...) is a
*linear view* of its input: output element i reads input element
`offset + sum_k coord_k(i) * stride_k`, where coord_k(i) is the k-th coordinate of i in the
output shape. Only the strides and the offset differ between ops, so they share one kernel and
the maps are computed here, in Python, then passed as a small constant buffer (view_table,
read by view_index.cl): one program per op and element type serves every shape.
"""
from __future__ import annotations

import math
import re

import numpy as np
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Mapping, Sequence

from ..errors import BindingError
from ..jit.cl_includes import expand_kernel_file
from ..jit.defines import render_define
from ..jit.tensor import TensorDesc
from ..jit.launch import Arg, KernelLaunch
from ._half_io import HALF_LOAD, HALF_STORE, half_load, half_read, half_write

# Work-items per group the global size is padded to; kernels guard `i < COUNT`. 64 divides
# every work-group limit a real device has, so the driver may choose any divisor of it.
GROUP_MULTIPLE = 64


def read_kernel_file(name: str) -> str:
    """The text of the kernel file customlayers/ops/<name> as written (package data)."""
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


@lru_cache(maxsize=None)
def kernel_source(name: str) -> str:
    """Kernel file customlayers/ops/<name>, e.g. "conv_direct.cl", with the helpers it
    `#include`s pasted in by name, once each, between `#line` directives (jit/cl_includes.py):
    a program is its #define block followed by this."""
    return expand_kernel_file(name, read_kernel_file)


def defines(**values: int | float | str) -> str:
    """A block of `#define NAME VALUE` lines (NAME may be a macro head such as "OP(a, b)"),
    rendered as the JIT renders a user define. Floats keep full precision; a value starting
    with '-' is parenthesized."""
    lines = []
    for name, value in values.items():
        if isinstance(value, bool):
            value = int(value)
        if isinstance(value, float):        # (a NaN is not > 0: it was -INFINITY)
            value = f"{value!r}f" if math.isfinite(value) else "NAN" if math.isnan(value) \
                else "INFINITY" if value > 0 else "-INFINITY"
        if isinstance(value, (int, str)) and str(value).startswith("-"):
            value = f"({value})"  # so that `-NAME` and `x-NAME` stay what they say
        lines.append(render_define(name, str(value), user=True))
    return "\n".join(lines) + "\n"


def program_text(label: str, values: Mapping[str, object], cl_file: str, *,
                 half_arithmetic: bool | None = None) -> str:
    """A labelled program: the baked constants as `#define` lines, then the kernel file (with
    the helpers it includes). `half_arithmetic`: whether the program computes in half and so
    enables cl_khr_fp16; None: where a value names half (False for a program that holds half
    only behind pointers, read and written with vload_half/vstore_half)."""
    parts = [f"// customlayers built-in op: {label}\n"]
    if half_arithmetic is None:
        half_arithmetic = any("half" in str(v) for v in values.values())
    if half_arithmetic:
        parts.append("#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n")
    if any("double" in str(v) for v in values.values()):
        parts.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n")
    if values:
        parts.append(defines(**values))
    parts.append(kernel_source(cl_file))
    return "".join(parts)


def global_1d(count: int) -> tuple[int]:
    """One work-item per element, padded to GROUP_MULTIPLE (kernels guard the tail)."""
    return (max(GROUP_MULTIPLE, -(-count // GROUP_MULTIPLE) * GROUP_MULTIPLE),)


def c_float(value: float) -> str:
    """A float as an OpenCL C literal that keeps every digit (repr round-trips)."""
    if math.isnan(value):
        return "NAN"
    if math.isinf(value):
        return "INFINITY" if value > 0 else "(-INFINITY)"
    text = repr(float(value))
    return f"({text}f)" if text.startswith("-") else f"{text}f"


# a float literal with the f suffix (1.0f, .5f, 3e-08f, 2.5E+3f) not inside a name
_FLOAT_LITERAL = re.compile(r"(?<![\w.])((?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)[fF]\b")
_FLOAT_CONSTANT = re.compile(r"\b(M_[A-Z0-9_]+?)_F\b")


def in_double(text: str | None) -> str | None:
    """C text written for float, for double: the expressions of the ops are written with float
    literals (1.0f, c_float's digits + f) and M_*_F constants, which in double arithmetic would
    round every constant to float precision. Dropping the suffix keeps the digits (c_float
    writes the full repr of a Python float)."""
    if text is None:
        return None
    text = text.replace("erf_rational(", "erf(")        # a float-only helper (unary_map.cl)
    return _FLOAT_CONSTANT.sub(r"\1", _FLOAT_LITERAL.sub(r"\1", text))


# -- shapes ----------------------------------------------------------------------------------
def dense_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


def batch_strides(batch: Sequence[int], strides: Sequence[int]) -> list[int]:
    """The strides of at most two leading batch axes of sizes `batch`, padded in front to two;
    0 along an axis of size 1 (broadcast: its index is always 0)."""
    found = [s if d > 1 else 0 for d, s in zip(batch, strides[:len(batch)])]
    return [0] * (2 - len(found)) + found


def numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def broadcast_shapes(op_type: str, *shapes: Sequence[int]) -> tuple[int, ...]:
    """numpy broadcasting of shapes; BindingError saying which dims clash."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for k in range(rank):
        dims = {s[k - rank + len(s)] for s in shapes if k - rank + len(s) >= 0}
        dims.discard(1)
        if len(dims) > 1:
            raise BindingError(f"{op_type}: shapes {' and '.join(str(list(s)) for s in shapes)} "
                               f"do not broadcast (numpy rules): dims {sorted(dims)} meet at "
                               f"axis {k} of the result")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def broadcasts_to(shape: Sequence[int], out: Sequence[int]) -> bool:
    """Whether `shape` broadcasts to `out` (numpy rules) leaving `out` as it is."""
    shape, out = tuple(shape), tuple(out)
    if len(shape) > len(out) or None in shape:
        return False
    padded = (1,) * (len(out) - len(shape)) + shape
    return all(d in (1, o) for d, o in zip(padded, out))


def normalize_axis(axis: int, rank: int, op_type: str, what: str = "axis") -> int:
    if not -rank <= axis < rank:       # a rank-0 tensor has no axis to name
        expected = f"expected {-rank}..{rank - 1}" if rank else "a scalar has no axes"
        raise BindingError(f"{op_type}: {what} {axis} is out of range for rank {rank} "
                           f"({expected})")
    return axis + rank if axis < 0 else axis


# -- linear views ----------------------------------------------------------------------------
@dataclass(frozen=True)
class LinearView:
    """Element at coordinate c of `shape` lives at `offset + sum(c_k * strides_k)` of a buffer."""
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0

    @staticmethod
    def dense(shape: Sequence[int]) -> "LinearView":
        shape = tuple(int(d) for d in shape)
        return LinearView(shape, dense_strides(shape), 0)

    def transpose(self, order: Sequence[int]) -> "LinearView":
        return LinearView(tuple(self.shape[a] for a in order),
                          tuple(self.strides[a] for a in order), self.offset)

    def broadcast_to(self, shape: Sequence[int]) -> "LinearView":
        """numpy broadcasting: leading new axes and size-1 axes read with stride 0."""
        shape = tuple(int(d) for d in shape)
        lead = len(shape) - len(self.shape)
        strides = [0] * lead
        for k, (d, s) in enumerate(zip(self.shape, self.strides)):
            strides.append(0 if d == 1 and shape[lead + k] != 1 else s)
        return LinearView(shape, tuple(strides), self.offset)

    def slice(self, axis: int, start: int, step: int, length: int) -> "LinearView":
        shape, strides = list(self.shape), list(self.strides)
        offset = self.offset + start * strides[axis]
        shape[axis], strides[axis] = length, strides[axis] * step
        return LinearView(tuple(shape), tuple(strides), offset)

    def reshape_dense(self, shape: Sequence[int]) -> "LinearView":
        """Only for a view that is itself dense (strides of its shape, offset 0)."""
        if self.strides != dense_strides(self.shape):
            raise ValueError("reshape_dense of a strided view")
        return LinearView.dense(shape)


def coalesce(shape: Sequence[int], *stride_sets: Sequence[int]):
    """Drop size-1 axes and merge neighbours that every view walks contiguously, so the
    kernel splits the index into as few coordinates as possible. Returns (shape, strides...)."""
    dims: list[int] = []
    sets: list[list[int]] = [[] for _ in stride_sets]
    for k, d in enumerate(shape):
        if d == 1:
            continue
        if dims and all(ss[-1] == st[k] * d for ss, st in zip(sets, stride_sets)):
            dims[-1] *= d
            for ss, st in zip(sets, stride_sets):
                ss[-1] = st[k]
            continue
        dims.append(int(d))
        for ss, st in zip(sets, stride_sets):
            ss.append(int(st[k]))
    return (tuple(dims), *(tuple(s) for s in sets))


def uint_arg(value: int, what: str = "a size") -> Arg:
    """A size as a uint kernel argument; BindingError where it does not fit 32 bits (the
    built-in kernels index with 32-bit integers)."""
    if not 0 <= value < 2 ** 32:
        raise BindingError(f"{what} of {value} elements does not fit the 32-bit indices of "
                           f"the built-in kernels")
    return Arg.scalar(np.uint32(value))


def is_identity(view: LinearView) -> bool:
    """The view reads element i for output element i (a dense view without an offset)."""
    return view.offset == 0 and tuple(view.strides) == dense_strides(view.shape)


@dataclass(frozen=True)
class RowViews:
    """Views of an output's shape as the map kernels walk them: rows of `inner` consecutive
    outputs (the dims that every view walks contiguously merged, view_index.cl), `outer` rows;
    per view, [outer rank, offset, step along the row, outer dims, outer strides] (int32), an
    argument: one program serves every shape. A work item takes a run of a row, so the row's
    start is divided out once per run, not once per element (per-element divisions by sizes
    known only at run time made a broadcast Add 10x slower on PoCL than baked constants)."""
    inner: int
    outer: int
    tables: tuple[np.ndarray, ...]

    @staticmethod
    def of(shape: Sequence[int], *views: LinearView) -> "RowViews":
        dims, _, *strides = coalesce(shape, dense_strides(shape), *(v.strides for v in views))
        if not dims:
            dims, strides = (1,), [(0,) for _ in views]
        tables = []
        for view, st in zip(views, strides):
            table = [len(dims) - 1, view.offset, st[-1], *dims[:-1], *st[:-1]]
            if any(abs(v) >= 2 ** 31 for v in table) or numel(shape) >= 2 ** 31:
                raise BindingError(f"a view of shape {list(view.shape)} does not fit 32-bit "
                                   f"indices")
            tables.append(np.array(table, np.int32))
        return RowViews(int(dims[-1]), numel(dims[:-1]), tuple(tables))

    def global_size(self, per_item: int) -> tuple[int, int]:
        """(runs per row, rows): a row of 64 runs or more padded to a multiple of 64, a shorter
        one exact (no idle items); an empty output one idle group."""
        if self.inner * self.outer == 0:
            return (GROUP_MULTIPLE, 1)
        runs = -(-self.inner // per_item)
        return (global_1d(runs)[0] if runs >= GROUP_MULTIPLE else runs, self.outer)


def shape_of(desc: TensorDesc) -> tuple[int, ...]:
    return tuple(int(d) for d in desc.shape)


# -- launches of the shared kernels ---------------------------------------------------------
def _macro(name: str, params: str, body: str | None) -> dict[str, str]:
    return {} if body is None else {f"{name}({params})": body}


def items_per_work_item(ctx) -> int:
    """Outputs per work item of the elementwise kernels (unary_map.cl, binary_map.cl) on the
    device of CompileContext `ctx`: 16 on a CPU, where a loop of 16 is vectorized by LLVM
    (a ReLU of 1x64x112x112 on PoCL: 0.67 ms with one output per item, 0.10 ms with 16, 0.09
    with 32, 0.13 ms for a hand-written float8 kernel); 1 elsewhere."""
    return 16 if ctx.on_cpu else 1


def unary_map_launch(label: str, src: TensorDesc, dst: TensorDesc, *, src_index: str = "(i)",
                     src_view: LinearView | None = None, src_table: np.ndarray | None = None,
                     fn: str | None = None, load: str | None = None, store: str | None = None,
                     bounds: str | None = None, fill: str | None = None,
                     per_item: int = 1,
                     macros: Mapping[str, object] | None = None) -> KernelLaunch:
    """unary_map.cl: out[i] = store(fn(load(in[src_index(i)]))), with bodies given as C text
    in the variables `i` (src_index, bounds), `v` (load, store) and `x` (fn); `src_view`
    instead of src_index: the input read through a linear view (of the output's shape), passed
    as an argument (view_table); `src_table`: an int32 table that src_index and bounds read as
    `src_view` (an argument); `per_item` outputs per work item (items_per_work_item). A half
    tensor is read and written as float (vload_half, vstore_half_rte) on any device: `load` and
    `store` see float. `macros`: more #defines the texts use. The element count is an
    argument; the program text does not hold the label, so ops with one body share one
    program."""
    if "f64" in (src.dtype, dst.dtype):
        fn, load, store, fill = (in_double(t) for t in (fn, load, store, fill))
    load = half_load(src, load)
    write, store = half_write(dst, store)
    args = (Arg.input(0), Arg.output(0), uint_arg(numel(dst.shape), "a result"))
    global_size = global_1d(-(-numel(dst.shape) // per_item))
    values: dict[str, object] = {
        "IN_TYPE": src.cl_type, "OUT_TYPE": dst.cl_type,
        "SRC_INDEX(i)": src_index, **half_read("READ_IN", "IN_VALUE", src), **write,
    }
    if src_view is not None and numel(src_view.shape) != numel(dst.shape):
        raise ValueError(f"view shape {src_view.shape} does not cover the output {dst.shape}")
    if src_view is not None and not is_identity(src_view):
        rows = RowViews.of(src_view.shape, src_view)     # Tile: a finer split of the output
        args = (Arg.input(0), Arg.output(0), uint_arg(rows.inner if rows.outer else 0),
                Arg.const(rows.tables[0]))
        global_size = rows.global_size(per_item)
        values["SRC_VIEW"] = 1
    elif src_table is not None:
        args += (Arg.const(np.asarray(src_table, np.int32)),)
        values["SRC_TABLE"] = 1
    values.update(macros or {})
    values.update(_macro("LOAD", "v", load))
    values.update(_macro("FN", "x", fn))
    values.update(_macro("STORE", "v", store))
    if bounds is not None:
        values["IN_BOUNDS(i)"] = bounds
        values["FILL"] = fill if fill is not None else \
            "0.0f" if dst.dtype == "f16" else f"(({dst.cl_type})0)"
    if per_item > 1:
        values["PER_ITEM"] = f"{per_item}u"
    return KernelLaunch(source=program_text("unary_map", values, "unary_map.cl",
                                            half_arithmetic=False), entry="unary_map",
                        args=args, global_size=global_size, label=label)


def binary_map_launch(label: str, a: TensorDesc, b: TensorDesc, out: TensorDesc, op: str, *,
                      a_input: int = 0, b_input: int = 1,
                      a_view: LinearView | None = None, b_view: LinearView | None = None,
                      load_a: str | None = None, load_b: str | None = None,
                      store: str | None = None, per_item: int = 1) -> KernelLaunch:
    """binary_map.cl: out[i] = store(op(load_a(a[..]), load_b(b[..]))) with numpy broadcasting
    of both inputs to `out` (or the views given). `op` is C text in `a` and `b`; `per_item`
    outputs per work item (items_per_work_item). A half tensor is read and written as float
    (vload_half, vstore_half_rte) on any device: `op` sees float. The count and the views are
    arguments (view_table): one program per op and element types serves every shape."""
    if "f64" in (a.dtype, b.dtype, out.dtype):
        op, load_a, load_b, store = (in_double(t) for t in (op, load_a, load_b, store))
    load_a, load_b = half_load(a, load_a), half_load(b, load_b)
    write, store = half_write(out, store)
    shape = shape_of(out)
    a_view = a_view or LinearView.dense(shape_of(a)).broadcast_to(shape)
    b_view = b_view or LinearView.dense(shape_of(b)).broadcast_to(shape)
    values: dict[str, object] = {
        "A_TYPE": a.cl_type, "B_TYPE": b.cl_type, "OUT_TYPE": out.cl_type,
        "OP(a, b)": f"({op})", **half_read("READ_A", "A_VALUE", a),
        **half_read("READ_B", "B_VALUE", b), **write,
    }
    args = (Arg.input(a_input), Arg.input(b_input), Arg.output(0),
            uint_arg(numel(shape), "a result"))
    global_size = global_1d(-(-numel(shape) // per_item))
    for view in (a_view, b_view):
        if tuple(view.shape) != shape:
            raise ValueError(f"view shape {view.shape} != output shape {shape}")
    strided = [(name, view) for name, view in (("A_VIEW", a_view), ("B_VIEW", b_view))
               if not is_identity(view)]
    if strided:
        rows = RowViews.of(shape, *(view for _, view in strided))
        args = args[:3] + (uint_arg(rows.inner if rows.outer else 0),) + \
            tuple(Arg.const(t) for t in rows.tables)
        global_size = rows.global_size(per_item)
        values.update((name, 1) for name, _ in strided)
    values.update(_macro("LOAD_A", "v", load_a))
    values.update(_macro("LOAD_B", "v", load_b))
    values.update(_macro("STORE", "v", store))
    if per_item > 1:
        values["PER_ITEM"] = f"{per_item}u"
    return KernelLaunch(source=program_text("binary_map", values, "binary_map.cl",
                                            half_arithmetic=False), entry="binary_map",
                        args=args, global_size=global_size, label=label)


def float_compute(dtype: str) -> tuple[str | None, str | None]:
    """(load, store) macro bodies that compute a half tensor in float; none for the others.
    The map kernels (unary_map_launch, binary_map_launch) read half as float themselves and
    drop these; a kernel of its own that reads half values needs them (and cl_khr_fp16)."""
    if dtype == "f16":
        return HALF_LOAD, HALF_STORE
    return None, None


# a page: at least any OpenCL device's buffer alignment (CL_DEVICE_MEM_BASE_ADDR_ALIGN: 128
# bytes on PoCL, 512 on NVIDIA)
BUFFER_ALIGN = 4096


def buffer_aligned(values: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of `values` that starts where a device buffer would: a CPU device
    then uses it as the buffer where it lies (runtime/device/host_memory.py constant_buffer)
    instead of copying weights packed at compile time a second time."""
    values = np.asarray(values)
    raw = np.empty(values.nbytes + BUFFER_ALIGN, np.uint8)
    start = -raw.ctypes.data % BUFFER_ALIGN
    out = raw[start:start + values.nbytes].view(values.dtype).reshape(values.shape)
    out[...] = values
    return out
