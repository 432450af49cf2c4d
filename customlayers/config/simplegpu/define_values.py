"""The literal rules of Define values (SPEC section 3): what text fits a Define of type int,
float, int[] or float[] (C literal forms, as OpenCL C accepts them), and what may never be pasted
into a `#define` line. Part of the descriptor's meaning: the validator checks defaults with it, the
JIT checks model attributes with it.
"""
from __future__ import annotations

import difflib
import math
import re

from ..messages import clipped

# OpenCL C integer literal: decimal, octal or hex, optional sign and u/l suffixes.
_INT_LITERAL = re.compile(
    r"[+-]?(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)([uU](ll|LL|l|L)?|(ll|LL|l|L)[uU]?)?\Z")
# OpenCL C floating literal (a fraction or an exponent is required before an f/F/h/H suffix:
# `1f` is not C), or a hex float. An integer literal is also fine where a float is wanted.
_FLOAT_LITERAL = re.compile(
    r"[+-]?((\d+\.\d*|\.\d+)([eE][+-]?\d+)?|\d+[eE][+-]?\d+"
    r"|0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?\d+)[fFhH]?\Z")

_BOOLEANS = {"true": "1", "false": "0"}
_EXAMPLES = {"int": "3, -3, 0x10, 10u", "float": "0.5, 1.0f, 1e-7, -3, +2.5F"}
ARRAY_TYPES = ("int[]", "float[]")
# The Define types we accept. OpenVINO documents exactly these four, and its own shipped configs
# (cldnn_global_custom_kernels.xml: int, float, float[]) and examples use nothing else. OpenVINO
# itself pastes any other `T[]` as a `(T[])` cast and ignores any other scalar type, so `uint[]`
# or `half` would "work" there unchecked; we refuse them (with the nearest accepted type) rather
# than let a typo such as "flaot" switch the value check off silently.
DEFINE_TYPES = ("int", "float") + ARRAY_TYPES
# other OpenCL C type names a user may reach for, and the accepted type that holds their values
_C_TYPE_HINTS = {**dict.fromkeys(("char", "uchar", "short", "ushort", "uint", "long", "ulong",
                                  "size_t", "bool", "unsigned", "integer"), "int"),
                 **dict.fromkeys(("half", "double", "real", "fp32", "fp16"), "float")}


# the largest finite float (FLT_MAX): a float literal that rounds past it is infinity in the
# kernel (3.4028235e38, FLT_MAX as numpy and ONNX print it, rounds to it)
FLOAT_MAX = 3.4028234663852886e38


def _finite_as_float(value: float) -> bool:
    """Whether a literal's value rounds to a finite float, as OpenCL C rounds it (to nearest:
    up to FLT_MAX plus half its last place)."""
    half_ulp = 2.0 ** (127 - 24)
    return abs(value) < FLOAT_MAX + half_ulp


def _scalar_problem(text: str, scalar_type: str) -> str | None:
    t = text.strip()
    if not t:
        return f"an empty value is not {_article(scalar_type)} {scalar_type}"
    if t.lower() in _BOOLEANS:
        return None
    if _INT_LITERAL.match(t) or (scalar_type == "float" and _FLOAT_LITERAL.match(t)):
        value = numeric_value(t) if scalar_type == "float" else None
        if value is not None and not _finite_as_float(value):
            return (f"'{shown(clipped(t))}' is out of the range of float (at most "
                    f"{FLOAT_MAX:.8g} in magnitude): the kernel would compute with infinity")
        return None
    return (f"'{shown(clipped(t))}' is not {_article(scalar_type)} {scalar_type} literal of "
            f"OpenCL C (for example {_EXAMPLES[scalar_type]})")


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def control_problem(text: str) -> str | None:
    """A value is pasted into one `#define` line: a line break (or any control character, which
    compilers may treat as one) would start a new line of program text, and a final backslash
    would join the next line into this one. Either lets a model attribute inject code."""
    for i, c in enumerate(text):
        if (ord(c) < 32 and c != "\t") or ord(c) == 127:
            return (f"control character {c!r} at position {i + 1} is not allowed (a define is "
                    f"one line of program text)")
    if text.rstrip(" \t").endswith("\\"):
        return "a final backslash is not allowed (it would join the next line of the program)"
    return None


