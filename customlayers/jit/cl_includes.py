"""The built-in kernels' `#include "name.cl"`, resolved by name before the build.

A built-in op's program is its #define block and one kernel file (customlayers/ops/<name>.cl);
the helpers that file needs (conv_epilogue.cl, group_reduce.cl, gemm.cl, ...) are named in it
with `#include "helper.cl"`, so no caller concatenates helpers in an order. The expansion is the
one user sources get (config/sources/includes.py: found outside comments, pasted between `#line`
directives, a cycle or a missing file an error), with two differences: every file is expanded
once per program (as if each had an include guard), and names are bare file names of the ops
folder, read through a reader function (package data; a test passes its own).

The text carries `#line N "name.cl"` directives from its first line on, so PoCL reports a build
error at the kernel file and line; directive_line_map turns the same directives into the line
map (KernelLaunch.line_map) for compilers that report lines of the whole text (NVIDIA's).
Pure Python: no OpenCL here.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Callable

from ..config.sources.includes import IncludeFiles, IncludeRefused, expand_includes
from ..config.sources.source_text import line_directive
from ..errors import KernelSourceError

Reader = Callable[[str], str]     # a kernel file's name -> its text; FileNotFoundError if none


class _KernelFiles(IncludeFiles):
    """Kernel files by bare name, read (once each) through `read`."""

    def __init__(self, read: Reader):
        self.read_file = read
        self.texts: dict[str, str] = {}

    def resolve(self, including: str, name: str) -> tuple[str, str]:
        if "/" in name or "\\" in name or name in (".", ".."):
            raise IncludeRefused("is not a bare file name; built-in kernels include their "
                                 "helpers from the same folder by name")
        if name not in self.texts:
            try:
                self.texts[name] = self.read_file(name)
            except (FileNotFoundError, IsADirectoryError):
                raise IncludeRefused("is no built-in kernel file (customlayers/ops/ has none "
                                     "of that name)") from None
        return name, name

    def read(self, key: str) -> str:
        return self.texts[key]


def expand_kernel_file(name: str, read: Reader) -> str:
    """Kernel file `name` with every helper it includes (and they include) pasted in by name,
    once each, after `#line 1 "name"`. KernelSourceError naming file:line:column when an
    include is missing, makes a cycle, or cannot be resolved."""
    files = _KernelFiles(read)
    try:
        files.resolve("", name)
    except IncludeRefused as e:
        raise KernelSourceError(f'built-in kernel file "{name}" {e}') from None
    expanded = expand_includes(files.read(name), name, name, files, once_each=True)
    if expanded.problems:
        raise KernelSourceError("built-in kernel file " + name + " cannot be put together: "
                                + "; ".join(f"{p.location}: {p.message}"
                                            for p in expanded.problems))
    return line_directive(name) + "\n" + expanded.text


_LINE = re.compile(r'[ \t]*#[ \t]*line[ \t]+(\d+)(?:[ \t]+"((?:[^"\\]|\\.)*)")?[ \t]*$')


# A network's launches share a few dozen program texts (ResNet-50: 100 launches, 28 texts), and
# every launch asks for its text's map when it is made: 0.11 s of a 0.46 s warm load on the H100
# before this cache (stop 26)
@lru_cache(maxsize=128)
def directive_line_map(text: str) -> tuple:
    """Where each line of `text` comes from by its own `#line` directives: (file, line) for
    every line after the first directive, None before it and for the directives themselves;
    () when the text has none (its lines are its own)."""
    if "#line" not in text and "# line" not in text:
        return ()
    origins: list = []
    file, line = None, 0
    for physical in text.split("\n"):
        # (the pattern only where the line can be a directive: most are not)
        m = _LINE.match(physical) if "#" in physical else None
        if m:
            if m.group(2) is not None:
                file = re.sub(r"\\(.)", r"\1", m.group(2))
            line = int(m.group(1))
            origins.append(None)
            continue
        origins.append((file, line) if file is not None else None)
        line += 1
    if origins and text.endswith("\n"):
        origins.pop()                # the empty piece after the last new line is no line
    return tuple(origins)
