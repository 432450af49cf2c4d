"""`run-layer`: run one custom layer on .npy inputs and write its output.

    run-layer -c CONFIG --layer NAME -i in0.npy [-i in1.npy] [--data NAME=blob.npy]
              [--param k=v ...] [--output-shape 1x1x8x8 ...] -o out.npy [-d DEVICE]
    run-layer -l layers.py --layer NAME -i in0.npy [--param k=v ...] -o out.npy

With -l, a layer type that the Python module defines runs its `execute` on the host (it
replaces a config's layer of the same type, as in a model).

One output is written as .npy; several as .npz (output0, output1, ...). The file is written to a
temporary name and renamed, so an error never leaves a half-written output.
"""
from __future__ import annotations

import argparse
import sys

from ...config.dialects import dialect_of
from ...config.simplegpu.params import unused_params, unused_params_message
from ...errors import KernelWriteError
from .. import UsageError
from ..common import (add_build_options, add_kernel_check_options, build_cache,
                     check_bounds_note, kernel_checks_asked, parse_params,
                     report_kernel_problems, the_only_layer, warn_if_not_finite)
from .config_files import refuse_models_as_configs
from ..user_files.input_arrays import read_array
from ..user_files.output import check_array_count, check_output_path, write_arrays_atomically
from .layers import add_config_options
from ..common import add_python_layers_option


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("run-layer", help="run one custom layer on .npy inputs",
                              description=__doc__.split("\n\n")[0],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_options(p, required=False)
    add_python_layers_option(p)
    p.add_argument("--layer", default=None, metavar="NAME",
                   help="the layer type to run (optional when the configs define one layer)")
    p.add_argument("-i", "--input", action="append", required=True, metavar="FILE.npy",
                   help="input port 0, 1, ... in order, each run in the type the layer takes "
                        "(its kernel's declared type, else float: an integer or bool array is "
                        "converted, with a note; float64 runs as float32)")
    p.add_argument("--data", action="append", default=[], metavar="NAME=FILE.npy",
                   help="a constant blob for the layer's <Data name=NAME>")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="a layer attribute (the value of Define param=KEY), kept as text")
    p.add_argument("--output-shape", action="append", default=[], metavar="1x1x8x8",
                   help="shape of output 0, 1, ... (default: the descriptor's shape formula, "
                        "which a given shape must agree with; else input 0's shape); required "
                        "for an MVCL layer, which has no shape formula")
    p.add_argument("-o", "--output", required=True, metavar="OUT.npy",
                   help="where to write the result (.npz for several outputs)")
    add_build_options(p)
    add_kernel_check_options(p)
    return p


def layer_arrays(layer: str, input_paths, data_paths, declared=({}, {})) -> tuple[list, dict]:
    """The input arrays and Data blobs, each in the element type layer `layer` takes for it
    (runtime/layers/layer_input_types.py: `declared` by its kernel, {port: dtype} and {blob: dtype},
    else float): the layer is never compiled for the type of a file (an int32 .npy made a float
    layer integer). A conversion is said on stderr, as `run` says one for a model's input."""
    from ...runtime.layers.layer_input_types import type_to_take
    from ..user_files.input_arrays import as_type
    ports, blobs = declared

    def read(path, what, dtype):
        array = read_array(path, what)
        return as_type(array, type_to_take(dtype, array.dtype), f"{what} ({path})",
                       f"layer '{layer}'")

    inputs = [read(p, f"input {i}", ports.get(i)) for i, p in enumerate(input_paths)]
    data = {name: read(p, f"data '{name}'", blobs.get(name)) for name, p in data_paths.items()}
    return inputs, data


def kernel_arrays(spec, params, input_paths, data_paths) -> tuple[list, dict]:
    from ...runtime.layers.layer_input_types import declared_types
    return layer_arrays(spec.name, input_paths, data_paths, declared_types(spec, params))


def wrote_line(who: str, outputs, path: str) -> str:
    """'ReLU on DEVICE: wrote 1x3x8x8 to y.npy' (a 0-d output is named as one, not as '')."""
    shapes = ", ".join("x".join(map(str, a.shape)) if a.ndim else "a 0-d array"
                       for a in outputs)
    return f"{who}: wrote {shapes} to {path}"


def input_descs(inputs, paths) -> list:
    """The inputs' descriptions as the kernel sees them; a shape it cannot take names its
    file (the TensorError alone says only the shape)."""
    from ...errors import TensorError
    from ...jit.tensor import TensorDesc
    descs = []
    for i, (array, path) in enumerate(zip(inputs, paths)):
        try:
            desc = TensorDesc(array.shape, array.dtype)
            desc.dims       # the B,F,Y,X view: a rank over 4 is refused here
        except TensorError as e:
            raise TensorError(f"input {i} ({path}): {e}") from None
        descs.append(desc)
    return descs


