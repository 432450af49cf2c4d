"""Building OpenCL programs, and build errors that point into the user's own files.

The program text carries `#line 1 "<file>"` directives (program.py). PoCL honours them; NVIDIA's
compiler accepts them but reports lines of the whole text as `<kernel>:LINE:COL` (checked on an
H200, driver 580), so every log line whose file is not a user file is mapped back through the
program's line map as well.

Programs are built with the low-level `pyopencl._cl._Program`: pyopencl's `Program.build` adds
its own include options and writes its own cache under the user's home, which the program cache
(cache.py) replaces. The device owns its compiler: this module and the cache are runtime's, and
the JIT (jit/) only writes program text.

`build_layer_kernel` is the build step of the one layer-compile pipeline: a custom layer's
program (a jit GeneratedProgram, of either dialect: Registry.bind for SimpleGPU, mvcl_build.py
for each MVCL stage) built through the program cache, its entry found and checked, every error
located at the descriptor.
"""
from __future__ import annotations

import hashlib
import os
import re
import sys
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import pyopencl as cl

from ... import settings
from ...errors import BindingError, KernelBuildError
from .kernel_info import kernel_by_name, kernel_names
from .limits import check_kernel_work_group

# the codes of validate --compile (config/codes.py) for what each step of the layer-compile
# pipeline finds, in either dialect
PREPARE_CODE = "CL081"   # tensors, formulas, attributes that do not work for these inputs
BUILD_CODE = "CL080"     # the compiler refuses the program, or the kernel's arguments differ
ENTRY_CODE = "CL044"     # the entry is not a kernel of the program

# -- building ----------------------------------------------------------------------------------


def describe_build_device(device) -> str:
    """'NAME (PLATFORM, driver DRIVER)' for messages."""
    return f"{device.name.strip()} ({device.platform.name.strip()}, driver {device.driver_version})"


def build_log(program, device) -> str:
    try:
        return program.get_build_info(device, cl.program_build_info.LOG) or ""
    except cl.Error:
        return ""


EXACT_DIVISION = "-cl-fp32-correctly-rounded-divide-sqrt"


def exact_division(device, options: str) -> str:
    """`options` with float division and sqrt correctly rounded where the device can: OpenCL
    lets them be 2.5 and 3 ulp off by default, and NVIDIA's are (DynamicQuantizeLinear's scale
    was an ulp off ONNX Runtime's, so its quantized values could round the other way); PoCL's
    are exact either way. Every program, built-in or the user's, divides the same everywhere."""
    try:
        exact = device.single_fp_config & cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT
    except (cl.Error, AttributeError):
        exact = 0
    if not exact or EXACT_DIVISION in options.split():
        return options
    return f"{options} {EXACT_DIVISION}".strip()


def compile_source(context, device, source: str, options: str = "", *,
                   line_map: Sequence = (), label: str = "",
                   save_dir: Path | None = None) -> tuple[cl.Program, str]:
    """Build `source` for `device`: (program, its compiler warnings mapped to the user's lines,
    '' when none). KernelBuildError (log mapped the same way) when the compiler refuses it."""
    options = exact_division(device, options)
    raw = cl._cl._Program(context, source)
    try:
        with _without_compiler_chatter():
            # the unwrapped build: pyopencl's wrapper warns "Non-empty compiler output
            # encountered" with the log at the generated text's lines, and we report the log
            # ourselves, mapped (compiler_warnings); a warnings filter around it would not hold
            # for builds in several threads
            raw._build(options=options.encode(), devices=[device])
    except cl.Error as e:
        raise build_error(source, options, device, build_log(raw, device) or str(e),
                          line_map, label, save_dir) from e
    return cl.Program(raw), compiler_warnings(build_log(raw, device), line_map)


def load_binary(context, device, binary: bytes, options: str = "") -> cl.Program:
    """A program from a binary this device produced earlier (raises cl.Error when unusable).
    Built unwrapped, as compile_source builds: pyopencl's wrapper adds `-I <its folder in this
    virtual environment>` to the options, and drivers key their own caches by the options
    (PoCL its compiled kernels, stop 26): every new checkout compiled every kernel again."""
    # (the unwrapped build never warns "Non-empty compiler output": nothing to silence)
    raw = cl._cl._Program(context, [device], [binary])
    raw._build(options=exact_division(device, options).encode(), devices=[device])
    return cl.Program(raw)


# what PoCL's clang prints on the process's own stderr during a build, beside the build log we
# report ourselves (mapped to the user's lines)
_CHATTER = re.compile(r"\d+ (?:warning|error)s? generated\.|\d+ warnings? and \d+ errors? "
                      r"generated\.")


_STDERR_LOCK = threading.Lock()


