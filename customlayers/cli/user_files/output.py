"""Writing the user's output arrays (run, run-layer), one way for every command.

`check_output_path` runs before any work, so a path that cannot be written is refused before a
model runs for minutes. `write_arrays_atomically` writes completely or not at all, with the
mode a plain open() would give. The rule for a folder that does not exist yet: it is created.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from ...files import atomic_writer, user_file_mode

ARRAY_SUFFIXES = (".npy", ".npz")


def check_output_path(path: str, suffixes: Sequence[str] = ARRAY_SUFFIXES,
                      option: str = "-o") -> Path:
    """The target of `option path` (-o, --trace, --report), refused (UsageError) when it is
    empty or a folder, has a suffix not in `suffixes`, lies under a file, or where no file can
    be made (a file is made there and removed); missing folders are fine (they are created on
    writing)."""
    from .. import UsageError
    named = " or ".join(suffixes)
    if not path:                       # an empty shell variable: not "no -o"
        raise UsageError(f"{option} '': an empty path; name a file ({named})")
    target = Path(path)
    if target.is_dir():
        raise UsageError(f"{option} {path}: is a folder; name a file in it ({named})")
    if target.suffix.lower() not in suffixes:
        hint = ".npy (one array) or .npz" if tuple(suffixes) == ARRAY_SUFFIXES else named
        raise UsageError(f"{option} {path}: name the file {hint}, found {target.name!r}")
    existing = target.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{option} {path}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path}: no permission to write in {existing}")
    try:
        # a file made and removed there: os.access says yes to root where the file system
        # says no (/sys, /proc), which would show only after the model ran
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".customlayers-probe-"):
            pass
    except OSError as e:
        raise UsageError(f"{option} {path}: cannot write in {existing}: "
                         f"{e.strerror or e}") from None
    return target


def check_array_count(path: str, count: int, owner: str) -> None:
    """A .npy holds one array: refuse `count` != 1 before running. `owner` is what makes the
    arrays ("the model", "layer 'SplitSign'")."""
    from .. import UsageError
    if Path(path).suffix.lower() == ".npy" and count != 1:
        raise UsageError(f"-o {path}: {owner} has {count} outputs: a .npy holds one; "
                         f"name the file .npz")


def write_arrays_atomically(path: str, arrays: Mapping[str, np.ndarray]) -> None:
    """One array to a .npy, else an .npz with the mapping's names. A temporary file in the
    target's own folder (so os.replace is a rename on one file system), then the rename: an
    error never leaves a half-written file or a stray temporary."""
    from .. import UsageError
    target = Path(path)
    as_npy = target.suffix.lower() == ".npy"
    if as_npy and len(arrays) != 1:
        raise UsageError(f"-o {path}: {len(arrays)} arrays: a .npy holds one; name the file .npz")
    target.parent.mkdir(parents=True, exist_ok=True)
    # mkstemp creates 0600; the user expects what open() gives: 0666 less the umask
    with atomic_writer(target, mode=user_file_mode()) as f:
        if as_npy:
            np.save(f, next(iter(arrays.values())))
        else:
            np.savez(f, **arrays)


