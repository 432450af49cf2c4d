"""Options shared by several subcommands, and their effect."""
from __future__ import annotations

import argparse


def add_build_options(parser: argparse.ArgumentParser, device: bool = True) -> None:
    """-d/--device, --no-cache, --verbose."""
    if device:
        parser.add_argument("-d", "--device", default=None,
                            help="OpenCL device: CPU, GPU, or part of a device name "
                                 "(default: the best one, a GPU if there is one)")
    parser.add_argument("--no-cache", action="store_true",
                        help="do not read or write the on-disk program cache")
    parser.add_argument("--verbose", action="store_true",
                        help="report each program-cache hit and miss on stderr")


def build_cache(args: argparse.Namespace):
    """The program cache the options ask for, for the command's Engine: --no-cache turns the
    disk off, --verbose reports hits and misses; unset, the settings (environment) decide."""
    from ..runtime.cache import ProgramCache
    return ProgramCache(enabled=False if getattr(args, "no_cache", False) else None,
                        verbose=True if getattr(args, "verbose", False) else None)


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


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0 (a seed); argparse reports anything else as a usage error."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, found {text!r}")
    return value
