"""Scanning a .cl file for preprocessor directives without a preprocessor (includes.py's
lexer): comments masked (string and character literals kept, so `"/*"` opens nothing), lines
joined where a backslash continues them, directives split into name and rest, and the classic
include guard around a whole file recognised. Pure Python, no OpenCL."""
from __future__ import annotations

import re
from dataclasses import dataclass

SPACE = " \t\f\v"
_DIRECTIVE = re.compile(r"[ \t\f\v]*(?:#|%:)[ \t\f\v]*([A-Za-z_][A-Za-z_0-9]*)(.*)", re.S)
_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_SPECIAL = re.compile(r"/\*|//|[\"']")
_BLANK = re.compile(r"[^\n]")
# a literal ends at its closing quote or at a new line no backslash escapes
_STRING = re.compile(r'"[^"\\\n]*(?:\\[\s\S][^"\\\n]*)*"?')
_CHAR = re.compile(r"'[^'\\\n]*(?:\\[\s\S][^'\\\n]*)*'?")
_IFNDEF = re.compile(r"(?:ifndef[ \t\f\v]+([A-Za-z_]\w*)|"
                     r"if[ \t\f\v]*![ \t\f\v]*defined[ \t\f\v]*\(?[ \t\f\v]*([A-Za-z_]\w*)"
                     r"[ \t\f\v]*\)?)[ \t\f\v]*$")


def mask_comments(text: str) -> tuple[str, set[int]]:
    """`text` with every comment's characters replaced by spaces (new lines kept), string and
    character literals left as they are, so directives can be matched line by line; and the
    0-based lines at whose end a /* comment is still open. Linear: it jumps from one comment or
    quote to the next."""
    out: list[str] = []
    open_at: set[int] = set()
    i, n = 0, len(text)
    line, counted = 0, 0             # the line of position `counted` (counted once: linear)
    while i < n:
        m = _SPECIAL.search(text, i)
        if m is None:
            out.append(text[i:])
            break
        out.append(text[i:m.start()])
        i = m.start()
        if m.group() == "/*":
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            body = text[i:end]
            line += text.count("\n", counted, i)
            counted = i
            closed = end - i >= 4 and body.endswith("*/")
            for k in range(body.count("\n") + (0 if closed else 1)):
                open_at.add(line + k)
            out.append(_BLANK.sub(" ", body))
        elif m.group() == "//":
            end = text.find("\n", i)
            while end >= 0 and _continued(text, end):     # a backslash continues the comment
                end = text.find("\n", end + 1)
            end = n if end < 0 else end
            out.append(_BLANK.sub(" ", text[i:end]))
        else:                                          # a string or character literal
            end = (_STRING if m.group() == '"' else _CHAR).match(text, i).end()
            out.append(text[i:end])
        i = end
    return "".join(out), open_at


def _continued(text: str, newline: int) -> bool:
    """Whether the line ending at `newline` ends with a backslash (a \\r before it allowed)."""
    j = newline - 1
    if j >= 0 and text[j] == "\r":
        j -= 1
    return j >= 0 and text[j] == "\\"


@dataclass(frozen=True)
class Line:
    first: int       # 0-based physical lines first..last
    last: int
    code: str        # the logical line, comments masked, continuations joined


def logical_lines(masked: list[str]) -> list[Line]:
    result, i = [], 0
    while i < len(masked):
        first, parts = i, []
        while True:
            line = masked[i].rstrip("\r")
            if line.endswith("\\") and i + 1 < len(masked):
                parts.append(line[:-1])
                i += 1
                continue
            parts.append(line)
            break
        result.append(Line(first, i, "".join(parts)))
        i += 1
    return result


def directive(code: str) -> tuple[str, str] | None:
    """(name, the rest) of a preprocessor directive line, or None."""
    m = _DIRECTIVE.fullmatch(code)
    return (m.group(1), m.group(2)) if m else None


def include_guard(lines: list[Line]) -> str | None:
    """The macro of a classic include guard around the whole file, or None."""
    significant = [ln for ln in lines if ln.code.strip(SPACE)]
    if len(significant) < 3:
        return None
    first, second = directive(significant[0].code), directive(significant[1].code)
    if not first or not second:
        return None
    m = _IFNDEF.fullmatch(f"{first[0]}{first[1]}".strip(SPACE) if first[0] == "if"
                          else f"{first[0]} {first[1].strip(SPACE)}")
    name = m and (m.group(1) or m.group(2))
    if not name or second[0] != "define" or \
            _NAME.match(second[1].strip(SPACE) or "-") is None or \
            _NAME.match(second[1].strip(SPACE)).group(0) != name:
        return None
    depth = 0
    for k, ln in enumerate(significant):
        d = directive(ln.code)
        if d and d[0] in ("if", "ifdef", "ifndef"):
            depth += 1
        elif d and d[0] == "endif":
            depth -= 1
            if depth == 0:
                return name if k == len(significant) - 1 else None
    return None


def quoted_name(rest: str) -> tuple[str, str] | None:
    """("quote" | "angle", name) of an include's operand, or None (a macro, or malformed)."""
    rest = rest.strip(SPACE)
    m = re.fullmatch(r'"([^"\n]*)"[ \t\f\v]*', rest) or re.fullmatch(r"<([^>\n]*)>[ \t\f\v]*",
                                                                     rest)
    if not m:
        return None
    return ("quote" if rest.startswith('"') else "angle"), m.group(1)


@dataclass
class Scanned:
    physical: list[str]
    lines: list[Line]
    once: bool                    # #pragma once
    guard: str | None             # a classic include guard's macro
    open_at: set[int]             # lines at whose end a /* comment is open


def scan(text: str) -> Scanned:
    masked, open_at = mask_comments(text)
    physical, masked_lines = text.split("\n"), masked.split("\n")
    if physical and physical[-1] == "" and len(physical) > 1:   # a final new line ends a line
        physical.pop()
        masked_lines.pop()
    lines = logical_lines(masked_lines)
    once = any((d := directive(ln.code)) is not None and d[0] == "pragma"
               and d[1].split()[:1] == ["once"] for ln in lines)
    return Scanned(physical, lines, once, include_guard(lines), open_at)
