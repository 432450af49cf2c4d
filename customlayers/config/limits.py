"""Bounds on every index and size a descriptor gives, each with its reason. A value over its bound
is an error naming the attribute, the value and the bound; nothing is ever sized by a value the
descriptor gives before it was checked here (`set(range(arg_index))` once grew to 24 GB).
"""
from __future__ import annotations

import re

# Kernel arguments. Every argument a descriptor binds is a buffer (a pointer, 4 or 8 bytes), and
# a device takes at most CL_DEVICE_MAX_PARAMETER_SIZE bytes of arguments: OpenCL's minimum is
# 1024 (128 pointers); the largest real drivers report 4352 (NVIDIA: 544 pointers). 1024
# arguments is more than any device takes, so arg-index is at most 1023.
MAX_KERNEL_ARGS = 1024
MAX_ARG_INDEX = MAX_KERNEL_ARGS - 1
# Each port is bound to its own kernel argument, so there are at most as many ports as arguments;
# the same holds for the input N of WorkSizes dim.
MAX_PORT_INDEX = MAX_KERNEL_ARGS - 1
# Digits we convert at all: more (after leading zeros) is over every bound above, and Python
# refuses int() of over 4300 digits with a ValueError.
MAX_INDEX_DIGITS = 9
# A formula list (global, local, shape) is a few dozen characters in practice; parsing and
# messages stay cheap below this, and a longer one is a mistake or an attack.
MAX_FORMULA_LENGTH = 1_000
# Elements in one config file (comments and PIs aside). Real configs have tens to hundreds (one
# layer is about ten); checking costs about 0.25 ms per element, so 10,000 keeps a file under
# about three seconds, whatever it holds.
MAX_ELEMENTS = 10_000
# Bytes of one config file: 10,000 elements of a real config are under 2 MiB; the rest is room
# for comments. Checked before the file is read (a 200 MB file of empty elements once took 7 GB
# of memory before the element count refused it).
MAX_CONFIG_BYTES = 16 << 20
# Bytes of one kernel source file: generated sources with tables in them reach a few MiB.
MAX_SOURCE_BYTES = 64 << 20


def index_value(text: str) -> int:
    """The value of a string of ASCII digits; 10**MAX_INDEX_DIGITS (over every bound) when it
    has more significant digits than any bound needs."""
    digits = text.lstrip("0")
    if len(digits) > MAX_INDEX_DIGITS:
        return 10 ** MAX_INDEX_DIGITS
    return int(digits or "0")


_DIGITS = re.compile(r"[0-9]+\Z")


def index_attr(text: str | None) -> int | None:
    """An index attribute's value (any number of digits, never int() of all of them); None when
    it is not a non-negative integer (the schema reports that)."""
    return index_value(text) if text is not None and _DIGITS.match(text) else None
