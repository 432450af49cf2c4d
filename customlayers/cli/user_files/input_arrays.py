"""Reading the user's input arrays (.npy files): one reader for run, benchmark and run-layer, so
every command refuses the same files with the same words, before anything runs; and one rule
for an array whose element type is not the one the model or layer takes (as_type)."""
from __future__ import annotations

import math
import os
import pickle
import sys
import tokenize
import zipfile

import numpy as np

from ...files import open_user_file

# dtype kinds a kernel can take: bool, signed and unsigned integers, floats. Complex, string,
# void and datetime arrays would be cast (complex silently drops its imaginary part) or fail
# deep in the runtime without naming the file.
NUMBER_KINDS = "biuf"
# conversions no one needs told of: numpy's default float (np.save of a float list) to the
# float32 models and layers run in, as the help says; bool to the uint8 bools are held in
QUIET = {(np.dtype(np.float64), np.dtype(np.float32)), (np.dtype(np.bool_), np.dtype(np.uint8))}


def read_array(path: str, what: str) -> np.ndarray:
    """The array in the .npy file `path`; `what` names it in messages ("input 'data'").

    Refused, as a UsageError naming `what` and `path`: a file that is not .npy (an empty one
    included), a truncated or corrupt one, an .npz archive, an array of anything but real
    numbers; a missing or unreadable file too, naming `what` (which -i it was), not only the
    path."""
    from .. import UsageError
    try:
        opened = open_user_file(path)       # a regular file: a FIFO would block np.load
    except OSError as e:
        raise UsageError(f"{what} {path}: {e.strerror or e}") from None
    with opened as f:
        check_npy_size(f, path, what)
        f.seek(0)
        try:
            arr = np.load(f, allow_pickle=False)
        except ValueError as e:
            # numpy's words: "Object arrays cannot be loaded ..." for a .npy of Python objects,
            # "... pickled (object) data ..." for any file that is not .npy at all
            if str(e).startswith("Object arrays"):
                raise UsageError(f"{what} {path}: an array of Python objects (it needs pickle, "
                                 f"which is not loaded); save numbers") from None
            raise UsageError(f"{what} {path}: not a .npy array file") from None
        except (EOFError, pickle.UnpicklingError, zipfile.BadZipFile, SyntaxError) as e:
            # EOFError: an empty file; BadZipFile: a broken .npz; SyntaxError: a corrupt header
            raise UsageError(f"{what} {path}: not a readable .npy array file "
                             f"({type(e).__name__}: {e})") from None
        if isinstance(arr, np.lib.npyio.NpzFile):
            arr.close()
            raise UsageError(f"{what} {path}: an .npz archive; give one array as .npy")
        if arr.dtype.kind not in NUMBER_KINDS:
            raise UsageError(f"{what} {path}: a {arr.dtype} array; inputs must be real numbers "
                             f"(float, int, uint or bool)")
    return arr


def check_npy_size(f, path: str, what: str) -> None:
    """A .npy file (`f`, open at `path`) holds at least the bytes its header declares: a
    truncated file is refused before numpy allocates the whole declared array (a header may
    declare terabytes)."""
    from .. import UsageError
    if os.fstat(f.fileno()).st_size == 0:
        raise UsageError(f"{what} {path}: empty file (0 bytes), not a .npy array")
    if f.read(6) != b"\x93NUMPY":
        return                     # not .npy: np.load says what it is (.npz) or refuses it
    f.seek(0)
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(f)
        else:
            shape, _, dtype = np.lib.format.read_array_header_2_0(f)
    except EOFError as e:
        raise UsageError(f"{what} {path}: a truncated .npy header ({e})") from None
    except (ValueError, SyntaxError, TypeError, tokenize.TokenError, MemoryError,
            RecursionError):
        # numpy parses the header's Python literal: its words name AST nodes, not the file
        raise UsageError(f"{what} {path}: a corrupt .npy header (not a dict of descr, "
                         f"fortran_order and shape)") from None
    if any(not isinstance(d, int) or d < 0 for d in shape):
        raise UsageError(f"{what} {path}: a corrupt .npy header (shape {shape})")
    if dtype.hasobject:
        return                     # np.load refuses it with its own words
    need = math.prod(shape) * dtype.itemsize
    have = os.fstat(f.fileno()).st_size - f.tell()
    if have < need:
        raise UsageError(f"{what} {path}: truncated .npy file: the header declares "
                         f"{dtype} {list(shape)} ({need} bytes of data), the file holds "
                         f"{have}")


def as_type(array: np.ndarray, dtype, what: str, taker: str) -> np.ndarray:
    """`array` in `dtype`, the type that `taker` ("the model", "layer 'Mish'") takes for it.
    Another type is converted, as the network converts what it is given (numpy's unsafe cast:
    fractions truncated toward zero, out-of-range integers wrapped), never run as it is: it
    would compile a float layer for int. The conversion is said on stderr, naming `what` (the
    input and its file) and both types, but for the QUIET ones."""
    dtype = np.dtype(dtype)
    if array.dtype == dtype:
        return array
    if (array.dtype, dtype) not in QUIET:
        print(f"note: {what} is {array.dtype}; {taker} takes {dtype}: converted", file=sys.stderr)
    return array.astype(dtype)
