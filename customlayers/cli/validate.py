"""`customlayers validate CONFIG...`: every problem in every config, at its file:line:col.

Exit status: 0 no errors, 1 errors (warnings too with --strict), 2 a config file cannot be read
or the arguments are wrong. With --format json, stdout is exactly one JSON array (for CI tools)
and the summary goes to stderr.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from ..config import ConfigSet, Diagnostic, load_configs
from ..config.diagnostics import ERROR, INFO, WARNING, Location
from .common import add_build_options, apply_build_options

DEFAULT_INPUT_SHAPE = (1, 3, 8, 8)


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "validate", help="check layer configs (and optionally build their kernels)",
        description="Check CustomLayer config files: structure (JSON Schema), values, "
                    "sources, defines, work-size formulas. Every problem is listed as "
                    "file:line:col: severity[CODE]: message (layer NAME).")
    p.add_argument("configs", nargs="+", metavar="CONFIG", help="config XML files")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text (default) or a JSON array of {file, line, column, severity, "
                        "code, layer, message}")
    p.add_argument("--strict", action="store_true", help="treat warnings as errors")
    p.add_argument("--allow-external-sources", action="store_true",
                   help="allow Source files outside the config file's directory tree")
    p.add_argument("--compile", action="store_true",
                   help="also build every kernel on an OpenCL device, for representative "
                        "shapes (default 1x3x8x8 f32 per input; outputs like input 0)")
    p.add_argument("--shape", action="append", default=[], metavar="LAYER=SHAPE[,SHAPE...]",
                   help="input shapes for --compile, e.g. MyLayer=1x16x32x32 (one per input, "
                        "comma-separated; each may add :f16, :byxf, ...)")
    add_build_options(p)
    return p


def _parse_shapes(items: list[str]) -> dict[str, list]:
    from ..errors import TensorError
    from ..jit.tensor import parse_tensor_arg
    from . import UsageError
    shapes: dict[str, list] = {}
    for item in items:
        layer, sep, text = item.partition("=")
        if not sep or not layer.strip() or not text.strip():
            raise UsageError(f"--shape {item!r} is not LAYER=1x16x32x32")
        try:
            shapes[layer.strip()] = [parse_tensor_arg(t) for t in text.split(",")]
        except TensorError as e:
            raise UsageError(f"--shape {item!r}: {e}") from e
    return shapes


def _compile_all(configs: ConfigSet, args) -> list[Diagnostic]:
    """Build every valid layer; build errors come back at the user's .cl lines."""
    from ..errors import CustomLayersError
    from ..jit.build import compile_check
    from ..jit.tensor import TensorDesc
    from ..runtime.device import select_device
    from . import UsageError
    shapes = _parse_shapes(args.shape)
    unknown = sorted(set(shapes) - set(configs.layers))
    if unknown:
        known = ", ".join(sorted(configs.layers)) or "none"
        raise UsageError(f"--shape names layer {', '.join(unknown)}, which is not a valid layer "
                         f"of these configs (valid: {known})")
    device = select_device(args.device)
    found: list[Diagnostic] = []
    for name, spec in configs.layers.items():
        if spec.kind == "MVCL":
            # its programs need the layer's attributes (Scalars, Where); built by the runtime's
            # MVCL adapter, which is not there yet
            found.append(Diagnostic.at(spec.location, INFO, "CL116",
                                       "MVCL layers are checked without building: "
                                       "--compile builds SimpleGPU layers only", name))
            continue
        inputs = shapes.get(name) or [TensorDesc(DEFAULT_INPUT_SHAPE)] * spec.num_input_ports
        try:
            found += compile_check(spec, inputs, device)
        except CustomLayersError as e:  # shapes, formulas, defines that fail for these inputs
            loc = spec.location
            shown = ", ".join(d.describe() for d in inputs) or "no inputs"
            found.append(Diagnostic.at(loc, ERROR, "CL081",
                                       f"cannot prepare the kernel for inputs {shown}: {e}", name))
    return found


def _summary(files: int, configs: ConfigSet, diags: list[Diagnostic]) -> str:
    """'N files, M layers: E errors, W warnings'; `files` counts every argument, read or not."""
    def n(count: int, word: str) -> str:
        return f"{count} {word}{'' if count == 1 else 's'}"
    errors = sum(d.severity == ERROR for d in diags)
    warnings = sum(d.severity == WARNING for d in diags)
    return (f"{n(files, 'file')}, {n(len(configs.definitions), 'layer')}: "
            f"{n(errors, 'error')}, {n(warnings, 'warning')}")


def run(args) -> int:
    apply_build_options(args)
    configs = ConfigSet()
    unreadable: list[Diagnostic] = []
    for path in args.configs:
        try:
            load_configs([path], allow_external_sources=args.allow_external_sources,
                         into=configs)
        except OSError as e:
            unreadable.append(Diagnostic.at(Location(path, 0, 1), ERROR, "CL000",
                                            f"cannot read the config: {e.strerror or e}"))
    diags = unreadable + list(configs.diagnostics)
    if args.compile and configs.layers:
        diags += _compile_all(configs, args)
    if args.strict:
        diags = [dataclasses.replace(d, severity=ERROR) if d.severity == WARNING else d
                 for d in diags]
    summary = _summary(len(args.configs), configs, diags)
    if args.format == "json":
        print(json.dumps([d.to_json() for d in diags], indent=2))
        print(summary, file=sys.stderr)
    else:
        for d in diags:
            print(d.render())
        print(summary)
    if unreadable:
        return 2
    return 1 if any(d.severity == ERROR for d in diags) else 0
