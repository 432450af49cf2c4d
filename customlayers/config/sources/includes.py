"""`#include` in a user's .cl, resolved here and never by the OpenCL compiler.

Left to the compiler, an include escapes the rules a <Source> keeps: `#include "/etc/passwd"`
is read whatever --allow-external-sources says, and a relative include is looked up in the
process's current folder, not beside the .cl. So each Source's includes are expanded when the
config loads: a quoted name is resolved relative to the including file, refused outside the
config's folder unless external sources are allowed (loader.py says which files a config may
read), read only when it is a regular file of bounded size, and pasted in place of the
directive between `#line` directives, so compilers (and the program's line map) still name the
user's own file and line. What the compiler receives has no #include left, not even in the
comment that marks where one was (PoCL's program cache shuns a text that holds one).

  * `#pragma once` (and `#import`): a file is expanded once per Source, and its text is wrapped
    in a guard macro of our own, so a second Source of the same program that includes it
    again adds nothing, as the compiler would do it.
  * A classic include guard (`#ifndef X` / `#define X` ... `#endif` around the whole file) is
    recognised: such a file included again, or in a cycle, is skipped, as the preprocessor
    would skip it (unless the guard macro is #undef'd between the two, which is not seen).
  * A cycle of files without guards is an error, with the chain.
  * `#include <...>` (the compiler's system folders), a name given by a macro, `#include_next`
    and `#embed` are refused: nothing a layer ships can rely on them, and the first two would
    let the compiler pick the file.
  * Directives are found outside comments and string literals, over lines joined by a
    backslash; an include inside `#if 0` is resolved too (this is not a preprocessor).

Every problem is an IncludeProblem at the directive's file, line and column. Pure Python: no
OpenCL here; the files are read through an IncludeFiles (from disk, or from the mapping a
config loaded from a string names its sources with).
"""
from __future__ import annotations

import hashlib
import os
import posixpath
from dataclasses import dataclass, field, replace
from typing import Mapping

from ...files import UserFileError, read_user_file
from ..diagnostics import Diagnostics, Location
from ..messages import clipped
from .include_scan import Line, Scanned, SPACE, directive, quoted_name, scan
from .source_text import SourceFile, line_directive

INCLUDE_CODE = "CL043"        # an #include cannot be resolved (missing, unreadable, a cycle...)
OUTSIDE_CODE = "CL046"        # an #include names a file outside the config's directory
MAX_DEPTH = 40                # nested includes (GCC stops at 200; no real kernel nests 10)
MAX_FILE_BYTES = 8 * 2 ** 20  # one included file
MAX_TOTAL_BYTES = 32 * 2 ** 20  # one Source with everything it includes



@dataclass(frozen=True)
class IncludeProblem:
    location: Location
    code: str
    message: str


class IncludeRefused(Exception):
    """An include that cannot be read: its message (and code) for the diagnostic."""

    def __init__(self, message: str, code: str = INCLUDE_CODE):
        super().__init__(message)
        self.code = code


class IncludeFiles:
    """Where included files come from. `resolve` -> (key, display name) of `name` as included
    by file `including` (a key); `read` -> its text. Both raise IncludeRefused."""

    def resolve(self, including: str, name: str) -> tuple[str, str]:
        raise NotImplementedError

    def read(self, key: str) -> str:
        raise NotImplementedError


class DiskIncludes(IncludeFiles):
    """Files on disk, relative to the including file, inside `base` unless `allow_external`."""

    def __init__(self, base: str, allow_external: bool):
        self.base = base
        self.allow_external = allow_external

    def resolve(self, including: str, name: str) -> tuple[str, str]:
        if "\0" in name:
            raise IncludeRefused("holds a NUL character; no file has such a name")
        try:
            path = os.path.realpath(os.path.join(os.path.dirname(including), name))
        except (OSError, ValueError) as e:
            raise IncludeRefused(f"cannot be resolved: {e}") from None
        if not self.allow_external and os.path.commonpath([path, self.base]) != self.base:
            raise IncludeRefused(f"resolves to {clipped(path, 300)}, outside the config's "
                                 f"directory {self.base}; refused (use --allow-external-sources,"
                                 f" or allow_external_sources=True, to allow it)", OUTSIDE_CODE)
        if not os.path.exists(path):
            raise IncludeRefused(f"no such file (looked for {clipped(path, 300)}, relative to "
                                 f"the including file's folder)")
        return path, path

    def read(self, key: str) -> str:
        try:              # a regular file within the bound, read without blocking on a FIFO
            data = read_user_file(key, MAX_FILE_BYTES)
        except UserFileError as e:
            raise IncludeRefused(f"is {e.strerror}") from None
        except OSError as e:
            raise IncludeRefused(f"cannot be read: {e.strerror or e}") from None
        return decode(data)


