"""What the checkers of every dialect share: the <CustomLayer> element being checked, reading its
<Source> files (through the loader's reader), and reporting at a place with the layer's name.
Each dialect's checks (simplegpu/checks.py, mvcl/checks.py) build on ElementChecker."""
from __future__ import annotations

from typing import Callable

from .diagnostics import Diagnostics, Location
from .messages import clipped
from .sources.source_text import SourceFile
from .xmlload import Node

# reads one <Source> (node, layer name, where to report); None after reporting why it could not
SourceReader = Callable[[Node, "str | None", Diagnostics], "SourceFile | None"]


def first_child(node: Node | None, tag: str) -> Node | None:
    if node is None:
        return None
    found = node.find_all(tag)
    return found[0] if found else None


class ElementChecker:
    """What the checkers of both dialects share: the <CustomLayer> element, where its sources
    are read from, and reporting at a place with the layer's name. `ok` stays True while no
    error was reported here."""

    def __init__(self, node: Node, diags: Diagnostics, read_source: SourceReader,
                 config_path: str | None):
        self.node = node
        self.diags = diags
        self.read_source = read_source
        self.config_path = config_path
        self.layer = node.attrs.get("name") or None
        self.ok = True

    def error(self, loc: Location, code: str, message: str) -> None:
        self.ok = False
        self.diags.error(loc, code, message, self.layer)

    def warning(self, loc: Location, code: str, message: str) -> None:
        self.diags.warning(loc, code, message, self.layer)

    def info(self, loc: Location, code: str, message: str) -> None:
        self.diags.info(loc, code, message, self.layer)

    # -- sources -------------------------------------------------------------------------
    def formula_error(self, el, attr: str, text: str, e) -> None:
        """CL060 for a formula attribute that does not parse (a FormulaError `e`), pointing at
        the character where it stops when the value is one line of the attribute."""
        loc = el.where(attr)
        if attr in el.attr_locations and e.position is not None and "\n" not in text:
            # the value starts after `attr="`; point at the character
            loc = Location(loc.file, loc.line, loc.column + len(attr) + 2 + e.position)
        self.error(loc, "CL060", f"{attr} '{clipped(text)}' does not parse: {e.message}")

    def _sources(self, kernel: Node | None) -> list[SourceFile] | None:
        """Every Source read in document order; None when one could not be read."""
        if kernel is None:
            return None
        files, failed = [], False
        for src in kernel.find_all("Source"):
            filename = src.attrs.get("filename")
            if not filename or not filename.strip():
                failed = True  # the schema reported it
                continue
            got = self._read(src, filename)
            if got is None:
                self.ok = False
                failed = True
            else:
                files.append(got)
        return None if failed else files

    def _read(self, src: Node, filename: str) -> SourceFile | None:
        """One Source's file (a dialect may read another file in its place)."""
        return self.read_source(src, self.layer, self.diags)
