"""What `run` and `benchmark` share: -m/-c/-d/-i and the shape options, loading, input arrays."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from .. import UsageError
from ...graph.fold_eval import FOLD_TYPE
from ...settings import TUNING_MODES
from .benchmark_app_options import add_refused_options
from ..common import (add_build_options, add_python_layers_option, build_cache,
                      non_negative_int, positive_int)
from ..layer_commands.config_files import refuse_models_as_configs
from ..user_files.input_arrays import read_array
from .sequence_inputs import is_stateful, sequence_steps
from ..user_files.random_inputs import generator, random_array
from ..user_files.input_shapes import (OPENVINOS, GivenShape, apply_batch, check_against_model,
                           declared_shape, parse_shapes)


# --fuse-attention: Network's fuse_attention (None: the device decides)
ATTENTION_SWITCH = {"on": True, "off": False, None: None}


def add_model_options(p: argparse.ArgumentParser, command: str) -> None:
    """The options of `run` and `benchmark` (`command`), benchmark_app's spellings included."""
    p.add_argument("-m", "--model", required=True,
                   help="model: OpenVINO IR .xml, .onnx, or a compiled package .clpkg")
    p.add_argument("-c", "--config", action="extend", nargs="+", default=[], metavar="CONFIG",
                   help="custom layer config(s) (CustomLayer XML): -c a.xml b.xml, or -c "
                        "repeated")
    p.add_argument("--allow-external-sources", action="store_true",
                   help="let configs name .cl files outside their own directory tree")
    add_python_layers_option(p)
    p.add_argument("-i", "--input", action="append", default=[], metavar="[NAME=]FILE.npy",
                   help="input array(s); seeded random inputs where missing")
    p.add_argument("--shape", "-shape", "-data_shape", dest="shape", action="append",
                   default=[], metavar="NAME=1x3x224x224",
                   help=f"the shape of an input, for inputs the model leaves open (dynamic "
                        f"dims) or to check; also benchmark_app's {OPENVINOS}")
    p.add_argument("-b", "--batch", type=positive_int, default=None, metavar="N",
                   help="the batch: the first dimension of every input (as benchmark_app's -b)")
    p.add_argument("--seed", type=non_negative_int, default=0,
                   help="seed of the random inputs (0 or more)")
    p.add_argument("--tuning", choices=TUNING_MODES, default=None,
                   help="kernel selection by timing while the model compiles: off (each "
                        "layer's heuristic kernel), fast (default: the few best candidates), "
                        "full (every candidate); choices are cached per device "
                        "(default: $CUSTOMLAYERS_TUNING, else fast)")
    p.add_argument("--fuse-temporal-blocks", action=argparse.BooleanOptionalAction,
                   default=None,
                   help="run each run of TCN temporal blocks (causal convolutions, ReLUs, "
                        "residual) as one kernel, or (--no-fuse-temporal-blocks) none (default: "
                        "on a GPU the runs whose convolutions are launch-bound there, as small "
                        "batches are; none on a CPU; a compiled package runs as compiled)")
    p.add_argument("--fuse-attention", choices=("on", "off"), default=None,
                   help="run scaled dot-product attention (MatMul, scale, mask Add, Softmax, "
                        "MatMul) as one FusedAttention kernel (default: on where the device "
                        "is not a CPU; on PoCL the separate layers ran faster; a compiled "
                        "package runs as compiled)")
    add_build_options(p)
    add_refused_options(p, command)


def load_configs_of(args):
    """The configs (-c) read and checked (ConfigError with every error), no device needed;
    None when none is given. Their warnings go to stderr."""
    from ...config.loader import load_configs
    refuse_models_as_configs(args.config)
    if not args.config:
        return None
    configs = load_configs(args.config, allow_external_sources=args.allow_external_sources)
    configs.raise_if_errors()
    for d in configs.diagnostics:
        print(d.render(), file=sys.stderr)
    return configs


