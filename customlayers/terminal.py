"""User text on a terminal: shown, never obeyed.

Names, paths, attribute values and messages come from files anyone may have written. Printed raw,
an escape sequence in a node name recolours, moves or clears the user's terminal (or sets its
title, or worse on some terminals), a carriage return overwrites what was printed before it, a
right-to-left override makes text read backwards, and a newline splits a table's row in two. So:

- `escaped(text)`: control characters (C0 but newline and tab, DEL, C1), the bidirectional
  controls, and lone surrogates written as escapes: `\\x1b`, `\\r`, `\\u202e`. A lone surrogate
  is how Python holds a byte of a file name that is not UTF-8 (os.fsdecode); it is shown as that
  byte, `\\xff`, where printing it would fail on a UTF-8 terminal.
- `one_line(text)`: the same, newlines and tabs too: for a table's cell or a name in a line.
- `terminal_safe_output()`: every write to sys.stdout and sys.stderr goes through `escaped`, for
  the time of a command (the CLI's edge: cli/__init__.py); `for_contents(stream)` is the stream
  under it where output is a file's contents by design (the program text `jit` prints, unless
  it goes to a terminal).

Text that is already escaped passes unchanged: only the characters above are touched.
"""
from __future__ import annotations

import re
import sys
from contextlib import contextmanager
from typing import Iterator, TextIO

# bidirectional embeddings, overrides and isolates, and the marks (Trojan Source)
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}\ud800-\udfff]")
_UNSAFE_ONE_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape(match: re.Match) -> str:
    c = match.group(0)
    code = ord(c)
    if c in _NAMED:
        return _NAMED[c]
    if 0xDC80 <= code <= 0xDCFF:        # a byte of a non-UTF-8 file name (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def escaped(text: str) -> str:
    """`text` with its control characters escaped, newlines and tabs kept."""
    return _UNSAFE.sub(_escape, text)


def one_line(text: str) -> str:
    """`text` with every control character escaped, newlines and tabs too."""
    return _UNSAFE_ONE_LINE.sub(_escape, text)


class SafeStream:
    """A text stream whose writes are `escaped`; everything else is the stream's own."""

    def __init__(self, stream: TextIO):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(escaped(text))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def raw(stream) -> TextIO:
    """The stream under a SafeStream (or the stream itself)."""
    return stream._stream if isinstance(stream, SafeStream) else stream


def for_contents(stream) -> TextIO:
    """Where to write text that is a file's contents by design (the program `jit` prints,
    compilable as is): the stream as is when it goes to a file or a pipe, escaped on a
    terminal."""
    inner = raw(stream)
    try:
        shown = inner.isatty()
    except (AttributeError, ValueError):
        shown = False
    return stream if shown else inner


@contextmanager
def terminal_safe_output() -> Iterator[None]:
    """sys.stdout and sys.stderr escaped (see the module's text) until the block ends."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = (s if isinstance(s, SafeStream) or s is None else SafeStream(s)
                              for s in saved)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