def shown(text: str) -> str:
    """Text for a message: control characters escaped, so the message stays one line."""
    return "".join(repr(c)[1:-1] if ord(c) < 32 or ord(c) == 127 else c for c in text)


def type_problem(type: str | None) -> str | None:
    """What is wrong with a Define's `type` attribute (None: absent, or one of DEFINE_TYPES)."""
    if type is None or type in DEFINE_TYPES:
        return None
    accepted = ", ".join(DEFINE_TYPES)
    if not type.strip():
        return f"type is empty; expected one of {accepted} (or no type attribute)"
    word = type.strip().lower().replace(" ", "")
    array = word.endswith("[]")
    near = difflib.get_close_matches(word, DEFINE_TYPES, n=1, cutoff=0.6)
    if not near and _C_TYPE_HINTS.get(word[:-2] if array else word):
        near = [_C_TYPE_HINTS[word[:-2] if array else word] + ("[]" if array else "")]
    hint = f" (did you mean '{near[0]}'?)" if near else ""
    return f"type '{shown(clipped(type))}' is not one of {accepted}{hint}"


def check_define_value(value: str, type: str | None) -> str | None:
    """What is wrong with `value` for a Define of `type`, or None when it fits.

    Any value must stay on its one line (no control characters, no final backslash). Beyond
    that only int, float, int[] and float[] are checked; another type (or none) takes any text,
    as OpenVINO does. Used by the validator for defaults and by user_defines for attributes."""
    problem = control_problem(value)
    if problem:
        return problem
    if type in ("int", "float"):
        return _scalar_problem(value, type)
    if type in ARRAY_TYPES:
        scalar = type[:-2]
        items = value.split(",")
        for n, item in enumerate(items):
            problem = _scalar_problem(item, scalar)
            if problem:
                where = f"element {n + 1} of {len(items)}: " if len(items) > 1 else ""
                return where + problem
    return None


def as_c(value: str, type: str | None) -> str:
    """true/false -> 1/0 (per element for arrays); every other text is kept exactly."""
    if type in ARRAY_TYPES:
        items = value.split(",")
        if any(i.strip().lower() in _BOOLEANS for i in items):
            items = [_BOOLEANS.get(i.strip().lower(), i) for i in items]
        return "(" + type + ") {" + ",".join(items) + "}"
    return _BOOLEANS.get(value.strip().lower(), value)


# decimal digits beyond which an integer literal is past the largest double (about 1.8e308)
_LONGEST_DECIMAL = 310


def numeric_value(text: str) -> int | float | None:
    """The number a scalar Define value denotes, for formulas that name its parameter (an int
    literal in any C base, a float literal, true/false), or None when the text is no number."""
    t = _BOOLEANS.get(text.strip().lower(), text.strip())
    if _INT_LITERAL.match(t):
        digits = t.rstrip("uUlL")
        sign = -1 if digits.startswith("-") else 1
        digits = digits.lstrip("+-")
        if digits[:2].lower() == "0x":
            return sign * int(digits[2:], 16)
        if len(digits.lstrip("0")) > _LONGEST_DECIMAL:
            # past any double (and Python's limit on decimal text, a ValueError at 4,300
            # digits): infinity, which the range checks refuse (a fuzzed config, stop 41)
            return sign * math.inf
        return sign * int(digits, 8 if len(digits) > 1 and digits[0] == "0" else 10)
    if _FLOAT_LITERAL.match(t):
        body = t.rstrip("fFhH") if not t.lower().lstrip("+-").startswith("0x") else t
        try:
            return float.fromhex(body) if "x" in body.lower() else float(body)
        except ValueError:
            return None
    return None
