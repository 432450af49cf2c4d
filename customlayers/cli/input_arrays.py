"""Reading the user's input arrays (.npy files): one reader for run, benchmark and run-layer, so
every command refuses the same files with the same words, before anything runs."""
from __future__ import annotations

import numpy as np


def read_array(path: str, what: str) -> np.ndarray:
    """The array in the .npy file `path`; `what` names it in messages ("input 'data'").

    Refused, as a UsageError naming `what` and `path`: a file that is not .npy, an .npz archive.
    Missing or unreadable files raise OSError (exit 2)."""
    from . import UsageError
    try:
        arr = np.load(path, allow_pickle=False)
    except ValueError:
        raise UsageError(f"{what} {path}: not a .npy array file") from None
    if isinstance(arr, np.lib.npyio.NpzFile):
        arr.close()
        raise UsageError(f"{what} {path}: an .npz archive; give one array as .npy")
    return arr
