"""NVIDIA's machine code for a package's programs: captured when the package is compiled,
installed when it is loaded, so that a fresh machine does not JIT-compile the PTX.

Why: NVIDIA's OpenCL gives PTX as a program's binary, and loading a PTX binary compiles it to
the GPU's machine code. That takes 2.1-2.2 s for ResNet-50's 28 programs on an H200 or H100
(about 0.08 s a program), one program at a time per process, and it was most of a package's
cold load (bench/cold_start.py --package; merging the programs into one PTX module took as
long: the time follows the code's size, not the number of programs). The driver keeps the
code it compiles in its compute cache folder (CUDA_CACHE_PATH, by default ~/.nv/ComputeCache),
one file per program under a name made from the PTX, the options, the driver and the GPU, and
reads the file whenever a program with that name is loaded, also in a process that started
before the file was there.

So `capture_machine_code` loads the package's binaries in a child process whose cache folder
is new and empty, and returns the files the driver wrote there (its index aside); they go into
the package as parts `machine code <path>`: one per program, and a few the driver compiles for
every context (its built-ins). `install_machine_code` writes them into the folder this
process's driver reads (the one CUDA_CACHE_PATH named when OpenCL started) before the binaries
are loaded (a file already there is kept; each one written whole, then renamed into place).
The driver itself decides whether a file fits: another driver or GPU computes other names and
never reads these, and a miss costs only the JIT. The files reach the disk only from parts
whose size and sha256 the container checked, and only under names of the driver's form.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from ... import settings
from ...errors import DeviceError, PackageError
from ...files import atomic_writer
from ..device.device import device_position, driver_cache_folder
from ..device.limits import is_nvidia_platform

PART_PREFIX = "machine code "
_PATH = re.compile(r"[0-9A-Za-z_-][0-9A-Za-z_.-]{0,63}")
_MAX_DEPTH = 4
_MAX_BYTES = 512 << 20       # a sanity bound: ResNet-50's code is 1.6 MiB
_CHILD_TIMEOUT_S = 600


def has_driver_cache(device) -> bool:
    """Whether `device`'s driver compiles its binaries to machine code through NVIDIA's
    compute cache (limits.is_nvidia_platform)."""
    return is_nvidia_platform(device)


def is_cache_path(rel: str) -> bool:
    """Whether `rel` has the form of a file in the driver's cache folder (a relative path of
    a few plain names; never '..', an absolute path or the folder's index)."""
    names = rel.split("/")
    return 0 < len(names) <= _MAX_DEPTH and rel != "index" and \
        all(_PATH.fullmatch(n) and n not in (".", "..") for n in names)


def capture_machine_code(device, binaries: dict[str, tuple[bytes, str]]) -> tuple[list, str]:
    """([(path, bytes)], '') of the machine code `device`'s driver compiles from `binaries`
    ({key: (binary, options)}), or ([], why) where none can be captured; ([], '') where the
    device has no such code (not NVIDIA's platform)."""
    if not binaries or not has_driver_cache(device):
        return [], ""
    return capture_in_child(device, binaries)


def capture_in_child(device, binaries: dict[str, tuple[bytes, str]]) -> tuple[list, str]:
    """The child-process part of capture_machine_code, for any device."""
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
        env = settings.child_environment(CUDA_CACHE_PATH=str(cache), CUDA_CACHE_DISABLE=None,
                                         CUDA_CACHE_MAXSIZE=str(_MAX_BYTES))
        try:
            # cwd: the job folder, so no customlayers/ folder where the user stands shadows ours
            done = subprocess.run([sys.executable, "-m", f"{__package__}.machine_code_child",
                                   str(job)], env=env, cwd=job, capture_output=True, text=True,
                                  timeout=_CHILD_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            return [], f"the process compiling it failed: {type(e).__name__}: {e}"
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            return [], f"the process compiling it failed: {last}"
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
            return [], "the driver wrote nothing into its cache folder"
        return files, ""


def install_machine_code(parts: dict, nvidia: bool, say=lambda m: None) -> int:
    """Write the package's `machine code` parts ({part name: bytes}) into the folder this
    process's driver keeps its code in; the number of files written. Nothing where the
    device is not of NVIDIA's platform (`nvidia`: has_driver_cache), the driver's cache is off
    (CUDA_CACHE_DISABLE) or CUSTOMLAYERS_NO_MACHINE_CODE is set. A file
    already there is kept; a folder that cannot be written, or a path through a link out of
    the folder, is one notice (the load then compiles the PTX). PackageError for a part whose
    name is not a cache file's."""
    code = {name[len(PART_PREFIX):]: data for name, data in parts.items()
            if name.startswith(PART_PREFIX)}
    for rel in code:
        if not is_cache_path(rel):
            raise PackageError(f"the package's part '{PART_PREFIX}{rel}' is not named as a "
                               f"file of the driver's cache: it is refused", PART_PREFIX + rel)
    if not code or not nvidia or not settings.machine_code_wanted():
        return 0
    root = driver_cache_folder()
    if root is None:
        return 0
    written = 0
    try:
        for rel, data in code.items():
            target = root.joinpath(*rel.split("/"))
            if target.exists() or target.is_symlink():
                continue
            _check_no_link(root, target.parent)      # before mkdir, which would follow one
            target.parent.mkdir(parents=True, exist_ok=True)
            # whole or not at all (another process's driver may read it at any moment),
            # readable by all (a cache folder may be shared by several users)
            with atomic_writer(target, 0o644) as f:
                f.write(data)
            written += 1
    except OSError as e:
        say(f"note: the package's compiled NVIDIA code could not be written to {root} "
            f"({e.strerror or e}); the driver compiles its programs instead (slower, once "
            f"per machine): make CUDA_CACHE_PATH a folder this user can write")
    return written


def _check_no_link(root: Path, folder: Path) -> None:
    """OSError where a folder between `root` and `folder` is a link: a file written through
    it would land outside the driver's folder, wherever the link points."""
    for part in [folder, *folder.parents]:
        if part == root or root not in part.parents:
            break
        if part.is_symlink():
            raise OSError(f"{part} is a link out of the folder: nothing is written through it")
