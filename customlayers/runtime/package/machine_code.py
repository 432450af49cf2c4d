"""NVIDIA's machine code for a package's programs: captured when the package is compiled,
installed when it is loaded, so that a fresh machine does not JIT-compile the PTX.

Why: NVIDIA's OpenCL gives PTX as a program's binary, and loading a PTX binary compiles it to
the GPU's machine code. That takes 1.3-2.5 s for ResNet-50's 28 programs on an H200, one
program at a time per process, and it was most of a package's cold load (measured with
bench/cold_start.py --package; merging the programs into one PTX module took as long: the
time follows the code's size, not the number of programs). The driver keeps the code it
compiles in its compute cache folder (CUDA_CACHE_PATH, by default ~/.nv/ComputeCache), one file
per program under a name made from the PTX, the options, the driver and the GPU, and reads the
file whenever a program with that name is loaded, also from a process that started before the
file was there.

So `capture` loads the package's binaries in a child process whose cache folder is new and
empty, and returns the files the driver wrote there (its index aside); they go into the package
as parts `machine code <path>`. `install` writes them into this process's cache folder before the
binaries are loaded (a file already there is kept; each one written whole, then renamed into
place). The driver itself decides whether a file fits: another driver or GPU computes other
names and never reads these, and a miss costs only the JIT. The files reach the disk only from
parts whose size and sha256 the container checked, and only under names of the driver's form.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from ... import settings
from ...errors import DeviceError, PackageError
from ..device.device import device_position

PART_PREFIX = "machine code "
_PATH = re.compile(r"[0-9A-Za-z_-][0-9A-Za-z_.-]{0,63}")
_MAX_DEPTH = 4
_MAX_BYTES = 512 << 20       # a sanity bound: ResNet-50's code is 1.6 MiB
_CHILD_TIMEOUT_S = 600


def has_driver_cache(device) -> bool:
    """Whether `device`'s driver compiles its binaries to machine code through NVIDIA's
    compute cache (NVIDIA's OpenCL platform)."""
    return "NVIDIA" in device.platform.name or "NVIDIA" in device.vendor


def is_cache_path(rel: str) -> bool:
    """Whether `rel` has the form of a file in the driver's cache folder (a relative path of
    a few plain names; never '..', an absolute path or the folder's index)."""
    names = rel.split("/")
    return 0 < len(names) <= _MAX_DEPTH and rel != "index" and \
        all(_PATH.fullmatch(n) and n not in (".", "..") for n in names)


def capture_machine_code(device, binaries: dict[str, tuple[bytes, str]]) -> tuple[list, str]:
    """([(path, bytes)], '') of the machine code `device`'s driver compiles from `binaries`
    ({key: (binary, options)}), or ([], why) where none can be captured: not an NVIDIA
    device, or the child process failed."""
    if not binaries or not has_driver_cache(device):
        return [], ""
    try:
        position = device_position(device)      # the child opens the device by it
    except DeviceError as e:
        return [], str(e)
    with tempfile.TemporaryDirectory(prefix="customlayers-machinecode-") as tmp:
        job = Path(tmp) / "job"
        job.mkdir()
        entries = []
        for n, (binary, options) in enumerate(binaries.values()):
            (job / f"{n}.bin").write_bytes(binary)
            entries.append([f"{n}.bin", options])
        (job / "job.json").write_text(json.dumps({
            "position": list(position), "device": device.name, "programs": entries}))
        cache = Path(tmp) / "cache"
        env = dict(os.environ, CUDA_CACHE_PATH=str(cache))
        env.pop("CUDA_CACHE_DISABLE", None)
        env["CUDA_CACHE_MAXSIZE"] = str(_MAX_BYTES)
        try:
            done = subprocess.run([sys.executable, "-m", f"{__package__}.machine_code_child",
                                   str(job)], env=env, capture_output=True, text=True,
                                  timeout=_CHILD_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            return [], f"the process compiling it failed ({type(e).__name__}: {e})"
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            return [], f"the process compiling it failed ({last})"
        files, total = [], 0
        for path in sorted(p for p in cache.rglob("*") if p.is_file()):
            rel = path.relative_to(cache).as_posix()
            if not is_cache_path(rel):
                continue
            data = path.read_bytes()
            total += len(data)
            if total > _MAX_BYTES:
                return [], f"it is over {_MAX_BYTES >> 20} MiB"
            files.append((rel, data))
        if not files:
            return [], "the driver wrote no compiled code (its cache is off)"
        return files, ""


def install_machine_code(parts: dict, say=lambda m: None) -> int:
    """Write the package's `driver code` parts ({part name: bytes}) into the driver's cache
    folder; the number of files written. Nothing where the driver's cache is off
    (CUDA_CACHE_DISABLE) or CUSTOMLAYERS_NO_MACHINE_CODE is set; a folder that cannot be
    written is one notice (the load then compiles the PTX). PackageError for a part whose
    name is not a cache file's."""
    code = {name[len(PART_PREFIX):]: data for name, data in parts.items()
            if name.startswith(PART_PREFIX)}
    for rel in code:
        if not is_cache_path(rel):
            raise PackageError(f"the package's part '{PART_PREFIX}{rel}' is not named as a "
                               f"file of the driver's cache: it is refused", PART_PREFIX + rel)
    root = settings.nvidia_cache_dir()
    if not code or root is None or not settings.machine_code_wanted():
        return 0
    written = 0
    try:
        for rel, data in code.items():
            target = root.joinpath(*rel.split("/"))
            if target.exists():
                continue
            target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(prefix=".customlayers-", dir=target.parent)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(temp, target)
            except BaseException:
                Path(temp).unlink(missing_ok=True)
                raise
            written += 1
    except OSError as e:
        say(f"note: the package's compiled NVIDIA code could not be written to {root} "
            f"({e.strerror or e}); the driver compiles its programs instead (slower, once "
            f"per machine): make CUDA_CACHE_PATH a writable folder")
    return written
