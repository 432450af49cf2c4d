"""Options shared by several subcommands, and their effect."""
from __future__ import annotations

import argparse
import sys


def add_build_options(parser: argparse.ArgumentParser, device: bool = True,
                      no_cache: bool = True) -> None:
    """-d/--device, --no-cache (unless `no_cache` is False: a command whose job is to fill the
    cache), -cdir/--cache-dir, --verbose."""
    if device:
        parser.add_argument("-d", "--device", default=None,
                            help="OpenCL device: CPU, GPU, GPU.0, GPU.1, CPU.0 (numbered per "
                                 "type, as OpenVINO does: see `customlayers devices`), AUTO, or "
                                 "part of a device name (default: the best one, a GPU if any)")
    if no_cache:
        parser.add_argument("--no-cache", action="store_true",
                            help="do not read or write the on-disk program cache")
    parser.add_argument("-cdir", "--cache-dir", metavar="DIR", default=None,
                        help="keep compiled programs in DIR (as CUSTOMLAYERS_CACHE_DIR)")
    parser.add_argument("--verbose", action="store_true",
                        help="report each program-cache hit and miss on stderr (run, benchmark "
                             "and compile of a model: also each graph rewrite)")


def build_cache(args: argparse.Namespace):
    """The program cache the options ask for, for the command's Engine: --no-cache turns the
    disk off, -cdir/--cache-dir moves it, --verbose reports hits and misses; unset, the settings (environment) decide."""
    from ..runtime.device.cache import ProgramCache
    cache = ProgramCache(directory=getattr(args, "cache_dir", None) or None,
                         enabled=False if getattr(args, "no_cache", False) else None,
                         verbose=True if getattr(args, "verbose", False) else None)
    cache.check_directory()     # before anything runs: an unwritable folder is one warning
    return cache


def parse_params(items) -> dict[str, str]:
    """['k=v', ...] -> {'k': 'v'} (the value is kept as text, exactly)."""
    from . import UsageError
    params: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--param {item!r} is not KEY=VALUE")
        params[key.strip()] = value
    return params


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (a count); anything else is a usage error."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, found {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0 (a seed); argparse reports anything else as a usage error."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, found {text!r}")
    return value


def the_only_layer(requested: str | None, defined: list[str], valid: dict, where: str) -> str:
    """The layer a command works on: `requested` (--layer), or, when the configs define exactly
    one layer, that one. UsageError naming the valid layers otherwise. `defined`: every layer
    name the configs define, valid or not; `valid`: the valid ones by name; `where`: the
    configs, for messages."""
    from . import UsageError
    known = ", ".join(sorted(valid)) or "none"
    if requested is None:
        names = list(dict.fromkeys(defined))
        if len(names) != 1:
            raise UsageError(f"--layer is needed: {where} define {len(names)} layers "
                             f"(valid layers: {known})")
        requested = names[0]
    if requested not in valid:
        raise UsageError(f"no valid layer '{requested}' in {where} (valid layers: {known})")
    return requested


KERNEL_BUG_HINT = ("if a custom kernel may read or write out of bounds, run again with "
                   "--check-bounds or --sanitize (docs/debugging.md: Finding kernel bugs)")


def add_kernel_check_options(parser: argparse.ArgumentParser) -> None:
    """--check-bounds and --sanitize: the two ways to find a kernel that disagrees with its
    tensors (runtime/checks/bounds.py, runtime/checks/sanitize.py)."""
    parser.add_argument("--check-bounds", action="store_true",
                        help="run custom kernels with guard zones around every buffer and their "
                             "outputs pre-filled with NaN: report writes out of bounds (layer, "
                             "tensor, offset) and output elements never written (not reads "
                             "out of bounds: --sanitize sees those)")
    parser.add_argument("--sanitize", action="store_true",
                        help="also run custom kernels on Oclgrind, a simulator that checks every "
                             "memory access, and report invalid accesses at your .cl lines "
                             "(installs Debian's oclgrind on first use)")


def kernel_checks_asked(args) -> list[str]:
    """The kernel-check flags given (add_kernel_check_options), as spelled on the command line."""
    return [flag for flag, on in (("--check-bounds", getattr(args, "check_bounds", False)),
                                  ("--sanitize", getattr(args, "sanitize", False))) if on]


# what guard zones cannot see, said wherever --check-bounds runs without --sanitize: a kernel
# that reads past a short Data blob or input gives wrong numbers and no finding
CHECK_BOUNDS_NOTE = ("note: --check-bounds does not see reads out of bounds (a kernel reading "
                     "past a Data blob or an input that is too short gives wrong numbers and no "
                     "finding); --sanitize (Oclgrind) checks every read and write")


def check_bounds_note(args) -> None:
    """Print CHECK_BOUNDS_NOTE on stderr when --check-bounds ran without --sanitize."""
    if getattr(args, "check_bounds", False) and not getattr(args, "sanitize", False):
        print(CHECK_BOUNDS_NOTE, file=sys.stderr)


def report_kernel_problems(problems) -> int:
    """Print what --check-bounds / --sanitize found; the exit status (1 when anything)."""
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if problems else 0


def warn_if_not_finite(outputs, what: str, inputs=None) -> None:
    """A NaN or infinity in an output is often a kernel reading past its input: say how to find
    out; unless an input (`inputs`: name -> array) holds one too, which is then named (a NaN in
    the user's .npy was blamed on the kernel)."""
    import numpy as np

    def non_finite(array) -> int:
        array = np.asarray(array)
        return int(np.count_nonzero(~np.isfinite(array))) if array.dtype.kind in "fc" else 0
    given = {name: n for name, n in ((k, non_finite(a)) for k, a in (inputs or {}).items()) if n}
    for name, array in outputs.items():
        bad = non_finite(array)
        if not bad:
            continue
        if given:
            why = ", ".join(f"input '{k}' holds {n}" for k, n in given.items())
            print(f"warning: {what} output '{name}' has {bad} non-finite value(s); {why} (NaN "
                  f"or infinity), passed on", file=sys.stderr)
        else:
            print(f"warning: {what} output '{name}' has {bad} non-finite value(s); "
                  f"{KERNEL_BUG_HINT}", file=sys.stderr)


def add_python_layers_option(p: argparse.ArgumentParser) -> None:
    """-l: CPU layers in Python (the flag of OpenVINO's samples for CPU extensions)."""
    p.add_argument("-l", "--layers", action="extend", nargs="+", default=[],
                   metavar="LAYERS.py",
                   help="Python module(s) of CPU layers (@cpu_layer classes): -l a.py b.py, or "
                        "-l repeated. A type they define replaces a config's or a built-in of "
                        "that type")
