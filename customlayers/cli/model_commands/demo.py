"""`demo`: validate the example layers, run each on the best device against its numpy reference,
then run a small model in which several layers are custom layers, next to the same model written
in built-in ops, and print the outputs, their difference and the per-layer profile.

`examples_table(engine)` and `model_demo(engine)` return the two parts as text;
`find_examples` and `load_example` are shared with the tests.
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np

from ...config.dialects import DIALECTS
from ...errors import CustomLayersError
from ..common import add_build_options, build_cache

def _examples_root() -> Path:
    """examples/ of a source checkout, else the copy a wheel carries (setup.py puts it in the
    package)."""
    package = Path(sys.modules["customlayers"].__file__).resolve().parent
    checkout = package.parent / "examples"
    packaged = package / "examples"
    return checkout if checkout.is_dir() or not packaged.is_dir() else packaged


EXAMPLES_DIR = _examples_root() / "layers"
MODELS_DIR = EXAMPLES_DIR.parent / "models"
# the demo model's custom layers: the seed's ReLU (overriding the built-in), GRN and ReorgYolo
DEMO_CONFIGS = ("relu", "grn", "reorg")
# timed runs per example: a median needs no more, and a mistyped count should not run for hours
MAX_RUNS = 10_000
# The dialects the runtime runs (every one there is: runtime/layers/simplegpu.py, runtime/layers/mvcl.py).
RUNNABLE_KINDS = tuple(DIALECTS)


@dataclass(frozen=True)
class Example:
    name: str              # folder name
    folder: Path
    config: Path           # <name>/<name>.xml
    reference: ModuleType  # reference(inputs, params, data) -> list, CASES, FORMATS
    kind: str = "SimpleGPU"  # the dialect of its config: "SimpleGPU" | "MVCL"


def load_example(folder: Path) -> Example:
    folder = Path(folder)
    config = folder / f"{folder.name}.xml"
    ref_path = folder / "reference.py"
    if not config.is_file() or not ref_path.is_file():
        raise CustomLayersError(f"example folder {folder} needs {config.name} and reference.py")
    spec = importlib.util.spec_from_file_location(f"customlayers_example_{folder.name}", ref_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return Example(folder.name, folder, config, module, _config_kind(config))


def _config_kind(config: Path) -> str:
    from ...config import load_configs
    kinds = {layer.kind for layer in load_configs([config]).layers.values()}
    # a config with a layer of no one kernel runs in a network (examples_table)
    return min(kinds, key=lambda k: DIALECTS[k].one_kernel, default="SimpleGPU")


def find_examples(root: Path = EXAMPLES_DIR,
                  kinds: tuple[str, ...] = RUNNABLE_KINDS) -> list[Example]:
    """The examples under `root` whose config is of one of `kinds` (by default those the
    runtime runs)."""
    root = Path(root)
    if not root.is_dir():
        raise CustomLayersError(f"no examples at {root}: the demo runs from a source checkout")
    found = [load_example(p) for p in sorted(root.iterdir()) if (p / "reference.py").is_file()]
    return [e for e in found if e.kind in kinds]


def case_arrays(case: dict, seed: int = 0) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
    """Random float32 inputs and Data blobs of a reference CASE (seeded: reproducible; one
    generator draws each in turn, so no two share values)."""
    from ..user_files.random_inputs import generator, random_array
    rng = generator(seed)
    inputs = [random_array(rng, s, np.float32) for s in case["inputs"]]
    data = {k: random_array(rng, s, np.float32) for k, s in case.get("data", {}).items()}
    return inputs, data


def layer_type_of(registry, example: Example) -> str:
    """The layer defined by the example's config (each example defines one)."""
    spec = next(s for s in (registry.spec(t) for t in registry.layer_types())
                if Path(s.config_path or "").resolve() == example.config.resolve())
    return spec.name


def _shapes(descs) -> str:
    return ",".join("x".join(map(str, d.shape)) for d in descs)


def time_in_network(registry, layer: str, inputs, data, expected, params,
                    runs: int) -> tuple[list[np.ndarray], float, str]:
    """Run a layer alone in a one-layer network with profiling: (its outputs, the median device
    time per run over all its stages and reorders, "device")."""
    from ...runtime.observe import profile
    from ...runtime.compile.network import Network
    from ...runtime.compile.one_layer import one_layer_graph
    graph = one_layer_graph(layer, inputs, data, [e.shape for e in expected], params)
    net = Network(graph, registry, registry.engine, profiling=True)
    request = net.create_request()
    feed = {f"input{i}": a for i, a in enumerate(inputs)}
    out = request.infer(feed)                       # also the warm-up
    times = []
    for _ in range(runs):
        request.infer(feed)
        times.append(sum(row.ns for row in profile.collect(request)) * 1e-9)
    return [out[f"output{j}"] for j in range(len(expected))], statistics.median(times), "device"


