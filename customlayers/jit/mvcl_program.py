"""The program of one MVCL stage for concrete tensors and attributes: pure Python, no OpenCL.

    programs = generate_mvcl_stages(layer.select(attrs), attrs, inputs, outputs)

The MVCL side of the JIT, beside program.py (SimpleGPU): tensors are TensorDescs, and each stage's
program is a GeneratedProgram (MvclProgram adds the stage and its arguments), so the runtime
builds and checks both dialects' programs by one path. MVCL kernels get their sizes as Scalar
arguments, not as defines, so the program text is the sources alone: a comment naming the layer
and stage, then each source preceded by a comment with its file name and a `#line 1 "<file>"`
directive (the convention of the SimpleGPU JIT, so build logs point at the user's files;
`line_map` maps every generated line back too). The arguments come in the kernel's parameter
order, each one of the `*Arg` types below: MVCL binds by name, and an argument says which port
or blob (in which layout) it takes; the runtime's adapter turns them into launch Args (launch.py)
once it knows where each tensor lives. Errors are FormulaError (work sizes, buffer sizes) and
BindingError (shapes, attributes, scalars), naming the layer, the stage, what was being
evaluated and where it is written.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Mapping, Sequence, Union

import numpy as np

from ..config.formulas import evaluate_work_sizes, parse_formula_list
from ..config.kernel_signature import KernelParameter, clean_source
from ..config.messages import clipped
from ..config.mvcl.spec import (DIM_LETTERS, FORMAT_UNIT_DIMS, NUMBER, MvclData, MvclLocalData,
                                MvclScalar, MvclSpec, MvclTensor, format_as_4d, scalar_dim_port)
from ..config.sources.source_text import append_sources
from ..dtypes import CUSTOM_LAYER_DTYPES, cl_type_of, from_cl_type
from ..errors import BindingError, FormulaError
from .program import GeneratedProgram
from .tensor import TensorDesc

INT32_RANGE = (-2 ** 31, 2 ** 31 - 1)
FLOAT32_MAX = float(np.finfo(np.float32).max)
_HALF = re.compile(r"\bhalf[0-9]*\b")


# -- the arguments, one type per kind ------------------------------------------------------
@dataclass(frozen=True)
class InputTensorArg:
    arg_name: str
    port: int
    layout: str             # BFYX | BYXF | YXFB | FYXB | ANY: the layout to hand the kernel


@dataclass(frozen=True)
class OutputTensorArg:
    arg_name: str
    port: int
    layout: str


@dataclass(frozen=True)
class BufferArg:
    """An internal buffer between stages: written by an output_buffer, read by a later
    input_buffer of the same port (id). Allocate it once per layer run, `nbytes` of the
    writing stage."""
    arg_name: str
    port: int
    nbytes: int
    writes: bool            # True: output_buffer (this stage fills it); False: input_buffer

    @property
    def name(self) -> str:
        return f"buffer{self.port}"


@dataclass(frozen=True)
class BlobArg:
    """A constant blob of the layer (weights ...), by the name the model gives it."""
    arg_name: str
    blob: str
    layout: str


@dataclass(frozen=True)
class LocalMemoryArg:
    arg_name: str
    nbytes: int


@dataclass(frozen=True)
class ScalarArg:
    arg_name: str
    value: np.int32 | np.float32


MvclArg = Union[InputTensorArg, OutputTensorArg, BufferArg, BlobArg, LocalMemoryArg, ScalarArg]


@dataclass(frozen=True)
class MvclProgram(GeneratedProgram):
    """One stage's program: text, entry, options, work sizes and line map as every custom
    layer's (GeneratedProgram), and what only a stage has."""
    stage: int = 0
    args: tuple[MvclArg, ...] = ()         # in the kernel's parameter order
    uses_half: bool = False                # the sources use `half`: the device needs cl_khr_fp16


