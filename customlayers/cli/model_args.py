"""What `run` and `benchmark` share: -m/-c/-d/-i options, loading, input arrays."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from . import UsageError
from .common import add_build_options, apply_build_options, non_negative_int
from .input_arrays import read_array


def add_model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-m", "--model", required=True, help="model: OpenVINO IR .xml or .onnx")
    p.add_argument("-c", "--config", action="append", default=[], metavar="CONFIG",
                   help="custom layer config (CustomLayer XML); may be given several times")
    p.add_argument("--allow-external-sources", action="store_true",
                   help="let configs name .cl files outside their own directory tree")
    p.add_argument("-i", "--input", action="append", default=[], metavar="[NAME=]FILE.npy",
                   help="input array(s); seeded random inputs where missing")
    p.add_argument("--shape", action="append", default=[], metavar="NAME=1x3x224x224",
                   help="shape of an input the model leaves open (dynamic dims)")
    p.add_argument("--seed", type=non_negative_int, default=0,
                   help="seed of the random inputs (0 or more)")
    add_build_options(p)


def load_network(args, profiling: bool = False):
    """Engine, registry and compiled Network from the parsed options."""
    apply_build_options(args)
    from ..graph.load import read_model
    from ..runtime.device import Engine
    from ..runtime.network import Network
    # the model and the input files first: a malformed one is refused before OpenCL starts
    graph = read_model(args.model)
    shapes = parse_shapes(args.shape)
    arrays = read_inputs(args.input, graph)
    engine = Engine(args.device)
    registry = None
    if args.config:
        from ..runtime.registry import Registry
        registry = Registry(engine)
        diags = registry.load(*args.config, allow_external_sources=args.allow_external_sources)
        for d in diags:
            print(d.render(), file=sys.stderr)
    for name, arr in arrays.items():
        shapes.setdefault(name, tuple(arr.shape))
    net = Network(graph, registry, engine, input_shapes=shapes or None, profiling=profiling,
                  messages=lambda m: print(m, file=sys.stderr))
    missing = [p for p in graph.parameters if p.name not in arrays]
    for k, p in enumerate(missing):
        shape = shapes.get(p.name) or p.outputs[0].shape
        if any(d is None for d in shape):
            raise UsageError(f"input '{p.name}' has an open shape {list(shape)}: give it with "
                             f"-i {p.name}=file.npy or --shape {p.name}=1x3x224x224")
        arrays[p.name] = random_input(shape, p.outputs[0].dtype, args.seed + k)
    return engine, net, arrays


def parse_shapes(items) -> dict[str, tuple[int, ...]]:
    shapes = {}
    for item in items or ():
        name, sep, text = item.rpartition("=")
        try:
            shape = tuple(int(v) for v in text.lower().split("x"))
        except ValueError:
            raise UsageError(f"--shape {item!r} is not NAME=1x3x224x224") from None
        if not sep:
            raise UsageError(f"--shape {item!r} is not NAME=1x3x224x224")
        shapes[name] = shape
    return shapes


def read_inputs(items, graph) -> dict[str, np.ndarray]:
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
        else:
            raise UsageError(f"-i {item}: '{name}' is not an input of the model; its inputs: "
                             f"{', '.join(names)}")
        arrays[name] = read_array(path, f"input '{name}'")
    return arrays


def random_input(shape, dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    from ..jit.tensor import DTYPES
    npd = DTYPES.get(dtype, ("float", np.dtype(np.float32)))[1]
    if npd.kind == "f":
        return rng.standard_normal(shape).astype(npd)
    return rng.integers(0, 10, size=shape).astype(npd)
