"""`customlayers warmup [-d DEVICE]`: build the built-in programs for a device once, into the
shared program cache, so that later processes load them from disk (runtime/compile/warmup.py
says which programs: today those of a fixed set of representative models and op probes)."""
from __future__ import annotations

import sys
from pathlib import Path

from ..common import add_build_options, build_cache


def add_parser(sub):
    p = sub.add_parser(
        "warmup", help="build the built-in programs for a device into the program cache",
        description="Compile, with tuning off, the plans of a fixed set of representative "
                    "models (the light models the onnx package ships: ResNet-50, SqueezeNet, "
                    "Inception, ...) and of small one-node graphs, one per built-in op and "
                    "variant, into the on-disk program cache that every process on this machine "
                    "shares. Many built-in programs are still specialised to the shapes they run "
                    "on, so this covers those models' and probes' shapes; other shapes still "
                    "compile on first use. Tuned kernels are not built (tuning picks them per "
                    "model, when it runs).")
    add_build_options(p, no_cache=False)    # its job is the cache: --no-cache would undo it
    p.add_argument("--no-models", action="store_true",
                   help="not the light models: only the op probes (and --model's)")
    p.add_argument("-m", "--model", action="append", default=[], metavar="MODEL",
                   help="warm up this model's programs too (.onnx or .xml of built-in ops; "
                        "repeatable)")
    return p


def run(args) -> int:
    from ...runtime.compile.warmup import light_models, warm_up
    from ...runtime.device.device import Engine
    engine = Engine(args.device, cache=build_cache(args))
    device = f"{engine.device.name.strip()} ({engine.device.platform.name.strip()})"
    print(f"warmup: device {device}, cache {engine.cache.directory}"
          + ("" if engine.cache.enabled else " (disabled by CUSTOMLAYERS_NO_CACHE: nothing is "
                                             "kept for later processes)"), file=sys.stderr)
    models = ([] if args.no_models else light_models()) + [Path(m) for m in args.model]
    report = warm_up(engine, models=models,
                     say=lambda m: print(f"warmup: {m}", file=sys.stderr))
    print(f"warmup: {report.programs} programs ({report.built} built, {report.from_disk} "
          f"already in the cache) for {len(report.probes)} probes in {report.seconds:.1f} s")
    for name, why in report.failed:
        print(f"error: warmup probe {name} failed: {why}", file=sys.stderr)
    return 1 if report.failed else 0
