"""`check`: run an OpenCL layer and its Python reference on the same seeded random inputs and
compare every output; exit 1 when one differs (a command for CI).

    check -c layer.xml -l reference.py [--layer NAME] [--shape 1x3x8x8[,1x1x8x8] ...]
          [--param k=v ...] [--data NAME=SHAPE|FILE.npy] [--rtol R] [--atol A] [--seed N]

The cases: each shape set (--shape, else a few defaults, every input of that shape) in BFYX,
then the first one padded in every format the descriptor allows (ANY: all four). The Python
layer receives the inputs, then the Data blobs (in the kernel's INPUT order), as dense arrays;
output shapes are its own `output_shapes`.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import numpy as np

from ...config.dialects import dialect_of
from .. import UsageError
from ..common import add_build_options, build_cache, non_negative_int, parse_params
from ..user_files.input_arrays import as_type, read_array
from .layers import add_config_options
from ..common import add_python_layers_option
from ..user_files.random_inputs import generator, random_array

DEFAULT_SHAPES = ((1, 4, 6, 8), (2, 8, 4, 10), (1, 16, 2, 2))
FORMATS = ("BFYX", "BYXF", "YXFB", "FYXB")
PAD = ((0, 1, 2, 1), (1, 0, 1, 3))        # lower, upper in B,F,Y,X: uneven on purpose
NO_PAD = ((0, 0, 0, 0), (0, 0, 0, 0))


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("check", help="compare an OpenCL layer with its Python reference",
                              description=__doc__.split("\n\n")[0],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_options(p)
    add_python_layers_option(p)
    p.add_argument("--layer", metavar="NAME", default=None,
                   help="the layer type (may be left out when the configs define one)")
    p.add_argument("--shape", action="append", default=[], metavar="1x3x8x8[,1x1x8x8]",
                   help="the input shapes of one case (one per input, comma-separated; one "
                        "shape for every input); repeatable. Default: a few shapes")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="a layer attribute, as text (the kernel's Define param, and the Python "
                        "layer's attribute)")
    p.add_argument("--data", action="append", default=[], metavar="NAME=SHAPE|FILE.npy",
                   help="a Data blob of the descriptor: random of SHAPE (such as 16), or an array")
    add_tolerance_options(p)
    p.add_argument("--seed", type=non_negative_int, default=0,
                   help="seed of the random inputs (0 or more)")
    add_build_options(p)
    return p


def add_tolerance_options(p: argparse.ArgumentParser, note: str = "") -> None:
    from ...runtime.checks.reference_check import DEFAULT_ATOL, DEFAULT_RTOL
    p.add_argument("--rtol", type=float, default=DEFAULT_RTOL,
                   help=f"relative tolerance{note} (default {DEFAULT_RTOL}, for float32)")
    p.add_argument("--atol", type=float, default=DEFAULT_ATOL,
                   help=f"absolute tolerance{note} (default {DEFAULT_ATOL})")


@dataclass(frozen=True)
class Case:
    shapes: tuple[tuple[int, ...], ...]     # per input
    format: str             # of the ANY tensors (a Tensor with a format of its own keeps it)
    padded: bool


def parse_shape_set(text: str, ports: int) -> tuple[tuple[int, ...], ...]:
    try:
        shapes = tuple(tuple(int(v) for v in part.lower().split("x"))
                       for part in text.split(","))
    except ValueError:
        raise UsageError(f"--shape {text!r} is not like 1x3x8x8 (or 1x3x8x8,1x1x8x8 for "
                         f"several inputs)") from None
    if any(not s or min(s) <= 0 for s in shapes):
        raise UsageError(f"--shape {text!r}: every dim must be a positive integer")
    if len(shapes) == 1:
        return shapes * ports
    if len(shapes) != ports:
        raise UsageError(f"--shape {text!r} gives {len(shapes)} shapes; the layer has {ports} "
                         f"input(s)")
    return shapes


def input_count(spec, params) -> int:
    """The layer's real inputs (an MVCL layer's variant for these attributes decides)."""
    from ...runtime.layers.dialects import runtime_of
    return runtime_of(spec).input_count(spec, params)


def cases_for(spec, shape_sets) -> list[Case]:
    """Each shape set plain, then the first one padded in every format the inputs allow (all
    four when every input Tensor is ANY; else the declared ones)."""
    any_format = all(t.format == "ANY" for t in spec.inputs)
    return ([Case(s, "BFYX", False) for s in shape_sets] +
            [Case(shape_sets[0], f, True) for f in (FORMATS if any_format else ("BFYX",))])


def data_blobs(spec, names: list[str], items, rng) -> dict[str, np.ndarray]:
    given = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise UsageError(f"--data {item!r} is not NAME=SHAPE or NAME=FILE.npy")
        given[name] = value
    from .run_layer import check_data_names
    check_data_names(spec.name, names, sorted(given), form="SHAPE (or FILE.npy)")
    blobs = {}
    for name in names:
        value = given[name]
        if value.endswith(".npy"):
            blobs[name] = as_type(read_array(value, f"data '{name}'"), np.float32,
                                  f"data '{name}' ({value})", "check")   # runs in float32
        else:
            blobs[name] = random_array(rng, parse_shape_set(value, 1)[0], np.float32)
    return blobs


def run(args) -> int:
    from ...jit.layer import parse_attr
    from ...runtime.device.device import Engine
    from ...runtime.layers.python_loader import load_python_layers
    from ...runtime.compile.one_layer import data_names
    from ...runtime.layers.registry import Registry
    from ..common import the_only_layer
    if not args.layers:
        raise UsageError("give the Python reference with -l reference.py")
    params = parse_params(args.param)
    from .config_files import refuse_models_as_configs
    refuse_models_as_configs(args.config)
    registry = Registry(Engine(args.device, cache=build_cache(args)))
    for d in registry.load(*args.config, allow_external_sources=args.allow_external_sources):
        print(d.render(), file=sys.stderr)              # a layer defined again (CL070), ...
    layer = the_only_layer(args.layer, registry.layer_types(),
                           {t: t for t in registry.layer_types()}, " ".join(args.config))
    references = {d.type: d for path in args.layers for d in load_python_layers(path)}
    if layer not in references:
        raise UsageError(f"{', '.join(args.layers)} has no Python layer of type '{layer}' (it "
                         f"defines {', '.join(sorted(references)) or 'none'})")
    ref, spec = references[layer], registry.spec(layer)
    ports = input_count(spec, params)
    shape_sets = [parse_shape_set(s, ports) for s in args.shape] or \
        [(s,) * ports for s in DEFAULT_SHAPES]
    data = data_blobs(spec, data_names(spec, params), args.data, generator(args.seed))
    attrs = {a.name: parse_attr(a, params.get(a.name), layer, layer) for a in ref.attributes}

    loc = spec.location
    print(f"check {layer} ({loc.file}:{loc.line}) against {ref.method('execute')}; "
          f"rtol {args.rtol:g}, atol {args.atol:g}, seed {args.seed}")
    print(f"{'case':>4}  {'inputs':<22}  {'format':<8}  {'padded':<6}  {'max abs err':>11}  "
          f"{'max rel err':>11}  {'worst at':<20}  result")
    failed = []
    cases = cases_for(spec, shape_sets) if dialect_of(spec).one_kernel else \
        [Case(s, "BFYX", False) for s in shape_sets]    # a network hands MVCL kernels dense BFYX
    for k, case in enumerate(cases, 1):
        rng = generator(args.seed, k)   # one per case, each input drawn in turn: all differ
        inputs = [random_array(rng, s, np.float32) for s in case.shapes]
        result, outputs, fmt = run_case(registry, spec, ref, case, inputs, data, params, attrs,
                                        args.rtol, args.atol)
        shapes = ",".join("x".join(map(str, s)) for s in case.shapes)
        status = "ok" if result.ok else \
            f"DIFFERS{f' ({result.problem})' if result.problem else ''}"
        worst = result.where() + (f" out{result.output}" if outputs > 1 else "")
        print(f"{k:>4}  {shapes:<22}  {fmt.lower():<8}  {'yes' if case.padded else 'no':<6}  "
              f"{result.max_abs:>11.3e}  {result.max_rel:>11.3e}  {worst:<20}  {status}")
        if not result.ok:
            failed.append(k)
    if failed:
        print(f"{len(failed)} of {len(cases)} cases differ (cases {', '.join(map(str, failed))})")
        return 1
    print(f"{len(cases)} cases: every output matches the reference")
    return 0


def run_case(registry, spec, ref, case: Case, inputs, data, params, attrs, rtol, atol):
    """(the comparison, the number of outputs, input 0's format) of one case: the kernel on
    tensors in the case's format and padding, the reference on the dense arrays."""
    from ...errors import BindingError
    from ...jit.tensor import TensorDesc
    from ...runtime.checks.reference_check import compare_all, run_reference
    from ...runtime.compile.one_layer import run_layer
    from .run_layer import check_output_shapes
    if not dialect_of(spec).one_kernel:     # no one bound kernel: a one-layer network runs it
        expected = run_reference(ref, [*inputs, *data.values()], attrs,
                                 f"layer type '{spec.name}'")
        got = run_layer(registry, spec.name, inputs, params, data, [e.shape for e in expected])
        return compare_all(got, expected, rtol, atol), len(expected), "BFYX"
    lower, upper = PAD if case.padded else NO_PAD
    declared = {t.port_index: t.format for t in spec.inputs}

    def format_of(port: int) -> str:
        fmt = declared.get(port, "ANY")
        return case.format if fmt == "ANY" else fmt

    in_descs = [TensorDesc(s, "f32", format_of(i), lower, upper)
                for i, s in enumerate(case.shapes)]
    expected = run_reference(ref, [*inputs, *data.values()], attrs, f"layer type '{spec.name}'")
    out_declared = {t.port_index: t.format for t in spec.outputs}
    out_descs = [TensorDesc(e.shape, e.dtype, in_descs[0].format
                            if out_declared.get(j, "ANY") == "ANY" else out_declared[j],
                            lower, upper) for j, e in enumerate(expected)]
    try:
        check_output_shapes(spec, [d.plain() for d in in_descs], data,
                            [d.shape for d in out_descs], given_as="the reference's shape",
                            params=params)
    except UsageError as e:     # the descriptor and the reference disagree: a mismatch
        raise BindingError(f"the reference's output shapes differ from the descriptor's: "
                           f"{e}") from None
    bound = registry.bind(spec.name, in_descs, out_descs, params=params, data=data)
    got = bound(*inputs)
    got = got if isinstance(got, list) else [got]
    return compare_all(got, expected, rtol, atol), len(expected), in_descs[0].format