def say_on_stderr(text: str) -> None:
    """`text` and its newline written to stderr as one write, under one lock: builds run in
    parallel threads (parallel_build.py) and report at once, and print() writes a line and its
    end apart, so two threads' lines could run together."""
    with _STDERR_LOCK:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


class _HeldStderr:
    """The process's stderr held back while any build runs (builds run in parallel threads:
    parallel_build.py); when the last one ends, every line but the compiler's summaries is
    written out. One holder for all threads, so no thread restores another's redirection."""

    def __init__(self):
        self.lock = threading.Lock()
        self.depth = 0
        self.saved: int | None = None
        self.held = None

    def enter(self) -> None:
        with self.lock:
            self.depth += 1
            if self.depth > 1:
                return
            try:
                sys.stderr.flush()
                self.saved = os.dup(2)
            except (OSError, ValueError):      # no real stderr (embedded interpreters)
                self.saved = None
                return
            self.held = tempfile.TemporaryFile()
            os.dup2(self.held.fileno(), 2)

    def leave(self) -> None:
        with self.lock:
            self.depth -= 1
            if self.depth or self.saved is None:
                return
            os.dup2(self.saved, 2)
            os.close(self.saved)
            self.saved = None
            self.held.seek(0)
            text = self.held.read().decode("utf-8", "replace")
            self.held.close()
        kept = [line for line in text.splitlines()
                if line.strip() and not _CHATTER.fullmatch(line.strip())]
        if kept:
            say_on_stderr("\n".join(kept))


_HELD_STDERR = _HeldStderr()


@contextmanager
def _without_compiler_chatter():
    """PoCL's clang prints "N warnings generated." on the process's own stderr during a
    build, beside the build log we report ourselves: hold it back."""
    _HELD_STDERR.enter()
    try:
        yield
    finally:
        _HELD_STDERR.leave()


def compiler_warnings(log: str, line_map: Sequence = ()) -> str:
    """The warning lines of a successful build's log, mapped to the user's files and lines,
    each once (PoCL logs some twice); '' when there are none."""
    seen: list[str] = []
    for line in map_build_log(log, line_map).splitlines():
        if re.search(r"\bwarning:", line) and line not in seen:
            seen.append(line)
    return "\n".join(seen)


def program_binary(program: cl.Program, device) -> bytes:
    devices = program.get_info(cl.program_info.DEVICES)
    binaries = program.get_info(cl.program_info.BINARIES)
    for dev, binary in zip(devices, binaries):
        if dev == device:
            return bytes(binary)
    return bytes(binaries[0])


def kernel_arg_count(program: cl.Program, entry: str) -> int | None:
    """Number of arguments of kernel `entry`, or None when the program has no such kernel."""
    try:
        return cl.Kernel(program, entry).num_args
    except cl.Error:
        return None


# -- errors ------------------------------------------------------------------------------------

def save_generated_source(source: str, directory: Path | None = None) -> str:
    """Keep the generated text of a failed build where the user can open it: `failed/` in the
    cache directory, else the temporary directory."""
    name = hashlib.sha256(source.encode("utf-8", "surrogateescape")).hexdigest()[:16] + ".cl"
    base = Path(directory) if directory is not None else settings.cache_dir()
    for folder in (base / "failed", Path(tempfile.gettempdir()) / "customlayers"):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / name
            path.write_bytes(source.encode("utf-8", "surrogateescape"))
            return str(path)
        except OSError:
            continue
    return "(could not be saved)"


def _user_files(line_map: Sequence) -> list[str]:
    names = {entry[0] for entry in line_map if entry}
    return sorted(names, key=len, reverse=True)   # longest first: a path may contain another


def _location_pattern(line_map: Sequence) -> re.Pattern:
    known = "|".join(re.escape(n) for n in _user_files(line_map))
    # NVIDIA names the text `<kernel>`; PoCL names a temporary file and may add
    # `<Spelling=FILE:L:C>` after a location inside a macro expansion
    other = r"<[^>\s]+>|[^\s:<>=]+"
    file_part = f"{known}|{other}" if known else other
    return re.compile(f"(?P<file>{file_part}):(?P<line>\\d+)(?::(?P<col>\\d+))?(?=[:\\s>])")


def map_build_log(log: str, line_map: Sequence, generated_path: str | None = None) -> str:
    """Rewrite `FILE:LINE:COL:` in a compiler log: user files stay; any other file is the
    generated text, mapped back through `line_map` (to the saved generated file when the line
    is one the JIT wrote)."""
    users = set(_user_files(line_map))

    def replace(m: re.Match) -> str:
        file, line = m.group("file"), int(m.group("line"))
        col = f":{m.group('col')}" if m.group("col") else ""
        if file in users:
            return m.group(0)
        origin = line_map[line - 1] if 1 <= line <= len(line_map) else None
        if origin:
            return f"{origin[0]}:{origin[1]}{col}"
        return f"{generated_path or file}:{line}{col}"

    return _location_pattern(line_map).sub(replace, log)


