"""`customlayers warmup [-d DEVICE]`: build the built-in programs for a device once, into the
shared program cache, so that later processes load them from disk (runtime/compile/warmup.py
says which programs: today those of a fixed set of representative models and op probes)."""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

from ... import settings
from ...errors import ModelFileError
from ...files import check_user_file
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
                    "model, when it runs). The cache keeps each program's binary, also on a PoCL "
                    "that specializes its work-groups (where other commands keep none: "
                    "CUSTOMLAYERS_KEEP_BINARIES).")
    add_build_options(p, no_cache=False)    # its job is the cache: --no-cache would undo it
    p.add_argument("--no-models", action="store_true",
                   help="not the light models: only the op probes (and --model's)")
    p.add_argument("-m", "--model", action="append", default=[], metavar="MODEL",
                   help="warm up this model's programs too (.onnx or .xml of built-in ops; "
                        "repeatable)")
    return p


def _cache_that_keeps(args):
    """The program cache, when it can keep what warmup builds; else a UsageError (exit 2) before
    anything builds: its disk is warmup's only product, and the light models take minutes on
    PoCL, all thrown away (other commands warn and go on: they still run the model)."""
    from .. import UsageError
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cache = build_cache(args)
    if not cache.enabled:
        raise UsageError(f"the disk program cache is off (CUSTOMLAYERS_NO_CACHE is set): a "
                         f"warm-up would keep nothing; unset it to fill {cache.directory}")
    if not cache.writable:               # (its warning held back: this error says it)
        raise UsageError(f"{cache.write_problem}: a warm-up would keep nothing; name a folder "
                         f"you can write with -cdir DIR")
    for w in caught:                     # anything else the cache said, as other commands do
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    # binaries even where the cache keeps none by default (a PoCL that specializes its
    # work-groups): warmup pays for them once, and later processes load each program in about
    # 5 ms instead of building its source again (30-50 ms through PoCL's cache);
    # CUSTOMLAYERS_KEEP_BINARIES=0 says otherwise
    if settings.keep_binaries() is not False:
        cache.binaries = True
    return cache


def _check_models(paths: list[Path]) -> None:
    """Each --model file there and readable before anything builds (exit 2 naming it, as every
    command answers a missing input file); a malformed one is still a failed probe."""
    for path in paths:
        try:
            check_user_file(path)
        except FileNotFoundError as e:
            raise ModelFileError(f"{path}: no such model file", path, e) from e
        except OSError as e:
            raise ModelFileError(f"{path}: cannot read the model file: {e.strerror}", path,
                                 e) from e


def run(args) -> int:
    from ...runtime.compile.warmup import light_models, warm_up
    from ...runtime.device.device import Engine
    _check_models([Path(m) for m in args.model])
    engine = Engine(args.device, cache=_cache_that_keeps(args))
    device = f"{engine.device.name.strip()} ({engine.device.platform.name.strip()})"
    print(f"warmup: device {device}, cache {engine.cache.directory}", file=sys.stderr)
    models = ([] if args.no_models else light_models()) + [Path(m) for m in args.model]
    report = warm_up(engine, models=models,
                     say=lambda m: print(f"warmup: {m}", file=sys.stderr))
    print(f"warmup: {report.programs} programs ({report.built} built, {report.from_disk} "
          f"already in the cache) for {len(report.probes)} probes in {report.seconds:.1f} s")
    for name, why in report.failed:
        print(f"error: warmup probe {name} failed: {why}", file=sys.stderr)
    return 1 if report.failed else 0