class MappedIncludes(IncludeFiles):
    """The sources a config loaded from a string was given (name -> text), relative names
    resolved against the including name; nothing is read from disk."""

    def __init__(self, sources: Mapping[str, object]):
        self.sources = sources

    def resolve(self, including: str, name: str) -> tuple[str, str]:
        key = posixpath.normpath(posixpath.join(posixpath.dirname(including), name))
        for candidate in (key, name):
            if candidate in self.sources:
                return candidate, candidate
        given = ", ".join(sorted(map(str, self.sources))) or "none"
        raise IncludeRefused(f"is not among the given sources (looked for '{clipped(key)}'; "
                             f"given: {clipped(given, 300)})")

    def read(self, key: str) -> str:
        value = self.sources[key]
        if isinstance(value, bytes):
            return decode(value)
        if not isinstance(value, str):
            raise IncludeRefused(f"is given as {type(value).__name__}; expected text")
        return value


def decode(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise IncludeRefused(f"is not UTF-8 text (byte 0x{data[e.start]:02x} on its line "
                             f"{line})") from None


@dataclass
class Expanded:
    """A Source with its includes pasted in: its text, where each line of it came from
    ((file, line), or None for a line written here), and the problems found."""
    text: str
    origins: tuple
    problems: list[IncludeProblem] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(o is None for o in self.origins) or len({o[0] for o in self.origins}) > 1


def with_includes(source: SourceFile, key: str, files: IncludeFiles, layer: str | None,
                  diags: Diagnostics) -> SourceFile | None:
    """`source` with its includes expanded (itself when it has none); None, with every problem
    reported in `diags`, when one cannot be."""
    display = source.path or source.filename
    expanded = expand_includes(source.text, key, display, files)
    for problem in expanded.problems:
        diags.error(problem.location, problem.code, problem.message, layer)
    if expanded.problems:
        return None
    if not expanded.changed:
        return source
    return replace(source, text=expanded.text, origins=expanded.origins)


def expand_includes(text: str, key: str, display: str, files: IncludeFiles,
                    once_each: bool = False) -> Expanded:
    """`text` (the Source `key`, named `display` in messages) with every #include expanded.
    `once_each`: every file is expanded once, as if each had an include guard (the built-in
    kernels' helpers, jit/cl_includes.py); a cycle is still an error."""
    state = _State(files, once_each)
    state.emit_file(text, key, display, [], None)
    return Expanded("\n".join(state.lines) + ("\n" if state.lines else ""),
                    tuple(state.origins), state.problems)


# -- expansion -------------------------------------------------------------------------------

class _State:
    def __init__(self, files: IncludeFiles, once_each: bool = False):
        self.files = files
        self.once_each = once_each
        self.lines: list[str] = []
        self.origins: list = []
        self.problems: list[IncludeProblem] = []
        self.expanded: set[str] = set()      # files with a guard or #pragma once, already in
        self.total = 0
        self.stopped = False

    def problem(self, display: str, line: int, column: int, code: str, message: str) -> None:
        self.problems.append(IncludeProblem(Location(display, line, column), code, message))

    def generated(self, text: str) -> None:
        self.lines.append(text)
        self.origins.append(None)

    def emit_file(self, text: str, key: str, display: str, chain: list[tuple[str, str, int]],
                  at: tuple[str, int, int] | None, once: bool = False) -> None:
        """Append file `key` (its text, already read). `chain`: (key, display, line) of each
        file including it, outermost first; `at`: where the directive including it is; `once`:
        included with #import (as if it said #pragma once)."""
        self.total += len(text)
        if self.total > MAX_TOTAL_BYTES:
            self.stopped = True
            where = at or (display, 1, 1)
            self.problem(*where, INCLUDE_CODE, f"the Source with its includes is over "
                                               f"{MAX_TOTAL_BYTES} bytes; not expanded further")
            return
        scanned = scan(text)
        guard = None
        once = once or scanned.once
        if once:
            guard = "CUSTOMLAYERS_ONCE_" + hashlib.sha256(key.encode()).hexdigest()[:16].upper()
            self.generated(f"#ifndef {guard}")
            self.generated(f"#define {guard}")
        if once or scanned.guard:
            self.expanded.add(key)
        if at is not None or guard is not None:
            self.generated(line_directive(display, 1))
        physical = scanned.physical
        emitted = 0                     # physical lines of this file written so far
        for ln in scanned.lines:
            d = directive(ln.code)
            if d is None or d[0] not in ("include", "import", "include_next", "embed",
                                         "pragma"):
                continue
            if d[0] == "pragma":
                if d[1].split()[:1] == ["once"]:      # handled by the guard around the file
                    self._copy(physical, emitted, ln.first, display)
                    self.lines.append("// #pragma once: kept by customlayers's include "
                                      "resolver")
                    self.origins.append((display, ln.first + 1))
                    self._blank(ln.first + 1, ln.last, display)
                    emitted = ln.last + 1
                continue
            self._copy(physical, emitted, ln.first, display)
            emitted = ln.last + 1
            self._include(d, ln, key, display, chain, scanned)
            if self.stopped:
                return
        self._copy(physical, emitted, len(physical), display)
        if (at is not None or guard is not None) and physical and \
                physical[-1].rstrip("\r").endswith("\\"):
            self.generated("")        # a continuation must not swallow what follows
        if physical and len(physical) - 1 in scanned.open_at and at is not None:
            self.problem(display, len(physical), 1, INCLUDE_CODE,
                         "the file ends inside a /* comment")
        if guard is not None:
            self.generated(f"#endif /* {guard} */")
        if self.once_each:           # only once it is whole: an include from inside is a cycle
            self.expanded.add(key)

    def _copy(self, physical: list[str], start: int, stop: int, display: str) -> None:
        for n in range(start, stop):
            self.lines.append(physical[n])
            self.origins.append((display, n + 1))

    def _blank(self, start: int, stop: int, display: str) -> None:
        """Empty lines for physical lines start..stop (0-based) of a directive written
        over several lines."""
        for n in range(start, stop + 1):
            self.lines.append("")
            self.origins.append((display, n + 1))

    def _include(self, d: tuple[str, str], ln: Line, key: str, display: str,
                 chain: list, scanned: Scanned) -> None:
        kind, rest = d
        line = ln.first + 1
        column = len(ln.code) - len(ln.code.lstrip(SPACE)) + 1     # at the '#'
        shown = f"#{kind} {clipped(rest.strip(SPACE))}".rstrip()
        # the comments that mark the directive name it without '#': PoCL keeps no compiled
        # program of a text that holds "#include" anywhere (comments too), or keys it by the
        # build's folder, so every build of such a text in a new checkout compiled it again
        # (stop 26: 0.64 s against 0.03 s from its cache for a MatMul program)
        marked = shown.replace(chr(13), "").replace("#", "")
        comment = len(self.lines)
        self.lines.append(f"// {marked}: expanded below by customlayers")
        self.origins.append((display, line))
        self._blank(ln.first + 1, ln.last, display)
        if ln.last in scanned.open_at:
            self.problem(display, line, column, INCLUDE_CODE,
                         f"{shown}: a /* comment opened on the directive's line; end it there")
            return
        if kind in ("include_next", "embed"):
            self.problem(display, line, column, INCLUDE_CODE,
                         f"{shown}: #{kind} is not supported in a layer's source (it reads a "
                         f"file the descriptor does not name); use #include \"file\"")
            return
        operand = quoted_name(rest)
        if operand is None:
            self.problem(display, line, column, INCLUDE_CODE,
                         f"{shown}: the file must be named in quotes (#include \"file.cl\"); a "
                         f"name given by a macro cannot be resolved before the build")
            return
        form, name = operand
        if form == "angle":
            self.problem(display, line, column, INCLUDE_CODE,
                         f"{shown}: <...> names a file in the compiler's system folders, which "
                         f"a layer cannot rely on; name your own file in quotes, relative to "
                         f"this one")
            return
        if not name:
            self.problem(display, line, column, INCLUDE_CODE, f"{shown}: an empty file name")
            return
        try:
            target, target_display = self.files.resolve(key, name)
        except IncludeRefused as e:
            self.problem(display, line, column, e.code, f'#{kind} "{clipped(name)}": {e}')
            return
        if target in self.expanded:          # a guard or #pragma once: already in
            self.lines[comment] = f"// {marked}: already expanded above"
            return
        keys = [k for k, _, _ in chain] + [key]
        if target in keys:
            steps = [f"{shown_name}:{n}" for _, shown_name, n in chain] + [f"{display}:{line}"]
            self.problem(display, line, column, INCLUDE_CODE,
                         f'#{kind} "{clipped(name)}" makes a cycle ({" includes ".join(steps)} '
                         f"includes {target_display}); give the file an include guard or "
                         f"#pragma once")
            return
        if len(chain) + 1 >= MAX_DEPTH:
            self.problem(display, line, column, INCLUDE_CODE,
                         f'#{kind} "{clipped(name)}": includes nest deeper than {MAX_DEPTH}')
            return
        try:
            text = self.files.read(target)
        except IncludeRefused as e:
            self.problem(display, line, column, e.code,
                         f'#{kind} "{clipped(name)}": {clipped(target_display, 300)} {e}')
            return
        self.emit_file(text, target, target_display, chain + [(key, display, line)],
                       (display, line, column), once=kind == "import")
        self.generated(line_directive(display, ln.last + 2))