def note_default_output_shapes(spec, in_descs, out_shapes) -> None:
    """Say on stderr which output takes input 0's shape because the layer has no shape formula
    for it and no --output-shape was given: a layer whose output has another shape (ReorgYolo)
    would otherwise run with a wrong one and say nothing."""
    import sys
    if out_shapes:
        return
    shown = "x".join(map(str, in_descs[0].shape)) if in_descs[0].shape else "() (0-d)"
    for t in spec.outputs:
        if not t.shape:
            print(f"note: output {t.port_index} of layer '{spec.name}' runs with input 0's shape "
                  f"{shown}: the layer has no shape formula for it ({t.location}); give "
                  f"--output-shape if its output has another shape", file=sys.stderr)


def parse_shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(v) for v in text.lower().split("x"))
    except ValueError:
        raise UsageError(f"--output-shape {text!r} is not like 1x3x224x224") from None
    if not shape or any(d <= 0 for d in shape):
        raise UsageError(f"--output-shape {text!r}: every dim must be a positive integer")
    return shape


def parse_data_items(items) -> dict[str, str]:
    result: dict[str, str] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"--data {item!r} is not NAME=FILE.npy")
        result[name] = path
    return result


def check_output_shapes(spec, in_descs, data, out_shapes,
                        given_as: str = "--output-shape", params=None) -> None:
    """An --output-shape must agree with its output Tensor's `shape` formula, where there is
    one: the kernel is written for the formula's shape, and a smaller buffer would let it write
    past the end. The formula is evaluated as binding does (jit.bindings.kernel_tensors, which
    the registry calls), so the two cannot disagree."""
    from ...jit.bindings import kernel_tensors
    from ...jit.tensor import TensorDesc
    from ...runtime.execute.kernel import data_descs_and_values
    formulas = {t.port_index: t for t in spec.outputs if t.shape}
    if not out_shapes or not formulas:
        return
    data_descs, _ = data_descs_and_values(spec, data)
    _, by_formula = kernel_tensors(spec, in_descs, None, data_descs, params)
    for port, given in enumerate(out_shapes):
        binding = formulas.get(port)
        # equal DIMS (trailing 1s aside) are the same tensor to the kernel
        if binding is None or TensorDesc(given).dims == by_formula[port].dims:
            continue
        shown = "x".join(map(str, by_formula[port].shape))
        fix = f"; give {shown} or leave --output-shape out" if given_as == "--output-shape" \
            else ""
        raise UsageError(f"{given_as} {'x'.join(map(str, given))} for output {port} "
                         f"disagrees with the shape formula '{binding.shape}' of layer "
                         f"'{spec.name}' ({binding.location}), which gives {shown} for these "
                         f"inputs{fix}")


def run(args) -> int:
    from ...jit.tensor import TensorDesc
    from ...runtime.device.device import Engine
    from ...runtime.layers.registry import Registry
    params = parse_params(args.param)
    data_paths = parse_data_items(args.data)
    out_shapes = [parse_shape(s) for s in args.output_shape]
    check_output_path(args.output)
    refuse_models_as_configs(args.config)
    if not args.config and not args.layers:
        raise UsageError("give the layer's config with -c (or its Python layer with -l)")
    registry = Registry(Engine(args.device, cache=build_cache(args)))
    loaded = [registry.load(*args.config, allow_external_sources=args.allow_external_sources)
              ] if args.config else []
    loaded += [registry.load_python(path) for path in args.layers]
    for d in (d for diags in loaded for d in diags):   # a layer defined again (CL070), ...
        print(d.render(), file=sys.stderr)
    if args.layer in registry.python_layer_types():
        return run_python_layer(args, registry.python_layer(args.layer), params, data_paths,
                                out_shapes)
    configs = registry.configs
    name = args.layer or the_only_layer(None, [n for n, _ in configs.definitions],
                                        configs.layers, ", ".join(args.config))
    spec = registry.spec(name)
    if not dialect_of(spec).one_kernel:
        return _run_alone(registry, spec, args, params, data_paths, out_shapes)
    unused = unused_params(spec, params)
    if unused:  # an ignored parameter would run the layer with its default: a wrong number
        raise UsageError(unused_params_message(spec, unused))
    if out_shapes and len(out_shapes) != spec.num_output_ports:
        raise UsageError(f"layer '{spec.name}' has {spec.num_output_ports} output(s), "
                         f"{len(out_shapes)} --output-shape given")
    check_array_count(args.output, spec.num_output_ports, f"layer '{spec.name}'")
    check_data_names(spec.name, [d.name for d in spec.data], data_paths)
    inputs, data = kernel_arrays(spec, params, args.input, data_paths)
    in_descs = input_descs(inputs, args.input)
    check_output_shapes(spec, in_descs, data, out_shapes, params=params)
    note_default_output_shapes(spec, in_descs, out_shapes)
    out_descs = [TensorDesc(s, in_descs[0].dtype) for s in out_shapes] or None

    bound = registry.bind(spec.name, in_descs, out_descs, params=params, data=data)
    from ...runtime.checks.bounds_process import check_kernel_bounds
    from ...runtime.checks.sanitize import sanitize_kernel
    # on Oclgrind first: a kernel whose accesses are invalid is reported there and never run
    # natively, where it could crash the process
    if args.sanitize and report_kernel_problems(sanitize_kernel(bound, *inputs, **data)):
        return 1
    if args.check_bounds:
        outputs, problems = check_kernel_bounds(bound, *inputs, **data)
        check_bounds_note(args)
        if report_kernel_problems(problems):   # nothing is written from such a run
            return 1
    if not args.check_bounds:
        result = bound(*inputs)
        outputs = result if isinstance(result, list) else [result]
    warn_if_not_finite({f"output{i}": a for i, a in enumerate(outputs)}, f"layer '{spec.name}'",
                       {f"input{i}": a for i, a in enumerate(inputs)})
    write_arrays_atomically(args.output, {f"output{i}": a for i, a in enumerate(outputs)})
    print(wrote_line(f"{spec.name} on {bound.engine.device.name.strip()}", outputs, args.output))
    return 0


