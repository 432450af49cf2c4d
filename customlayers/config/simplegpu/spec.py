"""LayerSpec: a parsed, validated CustomLayer descriptor (SPEC section 2), as plain dataclasses.

The loader (config/loader.py, through checks.py) builds these; jit/ and runtime/ read them.
Nothing here touches XML or OpenCL. Every part keeps the `Location` it was written at, so later
stages (JIT, build, binding) can still report file:line.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..diagnostics import Location
from ..sources.source_text import SourceFile

FORMATS = ("BFYX", "BYXF", "YXFB", "FYXB", "ANY")


@dataclass(frozen=True)
class DefineSpec:
    name: str                # may carry its own value: "NUM 3"
    param: str | None        # name of the layer attribute that gives the value
    type: str | None         # None | "int" | "float" | "int[]" | "float[]" (others: as text)
    default: str | None
    location: Location


@dataclass(frozen=True)
class TensorBinding:
    arg_index: int
    kind: str                # "input" | "output"
    port_index: int
    format: str              # one of FORMATS, upper case
    location: Location
    shape: str | None = None  # optional output-shape formula list, e.g. "B,F,Y*2,X*2"


@dataclass(frozen=True)
class DataBinding:
    name: str                # name of a constant blob of the layer (a Const input in IR)
    arg_index: int
    location: Location


@dataclass(frozen=True)
class WorkSizesSpec:
    global_: tuple[str, ...] | None   # formula texts; None = default (element count of output 0)
    local: tuple[str, ...] | None     # None or () = let the driver choose
    dim: tuple[str, int]              # ("output", 0) | ("input", N)
    location: Location


@dataclass(frozen=True)
class LayerSpec:
    name: str                         # the layer type in the model
    type: str                         # "SimpleGPU"
    version: str
    entry: str
    sources: tuple[SourceFile, ...]
    defines: tuple[DefineSpec, ...]
    tensors: tuple[TensorBinding, ...]
    data: tuple[DataBinding, ...]
    compiler_options: tuple[str, ...]
    work_sizes: WorkSizesSpec
    location: Location                # the <CustomLayer> element
    config_path: str | None = None    # the config file (None when loaded from a string)
    # the options attribute of the first <CompilerOptions> that gives any (None: no options),
    # where a build that rejects the options is reported
    compiler_options_location: Location | None = None

    @property
    def kind(self) -> str:
        """The dialect: "SimpleGPU" (an MvclLayer says "MVCL")."""
        return "SimpleGPU"

    @property
    def inputs(self) -> tuple[TensorBinding, ...]:
        """Input tensor bindings, by port index."""
        return tuple(sorted((t for t in self.tensors if t.kind == "input"),
                            key=lambda t: t.port_index))

    @property
    def outputs(self) -> tuple[TensorBinding, ...]:
        """Output tensor bindings, by port index."""
        return tuple(sorted((t for t in self.tensors if t.kind == "output"),
                            key=lambda t: t.port_index))

    @property
    def data_in_arg_order(self) -> tuple[DataBinding, ...]:
        """Data bindings in kernel-argument order: the order in which the blobs follow the real
        inputs (INPUT<num_input_ports>, ...)."""
        return tuple(sorted(self.data, key=lambda d: d.arg_index))

    @property
    def num_input_ports(self) -> int:
        """Number of real (non-Data) inputs: highest bound input port + 1."""
        return max((t.port_index for t in self.inputs), default=-1) + 1

    @property
    def num_output_ports(self) -> int:
        return max((t.port_index for t in self.outputs), default=-1) + 1

    @property
    def num_args(self) -> int:
        return len(self.tensors) + len(self.data)

    @property
    def formula_params(self) -> tuple[str, ...]:
        """The parameters its WorkSizes and shape formulas may name: each Define's `param`
        (B, F, Y and X aside: those are the dims)."""
        return formula_params(self.defines)

    @property
    def options(self) -> str:
        """All CompilerOptions joined (OpenVINO reads only the first; we read all)."""
        return " ".join(o for o in self.compiler_options if o.strip())


def formula_params(defines) -> tuple[str, ...]:
    """The names of the Defines' params, in order, once each (B, F, Y, X aside)."""
    names: list[str] = []
    for d in defines:
        if d.param and d.param not in names and d.param.upper() not in ("B", "F", "Y", "X"):
            names.append(d.param)
    return tuple(names)