def load_registry(args, engine, configs=None):
    """The registry on `engine` of the configs (-c; `configs`: as load_configs_of read them)
    and the Python layers (-l), or None when neither is given; load warnings go to stderr."""
    if configs is None:
        configs = load_configs_of(args)
    if configs is None and not getattr(args, "layers", None):
        return None
    from ...runtime.layers.registry import Registry
    registry = Registry(engine, configs)
    for path in getattr(args, "layers", None) or ():
        for d in registry.load_python(path):
            print(d.render(), file=sys.stderr)
    return registry


def load_network(args, profiling: bool = False, resolver=None):
    """Engine, registry and compiled Network from the parsed options (`resolver`: a factory
    of the network's resolver from the registry, for run --check-with)."""
    engine, net, steps = load_network_steps(args, profiling, resolver, sequence=False)
    return engine, net, steps[0]


def load_network_steps(args, profiling: bool = False, resolver=None, sequence: bool = True):
    """As load_network, with the input arrays of each step: for a stateful model (ReadValue/
    Assign), or with --stream, the -i files are a sequence (sequence_inputs.py); otherwise
    (and without `sequence`) one step of the inputs."""
    from ...graph.load import read_model
    from ...runtime.device.device import Engine
    from ...runtime.compile.network import Network
    from ...runtime.layers.resolver import Resolver
    from ...runtime.package.container import is_package
    if is_package(args.model):
        return load_package_steps(args, profiling, resolver, sequence)
    # the configs first: a malformed one is refused before OpenCL starts. Then the engine (the
    # registry binds on it from when it is made), the Python layers, the model and the input
    # files, all before anything is compiled; the model reader asks the loaded layers for their
    # output shapes, and the layers nothing implements are listed before any shape is found
    # wrong
    configs = load_configs_of(args)
    engine = Engine(args.device, cache=build_cache(args))
    registry = load_registry(args, engine, configs)
    say = lambda m: print(m, file=sys.stderr)     # noqa: E731
    resolver = resolver(registry, say) if resolver else Resolver(registry, say=say)
    graph = read_model(args.model, custom_shapes=resolver)
    # shape arithmetic left for the plan (FOLD_TYPE nodes) is folded per input shape by the
    # Network, never implemented by a layer: only the rest must be
    resolver.check_implemented(n for n in graph.nodes.values() if n.type != FOLD_TYPE)
    steps = None
    # --stream on a model without state walks its time axis (causal_steps.py): one step here
    if sequence and is_stateful(graph):
        steps = sequence_steps(args.input, graph, args.stream,
                               lambda a, path, name: model_typed(a, path, name, graph))
    arrays, shapes = input_arrays_and_shapes(args, graph, dict(steps[0]) if steps else None)
    if getattr(args, "stream", False) and not steps:
        for name, array in arrays.items():      # before the window's plan refuses it
            if array.ndim == 3 and array.shape[2] == 0:
                raise UsageError(f"--stream: input '{name}' has no steps (shape "
                                 f"{list(array.shape)}: its last axis, the time axis, is 0)")
    net = Network(graph, registry, engine, input_shapes=shapes or None, profiling=profiling,
                  messages=say, resolver=resolver, tuning=args.tuning,
                  fuse_temporal_blocks=getattr(args, "fuse_temporal_blocks", None),
                  fuse_attention=ATTENTION_SWITCH[getattr(args, "fuse_attention", None)])
    if getattr(args, "verbose", False):     # what the graph rewrites made of the model
        for note in net.rewrites or ["graph rewrites: none applied"]:
            say(f"rewrite: {note}")
    fill_missing_inputs(args, graph, steps or [arrays], shapes)
    return engine, net, steps or [arrays]


