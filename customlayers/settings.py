"""Every environment variable the package reads, with its default. Nothing else reads os.environ.

CUSTOMLAYERS_CACHE_DIR   where compiled programs are cached (default: the user's cache directory,
                         e.g. ~/.cache/customlayers)
CUSTOMLAYERS_NO_CACHE    "1" turns the disk cache off (the in-memory cache stays)
CUSTOMLAYERS_VERBOSE     "1" reports each cache hit and miss and each build on stderr
CUSTOMLAYERS_DEVICE      default device selector (CPU, GPU, or part of a device name)
CUSTOMLAYERS_TUNING      default kernel selection by timing: off, fast (the default) or full;
                         `--tuning` and Network(tuning=...) override it
CUSTOMLAYERS_CPU_VECTOR_WIDTH  8 or 16: the float vector width the CPU kernels are written
                         for, instead of the one the device prefers (16 on AVX-512, 8 on
                         AVX2); 8 runs the AVX2 kernels on an AVX-512 machine (tests, CI)
CUSTOMLAYERS_BUILD_PROCESSES  how many worker processes compile programs (each with its own
                         context); default: up to 8 (at most the cores) on NVIDIA's OpenCL and
                         on PoCL, whose compilers build one program at a time per process (on
                         PoCL at most POCL_MAX_PTHREAD_COUNT), 0 elsewhere; 0 turns them off
CUSTOMLAYERS_KEEP_BINARIES  "1": the program cache keeps every program's binary (warm loads read
                         it: about 5 ms a program on PoCL); "0": none (a new process builds the
                         source again, which the driver's own cache answers: 30 ms on PoCL);
                         default: binaries, except on a PoCL that specializes its work-groups
                         (POCL_WORK_GROUP_SPECIALIZATION=1), whose binary costs a compile of
                         every kernel that no launch then uses
POCL_KERNEL_CACHE        PoCL's own: "0" turns its kernel cache off (the program cache then
                         keeps binaries)
POCL_WORK_GROUP_SPECIALIZATION  PoCL's own: "1" compiles each kernel again for every work-group
                         size it is launched with; an Engine on PoCL sets "0" where it is unset
                         (every launch runs the one work-group function the program's binary
                         holds; the program cache then keeps binaries on PoCL)
CUSTOMLAYERS_CHECK_TIMEOUT  seconds a kernel may run under --check-bounds or --sanitize before
                         it is stopped and reported as a loop that never ends (default 600, at
                         most 1e6; a note on stderr after 30 s says it is still running)
CUSTOMLAYERS_NO_MACHINE_CODE  "1" leaves a package's NVIDIA machine code out of the driver's
                         cache: its programs' PTX is compiled at load (to compare, or rule it out)
CUDA_CACHE_PATH, CUDA_CACHE_DISABLE  NVIDIA's own: where its driver keeps compiled code (default
                         ~/.nv/ComputeCache), and "1" for none; a package's code is put there

A bad value is a ConfigError naming the variable (or argument) and the values it takes.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from .errors import ConfigError


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def cache_dir() -> Path:
    value = os.environ.get("CUSTOMLAYERS_CACHE_DIR")
    if value:
        return Path(value)
    import platformdirs
    return Path(platformdirs.user_cache_dir("customlayers"))


def cache_enabled() -> bool:
    return not _flag("CUSTOMLAYERS_NO_CACHE")


def verbose() -> bool:
    return _flag("CUSTOMLAYERS_VERBOSE")


def default_device() -> str | None:
    return os.environ.get("CUSTOMLAYERS_DEVICE") or None


TUNING_MODES = ("off", "fast", "full")
DEFAULT_TUNING = "fast"


def tuning_mode(given: str | None = None) -> str:
    """`given` (Network's tuning argument, --tuning), else CUSTOMLAYERS_TUNING, else fast; a
    ConfigError naming the argument or the variable for a value that is not a mode."""
    modes = ", ".join(TUNING_MODES)
    if given is not None:
        if given not in TUNING_MODES:
            raise ConfigError(f"tuning={given!r} is not one of {modes}: pass one of them, or "
                              f"None for CUSTOMLAYERS_TUNING's mode (else {DEFAULT_TUNING})")
        return given
    value = os.environ.get("CUSTOMLAYERS_TUNING", "").strip().lower()
    if not value:
        return DEFAULT_TUNING
    if value not in TUNING_MODES:
        raise ConfigError(f"CUSTOMLAYERS_TUNING='{value}' is not one of {modes}; unset it "
                          f"({DEFAULT_TUNING}), or set it to one of them")
    return value


def check_switches(where: str, optional: tuple = (), **values) -> None:
    """A ConfigError naming the first of `values` (`where`'s arguments) that is not a bool (None
    too for the names in `optional`, where None means a default): a string is truthy, so
    fuse_attention="False" would turn the pass on."""
    import numpy as np                   # (this module is read by the lightest processes)
    for name, value in values.items():
        if isinstance(value, (bool, np.bool_)) or (value is None and name in optional):
            continue
        takes = "True, False or None" if name in optional else "True or False"
        raise ConfigError(f"{where}({name}={value!r}): expected {takes}, not "
                          f"{type(value).__name__}")


CHECK_TIMEOUT_S = 600.0
CHECK_TIMEOUT_MAX_S = 1e6


def check_timeout_s() -> float:
    """CUSTOMLAYERS_CHECK_TIMEOUT: how long a checked kernel (--check-bounds, --sanitize) may
    run, in seconds; ConfigError for anything but a positive number."""
    value = os.environ.get("CUSTOMLAYERS_CHECK_TIMEOUT", "").strip()
    if not value:
        return CHECK_TIMEOUT_S
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    # (past about 2e6 s the wait itself overflows: "no limit" is the cap, 11.6 days)
    if not 0 < seconds <= CHECK_TIMEOUT_MAX_S:
        raise ConfigError(f"CUSTOMLAYERS_CHECK_TIMEOUT={value!r}: expected a positive number of "
                          f"seconds up to {CHECK_TIMEOUT_MAX_S:g} (default {CHECK_TIMEOUT_S:g})")
    return seconds


CPU_VECTOR_WIDTHS = (8, 16)


def cpu_vector_width() -> int | None:
    """CUSTOMLAYERS_CPU_VECTOR_WIDTH, or None where it is not set; a ConfigError naming the
    variable for a value that is not 8 or 16."""
    value = os.environ.get("CUSTOMLAYERS_CPU_VECTOR_WIDTH", "").strip()
    if not value:
        return None
    if value not in tuple(str(w) for w in CPU_VECTOR_WIDTHS):
        raise ConfigError(f"CUSTOMLAYERS_CPU_VECTOR_WIDTH='{value}' is not 8 or 16; unset it "
                          f"(the device's width), or set it to 8 (AVX2 kernels) or 16 (AVX-512)")
    return int(value)


def package_root() -> Path:
    """The folder holding the customlayers package this process imported."""
    return Path(sys.modules["customlayers"].__file__).resolve().parents[1]


def child_environment(**changes: str | None) -> dict:
    """This process's environment for a child process of ours: the customlayers package
    importable from where this one was imported (a script run from another folder, or a
    sys.path edit, would otherwise leave the child another copy or none), with `changes`
    (a None value unsets the variable)."""
    env = dict(os.environ)
    root = str(package_root())
    env["PYTHONPATH"] = os.pathsep.join([root] + ([env["PYTHONPATH"]]
                                                  if env.get("PYTHONPATH") else []))
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def nvidia_cache_dir() -> Path | None:
    """The folder where NVIDIA's driver keeps the machine code it compiles (CUDA_CACHE_PATH,
    by default ~/.nv/ComputeCache); None where CUDA_CACHE_DISABLE turns its cache off."""
    if _flag("CUDA_CACHE_DISABLE"):
        return None
    value = os.environ.get("CUDA_CACHE_PATH")
    return Path(value) if value else Path.home() / ".nv" / "ComputeCache"


def keep_binaries() -> bool | None:
    """CUSTOMLAYERS_KEEP_BINARIES: True ("1") or False ("0"), None where unset (by device);
    a ConfigError naming the variable for any other value."""
    value = os.environ.get("CUSTOMLAYERS_KEEP_BINARIES", "").strip()
    if not value:
        return None
    if value not in ("0", "1"):
        raise ConfigError(f"CUSTOMLAYERS_KEEP_BINARIES='{value}' is not 0 or 1; unset it (by "
                          f"device), or set 1 (keep every program's binary) or 0 (none)")
    return value == "1"


def _pocl_option_on(name: str) -> bool:
    """One of PoCL's boolean options that are on by default, read as PoCL reads it: on where
    unset; where set, on only for a value that starts with "1"."""
    value = os.environ.get(name)
    return True if value is None else value.startswith("1")


def pocl_kernel_cache_on() -> bool:
    """Whether PoCL keeps the programs it compiles (POCL_KERNEL_CACHE)."""
    return _pocl_option_on("POCL_KERNEL_CACHE")


def pocl_specializes_work_groups() -> bool:
    """Whether PoCL compiles a kernel again for each work-group size it runs
    (POCL_WORK_GROUP_SPECIALIZATION, on by PoCL's default)."""
    return _pocl_option_on("POCL_WORK_GROUP_SPECIALIZATION")


def pocl_thread_cap() -> int | None:
    """POCL_MAX_PTHREAD_COUNT as a count (PoCL's own cap on its threads, which a Ray actor sets
    to its CPU share: integrations/placement.py), or None where it is unset or not a count."""
    value = os.environ.get("POCL_MAX_PTHREAD_COUNT", "").strip()
    return int(value) if value.isdigit() else None


def prefer_pocl_generic_work_groups() -> None:
    """POCL_WORK_GROUP_SPECIALIZATION=0 where the user has not set it (Engine, on PoCL).

    Why: a specializing PoCL compiles each kernel once more for every local size at its first
    launch, on top of the build: on the 2-core machine EfficientNet-B0's first inference spent
    7 s there after 4.7 s of builds. Off, every launch runs the work-group function for any
    size that the program's binary already holds, so the cache keeps binaries (a warm load
    reads them in about 5 ms a program instead of 30-50 ms from PoCL's cache), the build
    workers can compile it in parallel, and the first inference compiles nothing. The five
    torchvision models of bench/cold_start.py ran as fast either way (stop 28). A user who set
    the variable keeps their value. It is PoCL's own, so the user's kernels in this process
    see it too (compiled once more, for any size, at their next launch) and so do the
    processes started after it; PoCL reads it at launch, so an Engine made while other threads
    launch PoCL kernels races with their reads of the environment (make the Engine first)."""
    os.environ.setdefault("POCL_WORK_GROUP_SPECIALIZATION", "0")


def set_pyopencl_home(folder: str) -> None:
    """PYOPENCL_HOME, as pyopencl's import sets it (to its package folder): the OpenCL loader
    its wheel bundles finds the vendors through it, and crashed the process when called without
    it (a build worker calls that loader before it imports pyopencl: build_workers.py)."""
    os.environ["PYOPENCL_HOME"] = folder


def machine_code_wanted() -> bool:
    """Whether a package's NVIDIA machine code is put into the driver's cache at load."""
    return not _flag("CUSTOMLAYERS_NO_MACHINE_CODE")


def build_processes() -> int | None:
    """CUSTOMLAYERS_BUILD_PROCESSES as a count, or None where it is not set (the device's
    default); ConfigError naming the variable for a value that is not a count."""
    value = os.environ.get("CUSTOMLAYERS_BUILD_PROCESSES", "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) > 64:
        raise ConfigError(f"CUSTOMLAYERS_BUILD_PROCESSES='{value}' is not a count of worker "
                          f"processes from 0 (none) to 64")
    return int(value)
