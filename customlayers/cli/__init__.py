"""argparse front end. Each subcommand lives in its own module of this package with two
functions: `add_parser(subparsers)` and `run(args) -> int` (the exit status).

Errors are formatted here, once: a CustomLayersError becomes its message on stderr and exit 1;
a missing or unreadable input file (InputFileError, OSError: a model, its weights, a config, a
Python layer file, a .npy) or bad arguments exit 2; an OpenCL error (pyopencl.Error) or running out of
memory exit 1 with a message; Ctrl-C, even while the commands are still being imported, exits
130 with "interrupted". No traceback reaches the user unless --traceback is given, but one: an
error raised in the user's own Python layer is followed by its traceback, their frames only
(user_traceback.py).

Rooms: model_commands/ > layer_commands/ > user_files/, one-way; common.py, strict_parser.py,
user_traceback.py and devices.py beside them.

May import: every floor below (runtime, integrations excepted), lazily where a command
needs it, so that `--help` starts without OpenCL.
"""
from __future__ import annotations

import argparse
import importlib
import sys
import warnings

from ..errors import CustomLayersError, InputFileError, LayerRedefinedWarning, NoSuchDeviceError
from ..terminal import terminal_safe_output
from .strict_parser import StrictParser

# subcommand name -> module (in this package) that implements it
COMMANDS = {
    "validate": "layer_commands.validate",
    "jit": "layer_commands.jit",
    "layers": "layer_commands.layers",
    "run-layer": "layer_commands.run_layer",
    "devices": "devices",
    "run": "model_commands.run",
    "benchmark": "model_commands.benchmark",
    "compile": "model_commands.compile",
    "inspect": "model_commands.inspect",
    "check": "layer_commands.check",
    "demo": "model_commands.demo",
    "warmup": "model_commands.warmup",
}


class UsageError(CustomLayersError, ValueError):
    """Arguments that do not make sense together (exit 2)."""


def package_version() -> str:
    """The installed distribution's version; the package's own constant when it runs from a
    source tree that was never installed (python cli.py in a fresh clone)."""
    from importlib import metadata
    try:
        return metadata.version("customlayers")
    except metadata.PackageNotFoundError:
        from .. import __version__
        return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = StrictParser(
        prog="customlayers", commands=True,
        description="Custom OpenCL layers in OpenVINO's CustomLayer format: validate, inspect, "
                    "run layers and whole models.")
    parser.add_argument("--traceback", action="store_true",
                        help="show Python tracebacks for errors (for bug reports)")
    parser.add_argument("--version", action="version",
                        version=f"customlayers {package_version()}")
    # every subcommand's parser is strict too: no abbreviations, no glued short options
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=StrictParser)
    sub.required = True
    for name, module in COMMANDS.items():
        mod = importlib.import_module(f"{__name__}.{module}")
        p = mod.add_parser(sub)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    # Ctrl-C at any moment, the first 0.3 s of imports (build_parser loads every command's
    # module, and numpy with them) included, is a one-line message and exit 130. Whatever is
    # printed has its control characters escaped (terminal.py): names and paths are the user's
    if argv is None:                    # the command line: Ctrl-C ends even a kernel's wait
        from .interrupt import end_on_interrupt
        end_on_interrupt()
    with terminal_safe_output():
        try:
            return _main(argv)
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return 130


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    with warnings.catch_warnings():
        if not args.traceback:
            warnings.showwarning = _show_warning
        # the commands print a load's diagnostics, CL070 among them, themselves
        warnings.filterwarnings("ignore", category=LayerRedefinedWarning)
        return _run(args)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Our own warnings (an unwritable cache, ...) as one `warning:` line each, without the
    Python source line that warnings prints by default; others as Python prints them."""
    if category.__module__.split(".")[0] == __name__.split(".")[0]:
        print(f"warning: {message}", file=file or sys.stderr)
    else:
        _PYTHON_SHOW_WARNING(message, category, filename, lineno, file, line)


_PYTHON_SHOW_WARNING = warnings.showwarning


def _run(args) -> int:
    try:
        return int(args._run(args) or 0)
    except UsageError as e:
        print(f"customlayers {args.command}: error: {e}", file=sys.stderr)
        return 2
    except (InputFileError, NoSuchDeviceError) as e:   # a missing input file or device: exit 2
        if args.traceback:
            raise
        print(f"error: {e}", file=sys.stderr)
        return 2
    except CustomLayersError as e:
        if args.traceback:
            raise
        print(f"error: {e}{_kernel_bug_hint(args, e)}", file=sys.stderr)
        if e.user_code and e.__cause__ is not None:
            from .user_traceback import user_traceback
            print(user_traceback(e.__cause__), file=sys.stderr)
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
        print(f"error: OpenCL: {e}{_kernel_bug_hint(args, e)}", file=sys.stderr)
        return 1


def _kernel_bug_hint(args, e: BaseException) -> str:
    """A run that failed on the device may be a kernel out of bounds: name the two modes that
    find one, where the command has them and they were not on."""
    from ..errors import ExecutionError, KernelWriteError
    if not hasattr(args, "check_bounds") or args.check_bounds or args.sanitize or \
            getattr(e, "user_code", False) or isinstance(e, KernelWriteError):
        return ""       # a Python layer's own error, or a finding that says where already
    if isinstance(e, ExecutionError) or _is_opencl_error(e):
        from .common import KERNEL_BUG_HINT
        return f"\n{KERNEL_BUG_HINT}"
    return ""


def _is_opencl_error(e: BaseException) -> bool:
    """Whether `e` is a pyopencl.Error. Looked up in sys.modules rather than imported: commands
    that never touch OpenCL stay quick to start, and if pyopencl was never imported, no error
    can be one of its."""
    cl = sys.modules.get("pyopencl")
    return cl is not None and isinstance(e, cl.Error)