# -- program text --------------------------------------------------------------------------
def assemble_sources(comment: str, sources) -> tuple[str, tuple]:
    """The program text and its line map: a comment line, then each source after a comment
    with its name and a #line directive (the SimpleGPU JIT's convention)."""
    lines: list[str] = [f"// {comment}"]
    origins: list = [None]
    append_sources(lines, origins, sources)
    return "\n".join(lines) + "\n", tuple(origins)


# -- evaluation ----------------------------------------------------------------------------
class _Stage:
    """The context of one stage's generation: what errors name, and the shapes and attributes
    formulas and scalars read."""

    def __init__(self, spec: MvclSpec, attrs: Mapping[str, str], inputs, outputs):
        self.spec = spec
        self.attrs = {str(k): str(v) for k, v in attrs.items()}
        self.inputs = [_desc(t) for t in inputs]
        self.outputs = [_desc(t) for t in outputs]

    def where(self, loc) -> str:
        return f"{loc}: layer '{self.spec.name}' stage {self.spec.stage}"

    def tensor(self, kind: str, port: int, loc, what: str) -> TensorDesc:
        given = self.inputs if kind == "input" else self.outputs
        if not 0 <= port < len(given):
            raise BindingError(f"{self.where(loc)}: {what} needs {kind} {port}, but "
                               f"{len(given)} {kind}{'s are' if len(given) != 1 else ' is'} given")
        return given[port]

    def numeric_attrs(self) -> dict[str, int | float]:
        """Attributes whose text is one number, for formulas (lists and words are left out)."""
        found = {}
        for name, text in self.attrs.items():
            value = _parse_number(text.strip())
            if value is not None:
                found[name] = value
        return found

    def formula_env(self, dim: tuple[str, int], loc, what: str) -> dict[str, int | float]:
        env = self.numeric_attrs()
        dims = self.tensor(dim[0], dim[1], loc, f"{what} (dim={dim[0]},{dim[1]})").dims
        env.update(zip(DIM_LETTERS, dims))
        return env

    def evaluate(self, texts: Sequence[str], env, attribute: str, loc) -> tuple[int, ...]:
        try:
            formulas = parse_formula_list(",".join(texts), max_entries=None, functions=True,
                                          extra_names=True)
            return evaluate_work_sizes(formulas, env)
        except FormulaError as e:
            e.layer = e.layer or self.spec.name
            e.attribute = e.attribute or f"{attribute} of stage {self.spec.stage}"
            e.location = e.location or loc
            raise


def _desc(t) -> TensorDesc:
    """A TensorDesc as given; a B,F,Y,X tuple or (shape, dtype) for one (tests, the fuzzer)."""
    if isinstance(t, TensorDesc):
        return t
    if isinstance(t, tuple) and len(t) == 2 and isinstance(t[0], (tuple, list)):
        return TensorDesc(tuple(t[0]), t[1])
    return TensorDesc(tuple(t))


# digits of an integer taken as an int; a longer one is read as a float (int() refuses over
# 4300 digits, and no size or scalar needs more than 19): the bounds of the formulas and the
# int32 check of Scalars then refuse it by its value
MAX_INT_DIGITS = 19


def _parse_number(text: str) -> int | float | None:
    if not NUMBER.match(text):
        return None
    text = text.rstrip("fF")
    if re.fullmatch(r"[+-]?[0-9]+", text):
        sign, digits = ("-" if text[0] == "-" else ""), text.lstrip("+-").lstrip("0") or "0"
        if len(digits) <= MAX_INT_DIGITS:     # int() counts leading zeros against its limit
            return int(sign + digits)
    return float(text)


