"""`customlayers validate CONFIG|DIR|SOURCE.cl...`: every problem in every config, at its
file:line:col.

Exit status: 0 no errors, 1 errors (warnings too with --strict), 2 a config file cannot be read
or the arguments are wrong (a model given as a config among them). With --format json, sarif or
github, stdout holds exactly that output (for CI tools) and the summary goes to stderr.
Which files the arguments name (folders, .cl sources): config_files.py.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys


from ...config import ConfigSet, Diagnostic, load_configs
from ...config.diagnostics import ERROR, WARNING, Location
from ..common import (add_build_options, add_kernel_check_options, build_cache,
                     check_bounds_note)
from .config_files import expand
from .diagnostic_formats import FORMATS, render

DEFAULT_INPUT_SHAPE = (1, 3, 8, 8)


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "validate", help="check layer configs (and optionally build their kernels)",
        description="Check CustomLayer config files: structure (JSON Schema), values, "
                    "sources, defines, work-size formulas. Every problem is listed as "
                    "file:line:col: severity[CODE]: message (layer NAME); a problem of a whole file "
                    "(one that cannot be read) as file: severity[CODE]: message.")
    p.add_argument("configs", nargs="+", metavar="CONFIG",
                   help="config XML files; folders (every *.xml with a <CustomLayer> under "
                        "them); .cl sources (the configs under the current folder that name "
                        "them)")
    p.add_argument("--format", choices=FORMATS, default="text",
                   help="text (default); json: an array of {file, line, column, severity, "
                        "code, layer, message}; sarif: a SARIF 2.1.0 log (code scanning); "
                        "github: GitHub Actions annotations (::error file=...)")
    p.add_argument("--strict", action="store_true", help="treat warnings as errors")
    p.add_argument("--allow-external-sources", action="store_true",
                   help="allow Source files outside the config file's directory tree")
    p.add_argument("--compile", action="store_true",
                   help="also build every kernel on an OpenCL device, for representative "
                        "shapes (default 1x3x8x8 f32 per input; outputs like input 0)")
    p.add_argument("--shape", action="append", default=[], metavar="LAYER=SHAPE[,SHAPE...]",
                   help="input shapes for --compile, e.g. MyLayer=1x16x32x32 (one per input, "
                        "comma-separated; each may add :f16, :byxf, ...)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="a layer attribute for --compile, kept as text (MVCL layers: <Where> "
                        "and Scalars read attributes; default: what each variant's <Where> "
                        "asks, else 1)")
    add_build_options(p)
    add_kernel_check_options(p)
    return p


def _parse_shapes(items: list[str]) -> dict[str, list]:
    """{layer: [(TensorDesc, whether the item names its element type: where it does not, the
    kernel's declared type, else f32, is taken)]} from the --shape items."""
    from ...errors import TensorError
    from ...jit.tensor import parse_tensor_arg, tensor_arg_gives_dtype
    from .. import UsageError
    shapes: dict[str, list] = {}
    for item in items:
        layer, sep, text = item.partition("=")
        if not sep or not layer.strip() or not text.strip():
            raise UsageError(f"--shape {item!r} is not LAYER=1x16x32x32")
        try:
            shapes[layer.strip()] = [(parse_tensor_arg(t), tensor_arg_gives_dtype(t))
                                     for t in text.split(",")]
        except TensorError as e:
            raise UsageError(f"--shape {item!r}: {e}") from e
    return shapes


def _compile_all(configs: ConfigSet, args) -> list[Diagnostic]:
    """Bind every valid layer through the one layer-compile pipeline (Registry.bind) on the
    device, as a run would; its errors become Diagnostics here, build errors at the user's .cl
    lines."""
    from ...runtime.device.device import Engine
    from ...runtime.layers.registry import Registry
    from .. import UsageError
    shapes = _parse_shapes(args.shape)
    unknown = sorted(set(shapes) - set(configs.layers))
    if unknown:
        known = ", ".join(sorted(configs.layers)) or "none"
        raise UsageError(f"--shape names layer {', '.join(unknown)}, which is not a valid layer "
                         f"of these configs (valid: {known})")
    from ..common import parse_params
    from .dialects import cli_of
    params = parse_params(args.param)
    registry = Registry(Engine(args.device, cache=build_cache(args)), configs)
    # a definition that a later one of its name replaced (two files define one layer) is built
    # too, in a registry of its own: its errors are the user's as much as the later one's
    layers = [(registry, spec) for spec in configs.layers.values()] + [
        (Registry(registry.engine, ConfigSet(layers={spec.name: spec})), spec)
        for spec in configs.replaced]
    found: list[Diagnostic] = []
    for owner, spec in layers:
        found += cli_of(spec).compile_diagnostics(owner, spec, shapes.get(spec.name), params,
                                                  args)
    return found


def compile_diagnostics(registry, name: str, given: list, params: dict | None = None, *,
                        check_bounds: bool = False, sanitize: bool = False) -> list[Diagnostic]:
    """Bind layer `name` of `registry` for the `given` input tensors (the defaults of
    _compile_inputs where fewer are given): every error as Diagnostics, and the compiler's
    warnings of a program that builds (CL082). With `check_bounds`/`sanitize`, the bound kernel
    also runs once on seeded random inputs with guard zones (CL086) or on Oclgrind (CL087)."""
    from ...errors import CustomLayersError
    from ...runtime.layers.registry import PREPARE_CODE
    from .build_diagnostics import error_diagnostics, warning_diagnostics
    spec = registry.spec(name)
    inputs, data = _compile_inputs(spec, given, params or {})
    try:
        bound = registry.bind(name, inputs, None, params or {}, data, strict_params=False)
    except CustomLayersError as e:
        if e.code == PREPARE_CODE:      # shapes, formulas, defines that fail for these inputs
            shown = ", ".join(d.describe() for d in inputs) or "no inputs"
            return [Diagnostic.at(e.location or spec.location, ERROR, PREPARE_CODE,
                                  f"cannot prepare the kernel for inputs {shown}: "
                                  f"{e.describe()}", name)]
        return error_diagnostics(e, spec.location, name)
    found = warning_diagnostics(bound.build_warnings, name)
    if check_bounds or sanitize:
        try:       # a layer whose run fails is one more finding: the other files still report
            found += kernel_check_diagnostics(bound, spec, check_bounds, sanitize)
        except CustomLayersError as e:
            found += error_diagnostics(e, spec.location, name)
    return found


def kernel_check_diagnostics(bound, spec, check_bounds: bool, sanitize: bool) -> list[Diagnostic]:
    """Run the bound kernel once on seeded random inputs (and its Data blobs), on Oclgrind
    first (its findings at the user's .cl lines, CL087), then natively with guard zones
    (CL086, at the <WorkSizes> where elements are left unwritten or written past an output,
    else at the layer)."""
    from ...runtime.checks.bounds_process import check_kernel_bounds
    from ...runtime.checks.sanitize import sanitize_kernel
    from ..user_files.random_inputs import generator, random_array
    rng = generator(0)      # one for the launch, each input and blob drawn in turn
    inputs = [random_array(rng, d.shape, d.np_dtype, high=8) for d in bound.inputs]
    data = {n: random_array(rng, d.shape, d.np_dtype, high=8)
            for n, d in zip(bound.data_names, bound.data_descs)}
    if sanitize:
        findings = sanitize_kernel(bound, *inputs, **data)
        if findings:
            return [_finding_diagnostic(f, spec) for f in findings]
    if not check_bounds:
        return []
    _, problems = check_kernel_bounds(bound, *inputs, **data)
    return [Diagnostic.at(spec.work_sizes.location if p.work_sizes else spec.location, ERROR,
                          "CL086",
                          f"{p.tensor}: {p.message} (inputs "
                          f"{', '.join(d.describe() for d in bound.inputs)})", spec.name)
            for p in problems]



def _finding_diagnostic(finding, spec) -> Diagnostic:
    file, line, column = spec.location.file, spec.location.line, spec.location.column
    parts = finding.place.rsplit(":", 2) if finding.place else []
    if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
        file, line, column = parts[0], int(parts[1]), int(parts[2])
    elif len(parts) >= 2 and parts[-1].isdigit():
        file, line, column = ":".join(parts[:-1]), int(parts[-1]), 1
    return Diagnostic(file, line, column, ERROR, "CL087", f"Oclgrind: {finding.message}",
                      spec.name)


def _compile_inputs(spec, given: list, params: dict) -> tuple[list, dict]:
    """The tensors to compile a layer for: the --shape tensors of its real inputs (missing
    ones like the first, else DEFAULT_INPUT_SHAPE), then its Data blobs' (missing ones
    16-element blobs), given as descriptions only (no values are needed to build). An element
    type --shape does not name is the one the kernel declares for the argument (an `int*`
    input compiles and runs as i32, as `run-layer` takes it), else f32."""
    from dataclasses import replace

    from ...dtypes import from_numpy
    from ...jit.tensor import TensorDesc
    from ...runtime.layers.layer_input_types import KEEP, declared_types
    declared_inputs, declared_data = declared_types(spec, params)

    def typed(desc, named: bool, declared):
        if named or declared is None or declared is KEEP:
            return desc
        return replace(desc, dtype=from_numpy(declared))
    # --shape gives (desc, whether it names a type); a caller's TensorDesc names its type
    given = [g if isinstance(g, tuple) else (g, True) for g in given]
    first = given[0][0] if given else TensorDesc(DEFAULT_INPUT_SHAPE)
    n = spec.num_input_ports
    inputs = [typed(*(given[port] if port < len(given) else (first, False)),
                    declared_inputs.get(port)) for port in range(n)]
    data = {d.name: typed(*(given[n + i] if n + i < len(given) else (TensorDesc((16,)), False)),
                          declared_data.get(d.name))
            for i, d in enumerate(spec.data_in_arg_order)}
    return inputs, data


def _summary(files: int, configs: ConfigSet, diags: list[Diagnostic]) -> str:
    """'N files, M layers: E errors, W warnings'; `files` counts every config file named
    (through a folder or a .cl too), read or not."""
    def n(count: int, word: str) -> str:
        return f"{count} {word}{'' if count == 1 else 's'}"
    errors = sum(d.severity == ERROR for d in diags)
    warnings = sum(d.severity == WARNING for d in diags)
    return (f"{n(files, 'file')}, {n(len(configs.definitions), 'layer')}: "
            f"{n(errors, 'error')}, {n(warnings, 'warning')}")


def run(args) -> int:
    from .. import package_version
    targets = expand(args.configs)
    for note in targets.notes:
        print(f"note: {note}", file=sys.stderr)
    configs = ConfigSet()
    unreadable = [Diagnostic.at(Location(path, 0, 1), ERROR, "CL000",
                                f"cannot read the source: {why}")
                  for path, why in targets.unreadable]
    for path in targets.configs:
        try:
            load_configs([path], allow_external_sources=args.allow_external_sources,
                         into=configs)
        except OSError as e:
            unreadable.append(Diagnostic.at(Location(path, 0, 1), ERROR, "CL000",
                                            f"cannot read the config: {e.strerror or e}"))
    diags = unreadable + list(configs.diagnostics)
    if args.compile and (configs.layers or configs.replaced):
        diags += _compile_all(configs, args)
        if args.check_bounds:
            check_bounds_note(args)
    if args.strict:
        diags = [dataclasses.replace(d, severity=ERROR) if d.severity == WARNING else d
                 for d in diags]
    summary = _summary(len(targets.configs), configs, diags)
    output = render(args.format, diags, package_version())
    if output or args.format in ("json", "sarif"):
        print(output)
    # for the machine formats stdout holds only their output
    print(summary, file=sys.stdout if args.format == "text" else sys.stderr)
    if unreadable:
        return 2
    return 1 if any(d.severity == ERROR for d in diags) else 0