def examples_table(engine, runs: int = 20, examples: list[Example] | None = None) -> str:
    """Run every example's first CASE on `engine`; a text table, one line per example."""
    from ...runtime.layers.registry import Registry
    from ...jit.tensor import TensorDesc
    examples = find_examples() if examples is None else examples
    registry = Registry(engine)
    registry.load(*(e.config for e in examples))
    device = engine.device.name.strip()
    rows = []
    for ex in examples:
        case = ex.reference.CASES[0]
        inputs, data = case_arrays(case)
        expected = ex.reference.reference(inputs, dict(case.get("params", {})), data)
        layer = layer_type_of(registry, ex)
        params = case.get("params", {})
        if not DIALECTS[ex.kind].one_kernel:    # stages, no one bound kernel: a network
            got, seconds, clock = time_in_network(registry, layer, inputs, data, expected,
                                                  params, runs)
            shapes = (f"{_shapes([TensorDesc(a.shape) for a in inputs])} -> "
                      f"{_shapes([TensorDesc(e.shape) for e in expected])}")
        else:
            bound = registry.bind(layer, [TensorDesc(a.shape) for a in inputs],
                                  [TensorDesc(e.shape) for e in expected], params=params,
                                  data=data)
            got = bound(*inputs)
            got = got if isinstance(got, list) else [got]
            from ...runtime.execute.launch_timing import time_bound_kernel
            seconds, clock = time_bound_kernel(bound, engine, runs)
            shapes = f"{_shapes(bound.inputs)} -> {_shapes(bound.outputs)}"
        error = max(float(np.max(np.abs(g - e))) for g, e in zip(got, expected))
        rows.append((layer, shapes, device, f"{error:.2e}", f"{seconds * 1e6:.1f} us ({clock})"))
    header = ("layer", "shapes", "device", "max abs err", f"time/run (median of {runs})")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(header, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join(lines)


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("demo", help="validate and run the example layers, print a table",
                              description=__doc__.split("\n\n")[0])
    add_build_options(p)
    p.add_argument("--runs", type=int, default=20, metavar="N",
                   help=f"timed runs per example (the median is shown; default 20, "
                        f"at most {MAX_RUNS})")
    return p


def run(args) -> int:
    from ...runtime.device.device import Engine, select_device
    from .. import UsageError
    if args.runs < 1:
        raise UsageError(f"--runs must be at least 1, found {args.runs}")
    if args.runs > MAX_RUNS:
        raise UsageError(f"--runs must be at most {MAX_RUNS}, found {args.runs}")
    examples = find_examples()
    # validation first: a broken example is reported with file:line before anything runs
    from ...config.loader import load_configs
    configs = load_configs([e.config for e in examples])
    for diag in configs.diagnostics.sorted():
        print(diag.render())
    configs.raise_if_errors()
    print(f"validated {len(examples)} example configs in {EXAMPLES_DIR}: no errors\n")
    engine = Engine(select_device(args.device), cache=build_cache(args))
    engine.cache.before_compile = _first_compile_note(engine.cache)
    print(examples_table(engine, runs=args.runs))
    print()
    print(model_demo(engine))
    return 0


def _first_compile_note(cache):
    """A callback that says once, on stderr, why the wait: a first demo compiles about 40
    programs (some 15 s on a 2-core CPU with PoCL) with nothing printed in between."""
    lock, said = threading.Lock(), []

    def note() -> None:
        with lock:
            if said:
                return
            said.append(True)
        kept = (f"kept in the program cache {cache.directory}, so later runs read them"
                if cache.enabled and cache.writable else
                "the program cache is off or cannot be written, so later runs compile them again")
        print(f"demo: compiling the programs the cache lacks (a first run on this device: "
              f"about 15 s on a 2-core CPU); {kept}", file=sys.stderr, flush=True)
    return note


def model_demo(engine, runs: int = 10) -> str:
    """Run examples/models/demo_cnn.xml with the example configs (custom ReLU, GRN, ReorgYolo)
    and demo_cnn_builtin.xml (the same weights, those layers in built-in ops) on `engine`."""
    from ...runtime.observe import profile
    from ...runtime.compile.network import Network
    from ...runtime.layers.registry import Registry
    from .run import summarize
    registry = Registry(engine)
    registry.load(*(EXAMPLES_DIR / name / f"{name}.xml" for name in DEMO_CONFIGS))
    said: list[str] = []
    custom = Network(MODELS_DIR / "demo_cnn.xml", registry, engine, profiling=True,
                     messages=said.append)
    builtin = Network(MODELS_DIR / "demo_cnn_builtin.xml", None, engine)
    x = np.random.default_rng(0).standard_normal(
        custom.plan.descs[custom.plan.inputs[0][1]].shape).astype(np.float32)
    request = custom.create_request()
    out = request.infer({custom.input_names[0]: x})
    ref = builtin.infer({builtin.input_names[0]: x})
    runs_pc = []
    for _ in range(runs):
        request.infer({custom.input_names[0]: x})
        runs_pc.append(profile.collect(request))
    steps = custom.plan.steps
    kinds = {impl: sum(1 for s in steps if s.impl == impl) for impl in ("custom", "built-in")}
    lines = [f"model demo_cnn.xml on {engine.device.name.strip()}: {len(steps)} layers, "
             f"{kinds['custom']} custom ({', '.join(sorted({s.type for s in steps if s.impl == 'custom'}))}), "
             f"{kinds['built-in']} built-in"]
    lines += [f"  {m}" for m in said]
    lines.append(f"  {custom.plan.memory.summary()}")
    for name, arr in out.items():
        lines.append("  " + summarize(name, arr))
        other = next(iter(ref.values()))
        lines.append(f"  max abs difference from demo_cnn_builtin.xml (built-in ops): "
                     f"{float(np.max(np.abs(arr - other))):.3e}")
    lines.append("")
    lines.append(f"per-layer device time (mean of {runs} runs):")
    lines.append(profile.format_table(profile.merge(runs_pc), runs=runs))
    return "\n".join(lines)