def build_error(source: str, options: str, device, log: str, line_map: Sequence = (),
                label: str = "", save_dir: Path | None = None) -> KernelBuildError:
    path = save_generated_source(source, save_dir)
    what = f"layer '{label}': " if label else ""
    return KernelBuildError(f"{what}the OpenCL program does not build",
                            log=map_build_log(log, line_map, path), source_path=path,
                            options=options, device=describe_build_device(device),
                            layer=label or None)


_OPTION_LOG = re.compile(r"invalid build option|unknown argument|unsupported option", re.I)


def options_rejected(error: KernelBuildError) -> bool:
    """Whether the build failed on its options rather than on the source: the driver said
    CL_INVALID_BUILD_OPTIONS (the cause compile_source chains), or its log says so."""
    cause = error.__cause__
    code = getattr(cause, "code", None) if isinstance(cause, cl.Error) else None
    return code == cl.status_code.INVALID_BUILD_OPTIONS or bool(_OPTION_LOG.search(error.log))


# -- the build step of a custom layer ----------------------------------------------------------
@dataclass(frozen=True)
class BuiltKernel:
    program: cl.Program
    kernel: cl.Kernel
    warnings: str = ""       # the compiler's warnings, mapped to the user's lines ('' if none)


def build_layer_kernel(engine, spec, program, options: str, *, who: str, location, label: str,
                       options_location=None,
                       check_kernel: Callable[[cl.Kernel], None] | None = None) -> BuiltKernel:
    """Build a custom layer's `program` (jit GeneratedProgram: text, entry, line map, local
    size) with `options` through the engine's program cache, then finish_layer_kernel. Errors
    are located at `location` and name the layer as `who` says ("layer type 'X'", "MVCL layer
    'X' stage 1"); a build that failed on the options is located at `options_location` when one
    is given. A network builds its custom layers' programs in its parallel batch instead and
    hands each result to finish_layer_kernel itself (Registry.finish, mvcl_build.finish_stage)."""
    warnings = ""
    try:
        built, warnings = engine.cache.build_with_warnings(
            engine.context, engine.device, program.text, options, line_map=program.line_map,
            label=label)
    except KernelBuildError as e:
        built = e
    kernel = finish_layer_kernel(engine, spec, program, built, who=who, location=location,
                                 options_location=options_location, check_kernel=check_kernel)
    return BuiltKernel(built, kernel, warnings)


def place_build_error(e: KernelBuildError, *, location, layer: str, user_options: str = "",
                      options_location=None) -> KernelBuildError:
    """The compiler's refusal of a custom layer's program, placed at its descriptor (at
    `options_location`, the descriptor's CompilerOptions, when the options are what it
    refused), with the user's own options."""
    if options_location is not None:
        e.user_options = user_options
        if options_rejected(e):
            e.options_rejected = True
            return e.at(options_location, BUILD_CODE, layer)
    return e.at(location, BUILD_CODE, layer)


def finish_layer_kernel(engine, spec, program, built, *, who: str, location,
                        options_location=None,
                        check_kernel: Callable[[cl.Kernel], None] | None = None) -> cl.Kernel:
    """The checks of a built custom layer program, in either dialect: its entry is a kernel of
    it, the dialect's checks of that kernel (`check_kernel`: its argument count ...), and the
    kernel's own work-group limit against the program's local size. `built`: the cl.Program, or
    the error its build raised (a KernelBuildError is raised here, placed at the descriptor by
    place_build_error)."""
    if isinstance(built, KernelBuildError):
        raise place_build_error(built, location=location, layer=spec.name,
                                user_options=program.options, options_location=options_location)
    if isinstance(built, BaseException):
        raise built
    kernel = entry_kernel(built, program.entry, who=who, location=location, layer=spec.name)
    if check_kernel is not None:
        check_kernel(kernel)
    check_kernel_work_group(spec, program.local_size, kernel, engine.device)
    return kernel


def entry_kernel(program: cl.Program, entry: str, *, who: str, location, layer: str) -> cl.Kernel:
    kernel = kernel_by_name(program, entry)
    if kernel is None:
        found = ", ".join(kernel_names(program)) or "none"
        raise BindingError(f"{who}: entry '{entry}' ({location}) is not a kernel of its sources; "
                           f"kernels found: {found}").at(location, ENTRY_CODE, layer)
    return kernel
