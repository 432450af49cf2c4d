"""The user's .cl sources as lines of a generated program, each file after a comment with its
name and a `#line 1 "<file>"` directive, so compilers report errors at the user's own file and
line; and the line map that takes every generated line back to (file, line) for compilers (or
log lines) that ignore the directive. Both dialects' programs (SimpleGPU in jit/program.py,
MVCL in jit/mvcl_program.py) are assembled with it. SourceFile, one <Source> as loaded, is
here because both dialects' specs hold them."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..diagnostics import Location


@dataclass(frozen=True)
class SourceFile:
    filename: str            # as written in Source@filename
    path: str | None         # resolved path on disk (None when loaded from a string mapping)
    text: str                # the file's text (its #include directives expanded: includes.py)
    location: Location       # where the <Source> element is
    # where each line of `text` came from, (file, line) or None for a line the include
    # resolver wrote; None when the text is the file's own (line n is line n)
    origins: tuple | None = None

    def origin(self, line: int) -> tuple[str, int] | None:
        """Line `line` (1-based) of `text` -> (file, line) in the user's files."""
        if self.origins is None:
            return (self.path or self.filename, line)
        return self.origins[line - 1] if 1 <= line <= len(self.origins) else None



def source_display_name(source: SourceFile) -> str:
    """The name compiler messages use for a source: its path on disk, else its given name."""
    return source.path or source.filename


def line_directive(name: str, line: int = 1) -> str:
    escaped = name.replace("\\", "\\\\").replace('"', '\\"')
    return f'#line {line} "{escaped}"'


def append_sources(lines: list[str], origins: list, sources: Iterable[SourceFile]) -> None:
    """Append each source's lines to `lines`, and to `origins` where each came from (None for
    the comment and directive lines written here)."""
    for source in sources:
        display = source_display_name(source)
        lines += [f"// Source: {source.filename}", line_directive(display)]
        origins += [None, None]
        # split on "\n" only: str.splitlines() also breaks at \f, \v and others, which the
        # compiler does not count as new lines, and the line numbers would drift
        body = source.text.split("\n")
        if body and body[-1] == "":
            body.pop()
        for n, text in enumerate(body, start=1):
            lines.append(text)
            origins.append(source.origin(n))   # an included file's line, where expanded
