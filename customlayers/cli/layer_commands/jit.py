"""`customlayers jit -c CONFIG --layer NAME --input SHAPE ...`: the complete program text of a
layer for given tensors, on stdout (compilable as is), and its evaluated work sizes on stderr."""
from __future__ import annotations

import argparse
import sys

from ...config import load_configs
from ...errors import TensorError
from ...jit.bindings import kernel_tensors
from ...jit.program import generate_program
from ...jit.tensor import parse_tensor_arg
from ...terminal import for_contents
from ...config.simplegpu.params import unused_params, unused_params_message
from ..common import parse_params, the_only_layer
from .dialects import cli_of

TENSOR_HELP = "SHAPE[:DTYPE][:FORMAT][:pad=LOWER/UPPER], e.g. 1x3x224x224:f32:bfyx:pad=0,0,1,1/0,0,1,1"


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "jit", help="print the generated OpenCL program of a layer",
        description="Print the program text the JIT builds for one layer and given tensors "
                    "(stdout), and its global/local work sizes (stderr).")
    p.add_argument("-c", "--config", action="extend", nargs="+", required=True,
                   metavar="CONFIG",
                   help="config XML file(s) (-c a.xml b.xml, or repeated; a later file wins)")
    p.add_argument("--layer", default=None,
                   help="the CustomLayer name (optional when the configs define one layer)")
    p.add_argument("--input", action="append", default=[], metavar="TENSOR",
                   help=f"an input, in port order, then Data blobs (given to the kernel 1-D, as at "
                        f"run time): {TENSOR_HELP}")
    p.add_argument("--output", action="append", default=[], metavar="TENSOR",
                   help="an output (default: the Tensor's shape formula, else input 0's shape; input 0's "
                        "type, unpadded, in the format its Tensor asks for)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="a layer attribute, as the model would give it (text kept exactly)")
    return p


def _tensors(items, what):
    from .. import UsageError
    try:
        return [parse_tensor_arg(t) for t in items]
    except TensorError as e:
        raise UsageError(f"--{what}: {e} ({TENSOR_HELP})") from e


def run(args) -> int:
    from .config_files import refuse_models_as_configs
    refuse_models_as_configs(args.config)
    configs = load_configs(args.config)
    for d in configs.diagnostics:
        print(d.render(), file=sys.stderr)
    name = the_only_layer(args.layer, [n for n, _ in configs.definitions], configs.layers,
                          ", ".join(args.config))
    spec = configs.layers[name]
    inputs = _tensors(args.input, "input")
    outputs = _tensors(args.output, "output")
    return cli_of(spec).print_program(spec, inputs, outputs, args.param)


def print_kernel_program(spec, inputs, outputs, param_items) -> int:
    """A SimpleGPU layer: its program on stdout, its sizes and options on stderr."""
    from .. import UsageError
    expected = spec.num_input_ports + len(spec.data)
    if len(inputs) != expected:
        raise UsageError(f"layer '{spec.name}' takes {expected} input tensor"
                         f"{'s' if expected != 1 else ''} ({spec.num_input_ports} input"
                         f"{'s' if spec.num_input_ports != 1 else ''} and {len(spec.data)} Data "
                         f"blob{'s' if len(spec.data) != 1 else ''}), {len(inputs)} given")
    if outputs and len(outputs) != spec.num_output_ports:
        raise UsageError(f"layer '{spec.name}' has {spec.num_output_ports} outputs, "
                         f"{len(outputs)} --output given")
    # the tensors exactly as the runtime binds them (Data blobs 1-D, shape formulas, formats)
    n = spec.num_input_ports
    params = parse_params(param_items)
    given_inputs, given_outputs = inputs[:n], outputs
    inputs, outputs = kernel_tensors(spec, inputs[:n], outputs or None, inputs[n:], params)
    _note_reordered(spec, given_inputs, inputs, given_outputs, outputs)
    unused = unused_params(spec, params)
    if unused:  # an ignored parameter would print the program of the default value
        raise UsageError(unused_params_message(spec, unused))
    program = generate_program(spec, inputs, outputs, params)
    out = for_contents(sys.stdout)          # compilable as is, unless shown on a terminal
    out.write(program.text)
    out.flush()
    local = ",".join(map(str, program.local_size)) if program.local_size else "(driver chooses)"
    print(f"// global work size: {','.join(map(str, program.global_size))}\n"
          f"// local work size: {local}\n"
          f"// build options: {program.options or '(none)'}", file=sys.stderr)
    return 0



def _note_reordered(spec, given_inputs, inputs, given_outputs, outputs) -> None:
    """Say where the program is for another format than a tensor was given in: a <Tensor
    format=...> makes the runtime reorder it, and the program is printed as it runs."""
    ports = [("input", t, given_inputs, inputs) for t in spec.inputs] + \
        [("output", t, given_outputs, outputs) for t in spec.outputs]
    for what, tensor, given, bound in ports:
        if tensor.port_index >= len(given):
            continue
        was, now = given[tensor.port_index].format, bound[tensor.port_index].format
        if was.upper() != now.upper():
            print(f"note: {what} {tensor.port_index} is given as {was.lower()}; its <Tensor "
                  f'format="{tensor.format}"> ({tensor.location}) makes the runtime reorder it: '
                  f"the program is for {now.lower()}", file=sys.stderr)


def print_stage_programs(layer, inputs, outputs, param_items) -> int:
    """An MVCL layer: every stage's program on stdout, its sizes and arguments on stderr."""
    from .. import UsageError
    from ...jit.mvcl_program import ScalarArg, generate_mvcl_stages
    params = parse_params(param_items)
    if not outputs:
        raise UsageError(f"layer '{layer.name}' is an MVCL layer, whose output shapes the config "
                         f"cannot say: give each with --output")
    programs = generate_mvcl_stages(layer.select(params), params, inputs, outputs)
    out = for_contents(sys.stdout)
    for program in programs:
        out.write(program.text)
        local = ",".join(map(str, program.local_size)) if program.local_size else \
            "(driver chooses)"
        args = ", ".join(f"{a.arg_name}={a.value.item()}" if isinstance(a, ScalarArg)
                         else f"{a.arg_name}:{type(a).__name__}" for a in program.args)
        print(f"// stage {program.stage}: global work size "
              f"{','.join(map(str, program.global_size))}, local work size {local}\n"
              f"// arguments: {args}", file=sys.stderr)
    out.flush()
    return 0