def check_data_names(layer: str, names: list[str], given, form: str = "FILE.npy") -> None:
    """UsageError for a --data name the layer has no Data of (a typo), then for a Data blob
    the layer binds that no --data gives (`form`: what its value is, in the message)."""
    unknown = [n for n in given if n not in names]
    if unknown:
        raise UsageError(f"--data {', '.join(unknown)}: layer '{layer}' has no Data named "
                         f"so; its Data: {', '.join(names) or 'none'}")
    missing = [n for n in names if n not in given]
    if missing:
        raise UsageError(f"layer '{layer}' binds Data {', '.join(missing)}: give "
                         + " ".join(f"--data {n}={form}" for n in missing))


def _run_alone(registry, spec, args, params, data_paths, out_shapes) -> int:
    """A layer without one bound kernel (MVCL: stages, Where variants) runs through a one-layer
    network (runtime/compile/one_layer.py), the path it takes in a model."""
    from ...runtime.compile.one_layer import data_names, one_layer_network, output_count
    from ...runtime.layers.dialects import runtime_of
    unused = runtime_of(spec).unused_params(spec, params)
    if unused:  # an ignored parameter would run the layer with its default: a wrong number
        raise UsageError(runtime_of(spec).unused_params_message(spec, unused))
    count = output_count(spec, params)
    if not out_shapes:
        raise UsageError(f"layer '{spec.name}' is an MVCL layer, which has no shape formula: "
                         f"give the shape of each of its {count} output(s) with --output-shape")
    if len(out_shapes) != count:
        raise UsageError(f"layer '{spec.name}' has {count} output(s) for these attributes, "
                         f"{len(out_shapes)} --output-shape given")
    check_array_count(args.output, count, f"layer '{spec.name}'")
    check_data_names(spec.name, data_names(spec, params), data_paths)
    inputs, data = kernel_arrays(spec, params, args.input, data_paths)
    in_descs = input_descs(inputs, args.input)
    try:
        network, feeds, _ = one_layer_network(registry, spec.name, inputs, params, data,
                                              out_shapes)
        if args.check_bounds or args.sanitize:     # each stage, as `run` checks a model's
            from ...runtime.checks.network_checks import check_custom_layers
            problems = check_custom_layers(network, feeds, bounds=args.check_bounds,
                                           sanitize=args.sanitize)
            check_bounds_note(args)
            if report_kernel_problems(problems):   # nothing is written from such a run
                return 1
        result = network.infer(feeds)
        outputs = [result[f"output{j}"] for j in range(count)]
    except KernelWriteError as e:
        if e.unwritten:                 # the shapes it was given are run-layer's guess too
            shown = ", ".join("x".join(map(str, s)) for s in out_shapes)
            print(f"note: the output shape{'s' if len(out_shapes) > 1 else ''} ({shown}) came "
                  f"from --output-shape, for input{'s' if len(in_descs) > 1 else ''} "
                  f"{', '.join(d.describe() for d in in_descs)}: if the layer writes another "
                  f"shape for these inputs, give that one", file=sys.stderr)
        raise
    write_arrays_atomically(args.output, {f"output{i}": a for i, a in enumerate(outputs)})
    print(wrote_line(f"{spec.name} on {registry.engine.device.name.strip()}", outputs,
                     args.output))
    return 0


def run_python_layer(args, defn, params, data_paths, out_shapes) -> int:
    """A Python layer on the host: the inputs, then the --data arrays in the order given."""
    from ...jit.layer import parse_attr
    from ...runtime.checks.reference_check import run_reference
    if out_shapes:
        raise UsageError(f"--output-shape: the Python layer '{defn.type}' gives its output "
                         f"shapes itself (output_shapes)")
    inputs, data = layer_arrays(defn.type, args.input, data_paths)
    inputs += data.values()
    attrs = {a.name: parse_attr(a, params.get(a.name), defn.type, defn.type)
             for a in defn.attributes}
    outputs = run_reference(defn, inputs, attrs, f"layer type '{defn.type}'")
    check_array_count(args.output, len(outputs), f"layer '{defn.type}'")
    write_arrays_atomically(args.output, {f"output{i}": a for i, a in enumerate(outputs)})
    print(wrote_line(f"{defn.type} ({defn.method('execute')}) on the host", outputs,
                     args.output))
    return 0