def fill_missing_inputs(args, graph, steps: list[dict], shapes) -> None:
    """Seeded random arrays for the inputs no -i gives, one generator for the run drawing each
    in turn. Where -i gives some inputs but not this one, a note says so: a forgotten mask
    would otherwise run as noise, silently."""
    rng = generator(args.seed)
    for index, step in enumerate(steps):
        for p in graph.parameters:
            if p.name in step:
                continue
            if args.input and index == 0:
                print(f"note: input '{p.name}' is not given with -i: it gets a random array "
                      f"(--seed {args.seed}); give it with -i {p.name}=FILE.npy",
                      file=sys.stderr)
            step[p.name] = random_input(rng, shapes[p.name], p.outputs[0].dtype)


def input_arrays_and_shapes(args, graph, arrays=None
                            ) -> tuple[dict[str, np.ndarray], dict[str, tuple]]:
    """The arrays given with -i (or `arrays`: a sequence's first step), and every input's
    shape, checked against the model before anything is compiled: a wrong shape is named as
    such, not as a layer that fails with it."""
    names = [p.name for p in graph.parameters]
    given = parse_shapes(args.shape, names)
    origins: dict[str, str] = {}
    if arrays is None:
        arrays = read_inputs(args.input, graph, origins)
    for name, arr in arrays.items():
        origin = origins.get(name, "the array given with -i")
        if name in given and given[name].shape != tuple(arr.shape):
            raise UsageError(f"input '{name}': its array has shape {list(arr.shape)}, but "
                             f"{given[name].origin} gives {list(given[name].shape)}")
        given[name] = GivenShape(tuple(arr.shape), origin)
    if args.batch is not None:
        apply_batch(given, args.batch, graph.parameters)
    check_against_model(given, graph.parameters)
    shapes = {name: g.shape for name, g in given.items()}
    for p in graph.parameters:
        shape = shapes.get(p.name) or declared_shape(p)
        if shape is None or any(d is None for d in shape):
            shown = "of unknown rank" if shape is None else \
                f"[{', '.join('?' if d is None else str(d) for d in shape)}]"
            example = "x".join("1" if d is None else str(d) for d in shape or (1, 3, 224, 224))
            raise UsageError(f"input '{p.name}' has an open shape {shown}: give it with "
                             f"-i {p.name}=file.npy or --shape {p.name}={example}")
        shapes.setdefault(p.name, tuple(int(d) for d in shape))
    return arrays, shapes


def read_inputs(items, graph, origins: dict | None = None) -> dict[str, np.ndarray]:
    """The -i arrays by input name; `origins` (when given) gets where each came from, for a
    message about its shape: a file without NAME= goes to the next input in the model's order,
    which a user who swapped two files must be told."""
    names = [p.name for p in graph.parameters]
    arrays: dict[str, np.ndarray] = {}
    positional = 0
    for item in items or ():
        name, sep, path = item.partition("=")
        if sep and name in names:
            pass
        elif not sep or Path(item).is_file():
            # a plain path (an existing file may have '=' in its name); 'wrong=x.npy' is not one
            if positional >= len(names):
                raise UsageError(f"more inputs given than the model has ({', '.join(names)})")
            name, path = names[positional], item
            positional += 1
            if origins is not None and len(names) > 1:
                origins[name] = (f"{path}, given with -i without a name: such files go to the "
                                 f"inputs in the model's order, {', '.join(names)}")
        else:
            raise UsageError(f"-i {item}: '{name}' is not an input of the model; its inputs: "
                             f"{', '.join(names)}")
        if origins is not None:
            origins.setdefault(name, f"{path}, given with -i")
        arrays[name] = model_typed(read_array(path, f"input '{name}'"), path, name, graph)
    return arrays


def model_typed(array: np.ndarray, path: str, name: str, graph) -> np.ndarray:
    """The array in the element type the model declares for input `name` (the network would
    convert it anyway; here the conversion is said, as run-layer says a layer's)."""
    from ...dtypes import BY_NAME
    from ..user_files.input_arrays import as_type
    param = next(p for p in graph.parameters if p.name == name)
    known = BY_NAME.get(param.outputs[0].dtype)
    if known is None:                     # undeclared: the network decides, as before
        return array
    if param.attrs.get("boolean") == "true" and array.dtype != np.bool_:
        # a bool input (held as u8) is true where the value is not 0, as a Cast to bool
        print(f"note: input '{name}' ({path}) is {array.dtype}; the model takes bool: "
              f"converted (x != 0)", file=sys.stderr)
        return (array != 0).astype(np.uint8)
    return as_type(array, known.np_dtype, f"input '{name}' ({path})", "the model")


