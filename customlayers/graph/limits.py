"""Sanity bounds on what a model file may declare, and integer text read without surprises.

A model is data from anywhere: a dim of 10**30 or a Const of 2**60 elements must be a message,
not an attempt to allocate petabytes or an OverflowError deep in numpy. The bounds are far above
any real network (OpenVINO and ONNX Runtime keep dims in 32- and 64-bit integers as well).
"""
from __future__ import annotations

import math
import re

from ..errors import ModelError, shape_text

MAX_DIM = 2**31 - 1          # any one dim
MAX_ELEMENTS = 2**40         # elements of any one declared tensor
# Integer text longer than this is astronomic whatever it says; checked before int(), which
# refuses over 4,300 digits with a ValueError (and is quadratic below that).
MAX_INT_DIGITS = 20
# Bytes of a model file read whole: protobuf cannot parse an ONNX message over 2 GiB (larger
# models keep their weights in external data files), and an IR's XML, which holds no weights,
# is far smaller. Weights (.bin, external data) are bounded by their own files' sizes.
MAX_MODEL_BYTES = 2 << 30

_INT_TEXT = re.compile(r"[+-]?[0-9]+")      # ASCII only: str.isdigit() accepts '²' and '٣'


def parse_int(text: str) -> int | None:
    """The integer written in `text` (spaces around allowed), or None when it is not an ASCII
    decimal integer or has more than MAX_INT_DIGITS digits."""
    t = text.strip()
    if not _INT_TEXT.fullmatch(t) or len(t.lstrip("+-")) > MAX_INT_DIGITS:
        return None
    return int(t)


def shape_problem(shape) -> str | None:
    """What is wrong with a shape's static dims (None entries are unknown dims), or None."""
    for d in shape:
        if d is None:
            continue
        if d < 0:
            return f"dim {d} is negative"
        if d > MAX_DIM:
            return f"dim {d} is over the limit of {MAX_DIM}"
    count = math.prod(d for d in shape if d is not None)
    if count > MAX_ELEMENTS:
        return f"{count} elements are over the limit of 2**40 for one tensor"
    return None


def check_shape(shape, where: str, what: str = "shape") -> None:
    """ModelError "<where>: <what> [..]: <problem>" when the shape is out of bounds."""
    problem = shape_problem(shape)
    if problem:
        raise ModelError(f"{where}: {what} {shape_text(shape, ',')}: {problem}")


def element_count(shape) -> int:
    """Elements of a static shape, in Python integers (np.prod wraps around in int64)."""
    return math.prod(int(d) for d in shape)
