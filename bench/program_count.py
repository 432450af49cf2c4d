"""How many distinct programs a Network builds for each light model (tests/models.py), and how
many of them are convolution and MatMul programs: one program per (source, options), as
runtime/compile/compiler.py's parallel batch builds them. Nothing is built or run: the plan is
compiled on the CPU device (PoCL) with tuning off and the build step replaced by a count, so
the figure is the heuristic's choices, the ones a first load makes.

--cold also times, per model, a first load and first inference in a fresh process with every
cache empty: ours (CUSTOMLAYERS_CACHE_DIR) and PoCL's (POCL_CACHE_DIR), each a new temporary
directory, tuning off (bench/cold_start.py's child does the load).

    python bench/program_count.py [resnet50 inception_v1 ...] [--device CPU] [--cold] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

LIGHT = ("resnet50", "inception_v1", "densenet121", "squeezenet", "shufflenet")
# entry points of the convolution family (ops/nn/conv.py, _cpu_kernels.py, _winograd.py, the
# shared gemm.cl) and of MatMul (ops/nn/matmul.py)
_FAMILIES = (("conv", ("conv", "winograd", "gemm_")), ("matmul", ("matmul",)))


class _Counted(Exception):
    """Raised in place of the build: carries the launches the plan would build."""
    def __init__(self, launches):
        super().__init__("counted")
        self.launches = launches


def family(entry: str) -> str:
    for name, prefixes in _FAMILIES:
        if entry.startswith(prefixes):
            return name
    return "other"


def count(model: Path, device: str) -> dict:
    from customlayers.graph.load import read_model
    from customlayers.runtime.compile import compiler
    from customlayers.runtime.compile.network import Network
    from customlayers.runtime.device.device import Engine

    def counting_build(engine, steps, after_build):
        raise _Counted([launch for s in steps for launch in s.launches])

    compiler._build, original = counting_build, compiler._build
    try:
        Network(read_model(model), engine=Engine(device), tuning="off")
    except _Counted as done:
        launches = done.launches
    finally:
        compiler._build = original
    programs = {(launch.source, launch.options): family(launch.entry) for launch in launches}
    per_family = Counter(programs.values())
    return {"model": model.stem, "launches": len(launches), "programs": len(programs),
            "conv": per_family["conv"], "matmul": per_family["matmul"],
            "other": per_family["other"]}


def cold_load(model: Path, device: str) -> dict:
    """bench/cold_start.py's child in a fresh process with empty caches, tuning off."""
    with tempfile.TemporaryDirectory(prefix="program-count-") as tmp:
        env = dict(os.environ, CUSTOMLAYERS_CACHE_DIR=f"{tmp}/ours", POCL_CACHE_DIR=f"{tmp}/pocl",
                   CUSTOMLAYERS_TUNING="off")
        env.pop("CUSTOMLAYERS_NO_CACHE", None)
        os.makedirs(f"{tmp}/pocl")
        cmd = [sys.executable, str(ROOT / "bench" / "cold_start.py"), "--child", "--model",
               str(model), "--tuning", "off", "--device", device]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise SystemExit(f"the cold load of {model.name} failed:\n{out.stderr[-3000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=list(LIGHT))
    parser.add_argument("--device", default="CPU")
    parser.add_argument("--cold", action="store_true",
                        help="also time a cold first load + inference per model")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    os.environ["CUSTOMLAYERS_TUNING"] = "off"
    import models as light
    rows = [count(light.light_onnx(name), args.device) for name in args.models]
    if args.cold:
        for r, name in zip(rows, args.models):
            cold = cold_load(light.light_onnx(name), args.device)
            r.update(cold_s=cold["compile_s"] + cold["first_infer_s"], built=cold["compiled"])
    if args.json:
        print(json.dumps(rows))
        return 0
    cold_head = f"{'built':>6}{'cold s':>8}" if args.cold else ""
    print(f"{'model':<14}{'launches':>9}{'programs':>9}{'conv':>6}{'matmul':>7}{'other':>6}"
          + cold_head)
    for r in rows:
        cold = f"{r['built']:>6}{r['cold_s']:>8.1f}" if args.cold else ""
        print(f"{r['model']:<14}{r['launches']:>9}{r['programs']:>9}{r['conv']:>6}"
              f"{r['matmul']:>7}{r['other']:>6}" + cold, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
