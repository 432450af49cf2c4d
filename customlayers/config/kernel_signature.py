"""Kernel heads read from OpenCL C text without a preprocessor: the names of the __kernel
functions a source defines (both dialects check that the entry is one: kernel_names), and the
parameter list of one of them.

MVCL binds kernel arguments by name, so the loader needs each entry's parameter names in order.
This is a small C-declaration scanner, best effort by design: comments, preprocessor lines and
`__attribute__((...))` are blanked; the first `__kernel`/`kernel` function named `entry` is
taken (sources often define one entry twice under #if/#else; both lists have the same names);
its parameter list is split at top-level commas; a parameter's name is its last identifier.
Types spelled with macros (`__global INPUT0_TYPE* x`) still give the right name; a kernel whose
whole head comes from a macro is not found (None), and the caller says so.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
# a preprocessor directive, with its backslash-continued lines
_DIRECTIVE = re.compile(r"^[ \t]*#(?:[^\n\\]|\\.)*", re.M | re.S)
_ATTRIBUTE = re.compile(r"__attribute__\s*\(\(.*?\)\)", re.S)
_KERNEL = re.compile(r"\b(?:__kernel|kernel)\b")
_IDENT = re.compile(r"[A-Za-z_]\w*")

ADDRESS_SPACES = {"__global": "global", "global": "global", "__local": "local", "local": "local",
                  "__constant": "constant", "constant": "constant",
                  "__private": "private", "private": "private"}
_QUALIFIERS = {"const", "restrict", "__restrict", "__restrict__", "volatile", "__read_only",
               "read_only", "__write_only", "write_only", "__read_write", "read_write"}
_UNSIGNED = {"char": "uchar", "short": "ushort", "int": "uint", "long": "ulong"}
# element types whose kind (integer or floating) is known, for the binding checks
INTEGER_TYPES = {"char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "size_t",
                 "bool"}
FLOAT_TYPES = {"float", "half", "double"}


@dataclass(frozen=True)
class KernelParameter:
    name: str
    declaration: str          # as written, spaces collapsed: "__global const half* restrict src"
    address_space: str        # "global" | "local" | "constant" | "private" (the default)
    is_pointer: bool
    base_type: str            # the type without qualifiers: "half", "float8", "int", "uint" ...
    position: int             # 0-based

    @property
    def is_integer(self) -> bool:
        return not self.is_pointer and self.base_type in INTEGER_TYPES

    @property
    def is_float(self) -> bool:
        return not self.is_pointer and self.base_type in FLOAT_TYPES


def _blank(match: re.Match) -> str:
    return re.sub(r"[^\n]", " ", match.group(0))


def clean_source(text: str) -> str:
    """Comments, preprocessor directives and attributes blanked (lines and columns kept)."""
    text = _COMMENT.sub(_blank, text)
    text = _DIRECTIVE.sub(_blank, text)
    return _ATTRIBUTE.sub(_blank, text)


def _closing_paren(text: str, open_pos: int) -> int | None:
    depth = 0
    for i in range(open_pos, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    return None


def _split_top_level(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _parameter(text: str, position: int) -> KernelParameter | None:
    declaration = " ".join(text.split())
    # an array declarator or a parenthesised name is not a kernel parameter form we know;
    # take the last identifier before any '[' anyway
    head = declaration.split("[", 1)[0]
    words = _IDENT.findall(head)
    if not words:
        return None
    name = words[-1]
    type_words = words[:-1]
    space = "private"
    base: list[str] = []
    for w in type_words:
        if w in ADDRESS_SPACES:
            space = ADDRESS_SPACES[w]
        elif w not in _QUALIFIERS:
            base.append(w)
    if len(base) == 2 and base[0] == "unsigned" and base[1] in _UNSIGNED:
        base = [_UNSIGNED[base[1]]]
    elif base == ["unsigned"]:
        base = ["uint"]
    return KernelParameter(name=name, declaration=declaration, address_space=space,
                           is_pointer="*" in head, base_type=" ".join(base), position=position)


def kernel_parameters(source: str, entry: str) -> tuple[KernelParameter, ...] | None:
    """The parameters of `__kernel void entry(...)` in `source`, in order; None when no such
    kernel is visible (or its parameter list does not close)."""
    text = clean_source(source)
    for m in _KERNEL.finditer(text):
        open_pos = text.find("(", m.end())
        if open_pos == -1:
            return None
        if any(stop in text[m.end():open_pos] for stop in ";{}"):
            continue
        head = _IDENT.findall(text[m.end():open_pos])
        if not head or head[-1] != entry:
            continue
        close = _closing_paren(text, open_pos)
        if close is None:
            return None
        inner = text[open_pos + 1:close].strip()
        if not inner or inner == "void":
            return ()
        params = []
        for i, part in enumerate(_split_top_level(inner)):
            p = _parameter(part, i)
            if p is None:
                return None
            params.append(p)
        return tuple(params)
    return None


def find_kernel_parameters(sources, entry: str) -> tuple[KernelParameter, ...] | None:
    """kernel_parameters over several source texts (the first that defines `entry`)."""
    for text in sources:
        found = kernel_parameters(text, entry)
        if found is not None:
            return found
    return None


# -- kernel names (both dialects check that the entry is one) -----------------------------------
_COMMENT_START = re.compile(r"//|/\*")
_KERNEL_KEYWORD = re.compile(r"\b(?:__kernel|kernel)\b")
# `__attribute__((...))` with one level of parentheses inside (`reqd_work_group_size(16,1,1)`);
# no `.*?`, which would rescan to the end of the text from every unclosed attribute
_ATTRIBUTE = re.compile(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)")
_NAME_BEFORE_PAREN = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
_KERNEL_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)[^\n]*", re.M)
# how far after `__kernel` the function's name is looked for: a real head (`__kernel
# __attribute__((reqd_work_group_size(16, 1, 1))) void name(`) is far shorter
_KERNEL_HEAD = 4096


def without_comments(source: str) -> str:
    """OpenCL C text with each comment replaced by a space, in one pass (a lazy regex for block
    comments rescans to the end from every unclosed opener: quadratic on a file of them)."""
    parts, pos = [], 0
    while True:
        m = _COMMENT_START.search(source, pos)
        if m is None:
            parts.append(source[pos:])
            return "".join(parts)
        parts.append(source[pos:m.start()])
        parts.append(" ")
        if m.group(0) == "//":
            end = source.find("\n", m.end())
        else:
            end = source.find("*/", m.end())
            end = -1 if end == -1 else end + 2
        if end == -1:
            return "".join(parts)
        pos = end


def kernel_macros(source: str) -> list[str]:
    """Names of the macros whose definition mentions `kernel` (any case), comments ignored."""
    text = without_comments(source)
    return [m.group(1) for m in _KERNEL_MACRO.finditer(text) if "kernel" in m.group(0).lower()]


def kernel_names(source: str) -> list[str]:
    """Names of the __kernel functions defined in OpenCL C text (comments ignored). Each name is
    looked for between its keyword and the next '{', ';' or keyword, within _KERNEL_HEAD
    characters, so the scan stays linear whatever the text."""
    text = without_comments(source)
    keywords = list(_KERNEL_KEYWORD.finditer(text))
    stops = [m.start() for m in re.finditer(r"[{;]", text)]
    names, s = [], 0
    for n, m in enumerate(keywords):
        while s < len(stops) and stops[s] < m.end():
            s += 1
        end = min(stops[s] if s < len(stops) else len(text),
                  keywords[n + 1].start() if n + 1 < len(keywords) else len(text),
                  m.end() + _KERNEL_HEAD)
        head = _ATTRIBUTE.sub(" ", text[m.end():end])
        name = _NAME_BEFORE_PAREN.search(head)
        if name:
            names.append(name.group(1))
    return names