def _scalar_value(stage: _Stage, s: MvclScalar) -> np.int32 | np.float32:
    kind = s.source_kind
    where = stage.where(s.location)
    if kind == "dim":
        port_kind, port = scalar_dim_port(s)
        value = stage.tensor(port_kind, port, s.location, f"Scalar '{s.arg_name}' ({s.source})")\
            .dims["BFYX".index(s.source[-1])]
        text = str(value)
    elif kind == "literal":
        text = s.source
    else:
        if s.source not in stage.attrs:
            known = ", ".join(sorted(stage.attrs)) or "none"
            raise BindingError(f"{where}: Scalar '{s.arg_name}' takes attribute '{s.source}', "
                               f"which the layer does not have (its attributes: {known})")
        items = [p.strip() for p in stage.attrs[s.source].split(",")]
        index = s.port_index if s.port_index is not None else 0
        if index >= len(items):
            raise BindingError(f"{where}: Scalar '{s.arg_name}' takes element {index} (port-index)"
                               f" of attribute {s.source}=\"{stage.attrs[s.source]}\", which has "
                               f"{len(items)} element{'s' if len(items) != 1 else ''}")
        text = items[index]
        if text.lower() in ("true", "false"):
            text = "1" if text.lower() == "true" else "0"
    number = _parse_number(text)
    if number is None:
        raise BindingError(f"{where}: Scalar '{s.arg_name}' of type {s.type}: '{clipped(text)}' "
                           f"(from source '{s.source}') is not a number")
    if isinstance(number, float) and not math.isfinite(number) or \
            s.type == "float" and abs(number) > FLOAT32_MAX:
        raise BindingError(f"{where}: Scalar '{s.arg_name}' of type {s.type}: '{clipped(text)}' "
                           f"(from source '{s.source}') is not a finite {s.type}")
    if s.type == "float":
        return np.float32(number)
    if isinstance(number, float):
        if not number.is_integer():
            raise BindingError(f"{where}: Scalar '{s.arg_name}' of type int: '{clipped(text)}' "
                               f"(from source '{s.source}') is not an integer")
        number = int(number)
    if not INT32_RANGE[0] <= number <= INT32_RANGE[1]:
        raise BindingError(f"{where}: Scalar '{s.arg_name}' of type int: {clipped(str(number))} "
                           f"(from source '{s.source}') does not fit a 32-bit int")
    return np.int32(number)


def _check_tensor(stage: _Stage, t: MvclTensor, k: KernelParameter, shape: TensorDesc) -> None:
    where = stage.where(t.location)
    for i in FORMAT_UNIT_DIMS.get(t.format, ()):
        if shape.dims[i] != 1:
            raise BindingError(f"{where}: {t.kind} {t.port_index} ('{t.arg_name}') has format "
                               f"{t.format}, which needs {DIM_LETTERS[i]} = 1; its dims are "
                               f"B,F,Y,X = {','.join(map(str, shape.dims))}")
    declared = k.base_type
    # (the OpenCL C type a kernel declares for the tensor's element type)
    wanted = cl_type_of(shape.dtype) if shape.dtype in CUSTOM_LAYER_DTYPES else None
    if k.is_pointer and from_cl_type(declared) in CUSTOM_LAYER_DTYPES and wanted and \
            declared != wanted:
        raise BindingError(f"{where}: kernel parameter '{k.declaration}' takes {declared}, but "
                           f"{t.kind} {t.port_index} is {shape.dtype} ({wanted}); give the layer "
                           f"{declared} tensors or write the kernel for {wanted}")


def _bytes(stage: _Stage, p, what: str) -> int:
    env = stage.formula_env(p.dim, p.location, what)
    (nbytes,) = stage.evaluate([p.size], env, f"size of '{p.arg_name}'", p.location)
    return nbytes


def _arg(stage: _Stage, k: KernelParameter, p) -> MvclArg:
    if p is None:        # the checks refuse such a spec; one built by hand may still have it
        raise BindingError(f"{stage.where(stage.spec.kernel_location)}: kernel parameter "
                           f"'{k.declaration}' is bound by no <Tensor>, <Scalar> or <Data>")
    if isinstance(p, MvclScalar):
        return ScalarArg(k.name, _scalar_value(stage, p))
    if isinstance(p, MvclLocalData):
        return LocalMemoryArg(k.name, _bytes(stage, p, f"local_data '{p.arg_name}'"))
    if isinstance(p, MvclData):
        return BlobArg(k.name, p.blob, format_as_4d(p.format))
    if p.kind in ("input_buffer", "output_buffer"):
        return BufferArg(k.name, p.port_index, _bytes(stage, p, f"{p.kind} '{p.arg_name}'"),
                         writes=p.kind == "output_buffer")
    shape = stage.tensor(p.kind, p.port_index, p.location, f"Tensor '{p.arg_name}'")
    _check_tensor(stage, p, k, shape)
    cls = InputTensorArg if p.kind == "input" else OutputTensorArg
    return cls(k.name, p.port_index, p.layout)


