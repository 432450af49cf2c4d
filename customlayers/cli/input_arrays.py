"""Reading the user's input arrays (.npy files): one reader for run, benchmark and run-layer, so
every command refuses the same files with the same words, before anything runs."""
from __future__ import annotations

import numpy as np

# dtype kinds a kernel can take: bool, signed and unsigned integers, floats. Complex, string,
# void and datetime arrays would be cast (complex silently drops its imaginary part) or fail
# deep in the runtime without naming the file.
NUMBER_KINDS = "biuf"


def read_array(path: str, what: str) -> np.ndarray:
    """The array in the .npy file `path`; `what` names it in messages ("input 'data'").

    Refused, as a UsageError naming `what` and `path`: a file that is not .npy, an .npz archive,
    an array of anything but real numbers. Missing or unreadable files raise OSError (exit 2)."""
    from . import UsageError
    try:
        arr = np.load(path, allow_pickle=False)
    except ValueError as e:
        # numpy's words: "Object arrays cannot be loaded ..." for a .npy of Python objects,
        # "... pickled (object) data ..." for any file that is not .npy at all
        if str(e).startswith("Object arrays"):
            raise UsageError(f"{what} {path}: an array of Python objects (it needs pickle, which "
                             f"is not loaded); save numbers") from None
        raise UsageError(f"{what} {path}: not a .npy array file") from None
    if isinstance(arr, np.lib.npyio.NpzFile):
        arr.close()
        raise UsageError(f"{what} {path}: an .npz archive; give one array as .npy")
    if arr.dtype.kind not in NUMBER_KINDS:
        raise UsageError(f"{what} {path}: a {arr.dtype} array; inputs must be real numbers "
                         f"(float, int, uint or bool)")
    return arr
