"""argparse front end. Each subcommand lives in its own module of this package with two
functions: `add_parser(subparsers)` and `run(args) -> int` (the exit status).

Errors are formatted here, once: a CustomLayersError becomes its message on stderr and exit 1;
an unreadable file or bad arguments exit 2; an OpenCL error (pyopencl.Error) or running out of
memory exit 1 with a message; Ctrl-C, even while the commands are still being imported, exits
130 with "interrupted". No traceback reaches the user unless --traceback is given.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from ..errors import CustomLayersError

# subcommand name -> module (in this package) that implements it
COMMANDS = {
    "validate": "validate",
    "jit": "jit",
    "layers": "layers",
    "run-layer": "run_layer",
    "devices": "devices",
    "run": "run",
    "benchmark": "benchmark",
    "demo": "demo",
}


class UsageError(CustomLayersError, ValueError):
    """Arguments that do not make sense together (exit 2)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="customlayers",
        description="Custom OpenCL layers in OpenVINO's CustomLayer format: validate, inspect, "
                    "run layers and whole models.")
    parser.add_argument("--traceback", action="store_true",
                        help="show Python tracebacks for errors (for bug reports)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, module in COMMANDS.items():
        mod = importlib.import_module(f"{__name__}.{module}")
        p = mod.add_parser(sub)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    # Ctrl-C at any moment, the first 0.3 s of imports (build_parser loads every command's
    # module, and numpy with them) included, is a one-line message and exit 130
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except UsageError as e:
        print(f"customlayers {args.command}: error: {e}", file=sys.stderr)
        return 2
    except CustomLayersError as e:
        if args.traceback:
            raise
        print(f"error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        if args.traceback:
            raise
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        print(f"error: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    except MemoryError as e:
        if args.traceback:
            raise
        print(f"error: out of host memory{f' ({e})' if str(e) else ''}", file=sys.stderr)
        return 1
    except Exception as e:
        if args.traceback or not _is_opencl_error(e):
            raise
        print(f"error: OpenCL: {e}", file=sys.stderr)
        return 1


def _is_opencl_error(e: BaseException) -> bool:
    """Whether `e` is a pyopencl.Error. Looked up in sys.modules rather than imported: commands
    that never touch OpenCL stay quick to start, and if pyopencl was never imported, no error
    can be one of its."""
    cl = sys.modules.get("pyopencl")
    return cl is not None and isinstance(e, cl.Error)
