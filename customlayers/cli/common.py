"""Options shared by several subcommands, and their effect."""
from __future__ import annotations

import argparse
import os


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


def apply_build_options(args: argparse.Namespace) -> None:
    """The settings module reads these switches from the environment (one place for settings)."""
    if getattr(args, "no_cache", False):
        os.environ["CUSTOMLAYERS_NO_CACHE"] = "1"
    if getattr(args, "verbose", False):
        os.environ["CUSTOMLAYERS_VERBOSE"] = "1"


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
