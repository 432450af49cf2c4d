"""MvclSpec and MvclLayer: parsed, validated MVCL descriptors (SPEC section 6), plain dataclasses.

One `MvclSpec` is one kernel of one `<CustomLayer type="MVCL">` element: one stage of one
variant. An `MvclLayer` groups every definition of one layer name in a file: its variants (told
apart by their `<Where>` conditions), each with its stages in order. The runtime asks
`layer.select(attrs)` for the stages that fit a node, then generates each stage's program with
jit/mvcl_program.py. Nothing here touches XML or OpenCL.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping, Union

from ...errors import BindingError
from ..diagnostics import Location
from ..kernel_signature import KernelParameter
from ..messages import clipped
from ..sources.source_text import SourceFile

# MVCL spells formats like SimpleGPU plus OpenVINO's VPU forms of lower rank. Those are the 4-D
# formats with the missing dims fixed at 1, so they need no layout of their own:
#   FYX = BFYX with B = 1 (a CHW tensor), YXF = BYXF with B = 1 (an HWC tensor),
#   BF = BFYX with Y = X = 1 (an NC tensor; in BFYX order its elements are contiguous as [B,F]).
MVCL_FORMATS = ("BFYX", "BYXF", "YXFB", "FYXB", "FYX", "YXF", "BF", "ANY")
FORMAT_AS_4D = {"FYX": "BFYX", "YXF": "BYXF", "BF": "BFYX"}
# which of B,F,Y,X (indices) a lower-rank format requires to be 1
FORMAT_UNIT_DIMS = {"FYX": (0,), "YXF": (0,), "BF": (2, 3)}

TENSOR_KINDS = ("input", "output", "input_buffer", "output_buffer")
SCALAR_TYPES = ("int", "float")
DIM_LETTERS = "BFYX"
# Scalar source naming a dimension: I.X (input port-index, default 0), I1.X (input 1), O.F ...
DIM_SOURCE = re.compile(r"([IO])([0-9]*)\.([BFYX])\Z")
# a number as OpenVINO's configs write it (an optional C float suffix is allowed: "1e-9f")
NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fF]?\Z")
# an IR attribute name: OpenVINO's own bindings use names such as "stride-x" and "kernel-x"
ATTRIBUTE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]*\Z")


def format_as_4d(fmt: str) -> str:
    """An MVCL format -> the 4-D format (or ANY) the tensor is handed to the kernel in."""
    return FORMAT_AS_4D.get(fmt, fmt)


def scalar_source_kind(source: str) -> str | None:
    """'dim' | 'literal' | 'attribute' for a Scalar source, None when it is none of them."""
    if DIM_SOURCE.match(source):
        return "dim"
    if NUMBER.match(source):
        return "literal"
    if ATTRIBUTE_NAME.match(source):
        return "attribute"
    return None


def scalar_dim_port(scalar: "MvclScalar") -> tuple[str, int]:
    """("input" | "output", port) of a Scalar whose source is a dimension: the port written in
    the source (I1.X), else port-index, else 0."""
    m = DIM_SOURCE.match(scalar.source)
    kind = "input" if m.group(1) == "I" else "output"
    if m.group(2):
        return kind, int(m.group(2))
    return kind, scalar.port_index if scalar.port_index is not None else 0


@dataclass(frozen=True)
class MvclTensor:
    """<Tensor>: an input or output of the layer, or a buffer passed between stages."""
    arg_name: str
    kind: str                         # one of TENSOR_KINDS
    port_index: int                   # the layer's port, or the buffer's id for *_buffer
    format: str                       # one of MVCL_FORMATS, upper case
    location: Location
    dim: tuple[str, int] | None = None    # *_buffer: the tensor `size` is computed over
    size: str | None = None               # *_buffer: bytes, a formula over B F Y X of `dim`

    @property
    def layout(self) -> str:
        """The 4-D format (BFYX, BYXF, YXFB, FYXB) or ANY; see FORMAT_AS_4D."""
        return format_as_4d(self.format)


@dataclass(frozen=True)
class MvclScalar:
    """<Scalar>: an int or float argument from a dimension, an attribute or a literal."""
    arg_name: str
    type: str                         # "int" | "float"
    source: str                       # "I.X", "O1.F", an attribute name, or a number
    port_index: int | None            # the port of I./O. sources; the element of a list attribute
    location: Location

    @property
    def source_kind(self) -> str:
        return scalar_source_kind(self.source) or "attribute"


@dataclass(frozen=True)
class MvclData:
    """<Data type="data">: a constant blob of the layer (weights ...), bound by its name."""
    arg_name: str
    blob: str                         # Data@source
    format: str                       # one of MVCL_FORMATS
    location: Location


@dataclass(frozen=True)
class MvclLocalData:
    """<Data type="local_data">: a __local buffer of `size` bytes (a formula over `dim`)."""
    arg_name: str
    dim: tuple[str, int]
    size: str
    location: Location


MvclParameter = Union[MvclTensor, MvclScalar, MvclData, MvclLocalData]


@dataclass(frozen=True)
class MvclWorkSizes:
    global_: tuple[str, ...]          # formula texts over B F Y X of `dim` and attributes
    local: tuple[str, ...] | None     # None: the driver chooses
    dim: tuple[str, int]              # ("input", N) | ("output", N)
    location: Location


@dataclass(frozen=True)
class WhereCondition:
    """One attribute of <Where>. Matching follows OpenVINO's VPU plugin: when the layer's value
    is a number, the condition may be `>=N`, `<=N`, `>N`, `<N`, `!=N` or a number compared as a
    number ("1.0" matches "1"); otherwise the texts are compared ignoring case and the spaces
    around commas, so mask="0,1,2" matches the attribute text "0, 1, 2"."""
    attr: str
    value: str
    location: Location

    def matches(self, attrs: Mapping[str, str]) -> bool:
        if self.attr not in attrs:
            return False
        actual = str(attrs[self.attr]).strip()
        number = _number(actual)
        if number is None:
            return _list_text(actual) == _list_text(self.value)
        wanted = self.value.strip()
        for op, test in (("==", lambda a, b: a == b), (">=", lambda a, b: a >= b),
                         ("<=", lambda a, b: a <= b), ("!=", lambda a, b: a != b),
                         (">", lambda a, b: a > b), ("<", lambda a, b: a < b)):
            if wanted.startswith(op):
                bound = _number(wanted[len(op):].strip())
                return bound is not None and test(number, bound)
        bound = _number(wanted)
        if bound is None:
            return _list_text(actual) == _list_text(wanted)
        return number == bound

    def render(self) -> str:
        return f'{clipped(self.attr)}="{clipped(self.value)}"'


def _number(text: str) -> float | None:
    if not NUMBER.match(text):
        return None
    return float(text.rstrip("fF"))


def _list_text(text: str) -> str:
    return ",".join(part.strip() for part in text.split(",")).lower()


def where_key(conditions) -> frozenset:
    """Conditions compared as a set: the same attributes with the same text (as _list_text)."""
    return frozenset((c.attr, _list_text(c.value)) for c in conditions)


def render_where(conditions) -> str:
    if not conditions:
        return "no <Where> (matches any attributes)"
    return "<Where " + " ".join(c.render() for c in conditions) + ">"


@dataclass(frozen=True)
class MvclSpec:
    """One kernel (one stage) of an MVCL layer."""
    name: str                                   # the layer type in the model
    where: tuple[WhereCondition, ...]
    stage: int                                  # 0 for a single-stage layer
    entry: str
    sources: tuple[SourceFile, ...]
    parameters: tuple[MvclParameter, ...]       # in document order
    kernel_parameters: tuple[KernelParameter, ...]  # the entry's parameters, in kernel order
    work_sizes: MvclWorkSizes
    location: Location                          # the <CustomLayer> element
    kernel_location: Location                   # the <Kernel> element
    version: str = "1"
    max_shaves: int | None = None               # a VPU hint; read, never used
    config_path: str | None = None
    kind: str = field(default="MVCL", init=False)

    def binding(self, arg_name: str) -> MvclParameter | None:
        for p in self.parameters:
            if p.arg_name == arg_name:
                return p
        return None

    @property
    def arguments(self) -> tuple[tuple[KernelParameter, MvclParameter], ...]:
        """(kernel parameter, what binds it) in the kernel's parameter order. The loader has
        checked that every parameter is bound exactly once."""
        return tuple((k, self.binding(k.name)) for k in self.kernel_parameters)

    def tensors(self, kind: str) -> tuple[MvclTensor, ...]:
        """The Tensors of one kind ('input', 'output', 'input_buffer', 'output_buffer'), by
        port index."""
        return tuple(sorted((p for p in self.parameters
                             if isinstance(p, MvclTensor) and p.kind == kind),
                            key=lambda t: t.port_index))

    @property
    def options(self) -> str:
        # MVCL has no CompilerOptions. Without -cl-std the compiler takes OpenCL C 1.2 (the
        # highest 1.x) on every device, which is what the VPU's offline compiler assumed.
        return ""


@dataclass(frozen=True)
class MvclVariant:
    """The stages (in order) of one set of <Where> conditions."""
    where: tuple[WhereCondition, ...]
    stages: tuple[MvclSpec, ...]

    @property
    def location(self) -> Location:
        return self.stages[0].location

    def matches(self, attrs: Mapping[str, str]) -> bool:
        return all(c.matches(attrs) for c in self.where)


@dataclass(frozen=True)
class MvclLayer:
    """Every definition of one MVCL layer name in one config file."""
    name: str
    variants: tuple[MvclVariant, ...]
    location: Location                          # the first <CustomLayer> of this name
    config_path: str | None = None
    kind: str = field(default="MVCL", init=False)

    @property
    def specs(self) -> tuple[MvclSpec, ...]:
        return tuple(s for v in self.variants for s in v.stages)

    def select(self, attrs: Mapping[str, str]) -> list[MvclSpec]:
        """The stages of the one variant whose <Where> conditions all match `attrs` (attribute
        name -> text). BindingError when none matches (listing what was tried and why) or when
        several do."""
        attrs = {str(k): str(v) for k, v in attrs.items()}
        matching = [v for v in self.variants if v.matches(attrs)]
        if len(matching) == 1:
            return list(matching[0].stages)
        if not matching:
            tried = "; ".join(f"{render_where(v.where)} at {v.location}: {_why_not(v, attrs)}"
                              for v in self.variants)
            given = ", ".join(f'{k}="{v}"' for k, v in sorted(attrs.items())) or "none"
            raise BindingError(f"no definition of MVCL layer '{self.name}' matches the layer's "
                               f"attributes ({given}); tried {tried}")
        both = "; ".join(f"{render_where(v.where)} at {v.location}" for v in matching)
        raise BindingError(f"{len(matching)} definitions of MVCL layer '{self.name}' match the "
                           f"layer's attributes: {both}; add <Where> conditions so that exactly "
                           f"one matches")


def _why_not(variant: MvclVariant, attrs: Mapping[str, str]) -> str:
    for c in variant.where:
        if c.attr not in attrs:
            return f"the layer has no attribute '{clipped(c.attr)}'"
        if not c.matches(attrs):
            return f"{clipped(c.attr)} is '{clipped(attrs[c.attr])}', not '{clipped(c.value)}'"
    return "matches"