def generate_mvcl_program(spec: MvclSpec, attrs: Mapping[str, str],
                          inputs: Sequence, outputs: Sequence) -> MvclProgram:
    """The program of one stage. `attrs`: the layer's attributes as text; `inputs`/`outputs`:
    the layer's tensors by port, each a TensorDesc (only its B,F,Y,X dims and element type
    count: the adapter hands the kernel dense tensors in the declared layouts)."""
    stage = _Stage(spec, attrs, inputs, outputs)
    ws = spec.work_sizes
    env = stage.formula_env(ws.dim, ws.location, "WorkSizes")
    global_size = stage.evaluate(ws.global_, env, "global", ws.location)
    local_size = stage.evaluate(ws.local, env, "local", ws.location) if ws.local else None
    if local_size is not None and len(local_size) != len(global_size):
        raise FormulaError(f"local has {len(local_size)} entries, global {len(global_size)}",
                           ",".join(ws.local), layer=spec.name, attribute="local",
                           location=ws.location)
    args = tuple(_arg(stage, k, p) for k, p in spec.arguments)
    comment = (f"Custom layer {spec.name} (MVCL), stage {spec.stage}, entry {spec.entry}")
    text, line_map = assemble_sources(comment, spec.sources)
    uses_half = any(_HALF.search(clean_source(s.text)) for s in spec.sources)
    return MvclProgram(layer=spec.name, stage=spec.stage, text=text, entry=spec.entry,
                       options=spec.options, global_size=global_size, local_size=local_size,
                       args=args, line_map=line_map, uses_half=uses_half)


def generate_mvcl_stages(stages: Sequence[MvclSpec], attrs: Mapping[str, str],
                         inputs: Sequence, outputs: Sequence) -> list[MvclProgram]:
    """The programs of every stage (from MvclLayer.select), in order. Also checks what passes
    between stages: each input_buffer reads a buffer an earlier stage wrote, no larger than
    written (the buffer is allocated with the writer's size)."""
    programs = [generate_mvcl_program(s, attrs, inputs, outputs) for s in stages]
    written: dict[int, BufferArg] = {}
    for spec, program in zip(stages, programs):
        for arg in program.args:
            if not isinstance(arg, BufferArg):
                continue
            if arg.writes:
                written.setdefault(arg.port, arg)
                continue
            source = written.get(arg.port)
            if source is None:
                raise BindingError(f"layer '{spec.name}' stage {spec.stage}: input_buffer "
                                   f"'{arg.arg_name}' reads buffer {arg.port}, which no earlier "
                                   f"stage writes")
            if arg.nbytes > source.nbytes:
                raise BindingError(f"layer '{spec.name}' stage {spec.stage}: input_buffer "
                                   f"'{arg.arg_name}' reads {arg.nbytes} bytes of buffer "
                                   f"{arg.port}, but the stage that writes it makes "
                                   f"{source.nbytes} bytes")
    return programs


def buffer_sizes(programs: Sequence[MvclProgram]) -> dict[int, int]:
    """Bytes to allocate for each internal buffer (by port id): the size its writer asks."""
    sizes: dict[int, int] = {}
    for program in programs:
        for arg in program.args:
            if isinstance(arg, BufferArg) and arg.writes:
                sizes[arg.port] = max(sizes.get(arg.port, 0), arg.nbytes)
    return sizes


__all__ = ["InputTensorArg", "OutputTensorArg", "BufferArg", "BlobArg",
           "LocalMemoryArg", "ScalarArg", "MvclArg", "MvclProgram", "generate_mvcl_program",
           "generate_mvcl_stages", "buffer_sizes", "assemble_sources"]