def random_input(rng, shape, dtype: str) -> np.ndarray:
    """The next random array of a model input of `dtype` (the IR/ONNX element type's name)."""
    from ...dtypes import BY_NAME
    return random_array(rng, shape, BY_NAME[dtype if dtype in BY_NAME else "f32"].np_dtype)


def load_package_steps(args, profiling: bool, resolver, sequence: bool):
    """load_network_steps for a compiled package (customlayers compile -o model.clpkg): its
    plans as compiled, no configs, no tuning; the shapes it was compiled for unless -i or
    --shape give others (which it refuses, naming its own)."""
    from ...runtime.compile.network import Network
    from ...runtime.device.device import Engine
    refuse_with_package(args, resolver)
    for option, dest in (("--fuse-temporal-blocks", "fuse_temporal_blocks"),
                         ("--fuse-attention", "fuse_attention")):
        given = getattr(args, dest, None)
        if given is False:              # --no-fuse-temporal-blocks: named as it was given
            option = option.replace("--", "--no-", 1)
        if given is not None:
            print(f"note: {option}: {args.model} is a compiled package; its plans run as "
                  f"compiled (the option applies to `compile`)", file=sys.stderr)
    if getattr(args, "tuning", None) is not None:
        print(f"note: --tuning {args.tuning}: {args.model} is a compiled package; it runs the "
              f"kernels chosen when it was compiled (the option applies to `compile`)",
              file=sys.stderr)
    engine = Engine(args.device, cache=build_cache(args))
    registry = load_registry(args, engine)
    say = lambda m: print(m, file=sys.stderr)     # noqa: E731
    net = Network(args.model, registry, engine, profiling=profiling, messages=say)
    graph = net.graph
    steps = None
    if sequence and (is_stateful(graph) or getattr(args, "stream", False)):
        if not is_stateful(graph):
            raise UsageError(f"--stream: {args.model} is a compiled package, which holds the "
                             f"compiled plans, not the model's graph a stream is made from; "
                             f"stream the model file itself (a package streams only a model "
                             f"with state, OpenVINO's ReadValue/Assign)")
        steps = sequence_steps(args.input, graph, args.stream,
                               lambda a, path, name: model_typed(a, path, name, graph))
    arrays = dict(steps[0]) if steps else read_inputs(args.input, graph)
    shapes = dict(net.package.manifest["input_shapes"][0])
    shapes.update({n: g.shape for n, g in parse_shapes(args.shape, list(shapes)).items()})
    shapes.update({n: tuple(a.shape) for n, a in arrays.items()})
    if args.batch is not None:
        shapes = {n: (args.batch, *s[1:]) if s else s for n, s in shapes.items()}
    net.plan_for({n: tuple(s) for n, s in shapes.items()},
                 {n: arrays[n] for n in net.value_inputs if n in arrays})
    fill_missing_inputs(args, graph, steps or [arrays], shapes)
    return engine, net, steps or [arrays]


def refuse_with_package(args, resolver=None) -> None:
    """What a compiled package cannot take: configs (it holds its kernels), and the checks
    that need the kernels' sources or the layers' references."""
    if args.config:
        raise UsageError(f"-c: {args.model} is a compiled package, which holds its custom "
                         f"layers' kernels: give no -c (its Python layers still need -l)")
    if resolver is not None or getattr(args, "check_bounds", False) or \
            getattr(args, "sanitize", False):
        raise UsageError(f"{args.model} is a compiled package: --check-with, --check-bounds "
                         f"and --sanitize need the model and its layers' sources; run the "
                         f"model itself (-m MODEL -c CONFIG)")
