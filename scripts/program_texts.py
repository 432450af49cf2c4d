"""Fingerprint every generated OpenCL program: each example layer (every case, and padded in
every format it supports) and every kernel launch of the light models (IR and ONNX) and of the
demo models. A refactoring that must not change behaviour must not change these.

    python scripts/program_texts.py --write before.json
    ... change the code ...
    python scripts/program_texts.py --compare before.json

Each entry is the sha256 of the program text, build options, entry, global and local size, and
the kinds of its arguments; --compare prints every entry that differs or is missing.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

PAD = ((0, 1, 2, 1), (1, 0, 1, 3))


def _fingerprint(source, options, entry, global_size, local_size, arg_kinds) -> str:
    h = hashlib.sha256()
    for part in (source, options, entry, repr(tuple(global_size)),
                 repr(tuple(local_size) if local_size else None), repr(tuple(arg_kinds))):
        h.update(part.encode("utf-8", "surrogateescape"))
        h.update(b"\0")
    return h.hexdigest()


def _launch_print(launch) -> str:
    return _fingerprint(launch.source, launch.options, launch.entry, launch.global_size,
                        launch.local_size, [a.kind for a in launch.args])


def example_layers(engine) -> dict[str, str]:
    from customlayers.cli.model_commands.demo import case_arrays, find_examples, layer_type_of
    from customlayers.jit.tensor import TensorDesc
    from customlayers.runtime.layers.registry import Registry
    examples = find_examples(kinds=("SimpleGPU",))    # bound kernels (MVCL runs in stages)
    reg = Registry(engine)
    reg.load(*(e.config for e in examples))
    found = {}
    for ex in examples:
        runs = [(i, "BFYX", False) for i in range(len(ex.reference.CASES))]
        runs += [(0, fmt, True) for fmt in ex.reference.FORMATS]
        for i, fmt, padded in runs:
            case = ex.reference.CASES[i]
            inputs, data = case_arrays(case, seed=i + 1)
            params = dict(case.get("params", {}))
            expected = ex.reference.reference(inputs, params, data)
            lower, upper = PAD if padded else ((0,) * 4, (0,) * 4)
            ins = [TensorDesc(a.shape, "f32", fmt, lower, upper) for a in inputs]
            outs = [TensorDesc(e.shape, "f32", fmt, lower, upper) for e in expected]
            bound = reg.bind(layer_type_of(reg, ex), ins, outs, params=params, data=data)
            found[f"example/{ex.name}/case{i}/{fmt}{'/padded' if padded else ''}"] = \
                _launch_print(bound.launch())
    return found


def network_launches(label: str, model, engine, configs=()) -> dict[str, str]:
    from customlayers.runtime.compile.network import Network
    from customlayers.runtime.layers.registry import Registry
    registry = None
    if configs:
        registry = Registry(engine)
        registry.load(*configs)
    net = Network(str(model), registry, engine)
    found = {}
    for i, step in enumerate(net.plan.steps):
        for j, launch in enumerate(step.launches):
            found[f"{label}/{i:04d}:{step.name}/{j}"] = _launch_print(launch)
    return found


def collect() -> dict[str, str]:
    from customlayers.runtime.device.device import Engine
    from models import light_ir, light_model_names, light_onnx
    engine = Engine()
    found = example_layers(engine)
    ex = ROOT / "examples"
    found.update(network_launches("demo_cnn", ex / "models/demo_cnn.xml", engine,
                                  [ex / "layers/grn/grn.xml", ex / "layers/reorg/reorg.xml",
                                   ex / "layers/relu/relu.xml"]))
    found.update(network_launches("demo_cnn_builtin", ex / "models/demo_cnn_builtin.xml",
                                  engine))
    for name in light_model_names():
        print(f"  {name}", file=sys.stderr)
        found.update(network_launches(f"light_ir/{name}", light_ir(name), engine))
        found.update(network_launches(f"light_onnx/{name}", light_onnx(name), engine))
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", metavar="FILE")
    group.add_argument("--compare", metavar="FILE")
    args = ap.parse_args()
    found = collect()
    if args.write:
        Path(args.write).write_text(json.dumps(found, indent=1, sort_keys=True))
        print(f"{len(found)} programs fingerprinted into {args.write}")
        return 0
    before = json.loads(Path(args.compare).read_text())
    differ = [k for k in sorted(set(before) | set(found)) if before.get(k) != found.get(k)]
    for k in differ:
        print(f"differs: {k}")
    print(f"{len(found)} programs, {len(before)} before: {len(differ)} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
