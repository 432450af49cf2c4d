"""The layer-compile pipeline of MVCL layers: the stages of one variant -> checked, built programs.

    built = compile_mvcl(engine, layer, stages, attrs, inputs, outputs)

It is Registry.bind's counterpart for the VPU dialect, and like it the one path: the network's
MVCL adapter (mvcl.py) and `validate --compile` both come through here. In order: every stage's
program is generated (config/mvcl_program.py: work sizes, scalars, buffer sizes), a kernel that
computes in `half` is refused on a device without cl_khr_fp16 (before building, where the
compiler's own message would be obscure), local sizes are checked against the device, and each
program is built through the program cache, its entry found and its argument count compared.
Every error carries the descriptor's place (`.at(location, code, layer)`) so the CLI can turn
it into a Diagnostic at the user's line.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import re

import pyopencl as cl

from ...config.diagnostics import Location
from ...config.kernel_signature import clean_source
from ...config.mvcl_program import MvclProgram, TensorShape, generate_mvcl_stages
from ...config.mvcl_spec import MvclLayer, MvclSpec
from ...errors import BindingError, CustomLayersError, KernelBuildError
from ...jit.tensor import TensorDesc
from ..device.limits import check_kernel_work_group, check_local_size, has_fp16

# the codes of validate --compile (config/codes.py), shared with Registry.bind where they mean
# the same: tensors/formulas/attributes that do not work, a program the compiler refuses, an
# entry that is no kernel of the sources
PREPARE_CODE = "CL081"
BUILD_CODE = "CL080"
ENTRY_CODE = "CL044"
FP16_CODE = "CL118"
_HALF = re.compile(r"\bhalf[0-9]*\b")     # as config/mvcl_program.py finds `uses_half`


@dataclass(frozen=True)
class BuiltStage:
    """One stage ready to launch: its generated program and the compiler's warnings (mapped to
    the user's lines; '' when none)."""
    spec: MvclSpec
    program: MvclProgram
    warnings: str = ""


def select_stages(layer: MvclLayer, attrs: Mapping[str, str]) -> list[MvclSpec]:
    """The stages of the variant whose <Where> matches `attrs` (located BindingError if none or
    several do)."""
    try:
        return layer.select(attrs)
    except CustomLayersError as e:
        raise e.at(layer.location, PREPARE_CODE, layer.name)


def generate_programs(layer: MvclLayer, stages: Sequence[MvclSpec], attrs: Mapping[str, str],
                      inputs: Sequence[TensorDesc],
                      outputs: Sequence[TensorDesc]) -> list[MvclProgram]:
    """Every stage's program for these tensors (the layer's real inputs and its outputs, by
    port) and attributes; errors located at the layer."""
    try:
        return generate_mvcl_stages(stages, {k: str(v) for k, v in attrs.items()},
                                    [TensorShape(d.dims, d.dtype) for d in inputs],
                                    [TensorShape(d.dims, d.dtype) for d in outputs])
    except CustomLayersError as e:
        raise e.at(stages[0].location if stages else layer.location, PREPARE_CODE, layer.name)


def first_half_use(spec: MvclSpec) -> Location | None:
    """Where the stage's sources first use `half` (comments and directives aside), or None."""
    for source in spec.sources:
        for n, line in enumerate(clean_source(source.text).split("\n"), start=1):
            m = _HALF.search(line)
            if m:
                origin = source.origin(n)     # an included file's line, where expanded
                if origin is not None:
                    return Location(origin[0], origin[1], m.start() + 1)
    return None


def check_fp16(layer: MvclLayer, spec: MvclSpec, program: MvclProgram, device) -> None:
    """A program that computes in half needs cl_khr_fp16: say so before the compiler does
    (its own message, when it gives one, names no extension). Reported at the first use of
    `half` in the user's source."""
    if not program.uses_half or has_fp16(device):
        return
    at = first_half_use(spec) or spec.kernel_location
    raise BindingError(
        f"MVCL layer '{layer.name}' stage {spec.stage}: the program of kernel '{spec.entry}' "
        f"computes in half ({at}), which needs the cl_khr_fp16 extension; device "
        f"'{device.name.strip()}' does not have it (write the kernels of this source in float, "
        f"or run the layer on a device with cl_khr_fp16)").at(at, FP16_CODE, layer.name)


def stage_label(layer: MvclLayer, spec: MvclSpec, stage_count: int) -> str:
    """How builds and profiles name a stage: the layer, and the stage when there are several."""
    return f"{layer.name}/stage{spec.stage}" if stage_count > 1 else layer.name


def build_stage(engine, layer: MvclLayer, spec: MvclSpec, program: MvclProgram,
                label: str) -> BuiltStage:
    """Build one stage's program through the cache and check its kernel against the device."""
    device = engine.device
    check_fp16(layer, spec, program, device)
    # limits.py reads name, entry and work_sizes (global_, local, dim, location): an MvclSpec
    # has the same fields as a LayerSpec there
    check_local_size(spec, program.global_size, program.local_size, device)
    try:
        built, warnings = engine.cache.build_with_warnings(
            engine.context, device, program.text, program.options,
            line_map=program.line_map, label=label)
    except KernelBuildError as e:
        raise e.at(spec.kernel_location, BUILD_CODE, layer.name)
    try:
        kernel = cl.Kernel(built, spec.entry)
    except cl.Error:
        names = built.get_info(cl.program_info.KERNEL_NAMES) or ""
        found = ", ".join(n for n in names.split(";") if n) or "none"
        raise BindingError(f"MVCL layer '{layer.name}' stage {spec.stage}: entry "
                           f"'{spec.entry}' ({spec.kernel_location}) is not a kernel of its "
                           f"sources; kernels found: {found}"
                           ).at(spec.kernel_location, ENTRY_CODE, layer.name) from None
    if kernel.num_args != len(program.args):
        # the loader read the parameter list from the text; macros can make the compiler's differ
        bound = ", ".join(a.arg_name for a in program.args)
        raise BindingError(f"MVCL layer '{layer.name}' stage {spec.stage}: kernel "
                           f"'{spec.entry}' ({spec.kernel_location}) takes {kernel.num_args} "
                           f"argument(s) once compiled, but the descriptor binds "
                           f"{len(program.args)} ({bound})"
                           ).at(spec.kernel_location, BUILD_CODE, layer.name)
    check_kernel_work_group(spec, program.local_size, kernel, device)
    return BuiltStage(spec, program, warnings)


def compile_mvcl(engine, layer: MvclLayer, stages: Sequence[MvclSpec], attrs: Mapping[str, str],
                 inputs: Sequence[TensorDesc],
                 outputs: Sequence[TensorDesc]) -> list[BuiltStage]:
    """Generate, check and build every stage (see the module docstring)."""
    programs = generate_programs(layer, stages, attrs, inputs, outputs)
    return [build_stage(engine, layer, spec, program, stage_label(layer, spec, len(stages)))
            for spec, program in zip(stages, programs)]
