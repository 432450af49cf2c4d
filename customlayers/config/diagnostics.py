"""Diagnostics: problems with a place. Errors are values here; the CLI renders them once.

`Diagnostics` collects them; `raise_or_collect` style: the loader always collects, and
`Diagnostics.raise_if_errors()` turns the collection into one `ConfigError` carrying all of them,
so "report all" and "stop at the first" share one code path.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Iterable, Iterator

from ..errors import ConfigError
from .messages import clipped

ERROR = "error"
WARNING = "warning"
INFO = "info"


@dataclass(frozen=True)
class Location:
    """Where something was written: file (path or a name given for a string), 1-based line and
    column. line 0 means "the file as a whole", written as the file alone (`a.xml: error...`,
    as compilers write a file they cannot open), never as a line 0 an editor cannot jump to."""
    file: str
    line: int = 0
    column: int = 1

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}" if self.line else self.file


@dataclass(frozen=True)
class Diagnostic:
    file: str
    line: int
    column: int
    severity: str          # "error" | "warning" | "info"
    code: str              # stable code, e.g. "CL012"
    message: str           # expected versus found
    layer: str | None = None

    @classmethod
    def at(cls, loc: Location, severity: str, code: str, message: str,
           layer: str | None = None) -> "Diagnostic":
        return cls(loc.file, loc.line, loc.column, severity, code, message, layer)

    def render(self) -> str:
        where = str(Location(self.file, self.line, self.column))
        text = f"{where}: {self.severity}[{self.code}]: {self.message}"
        if self.layer:
            text += f" (layer {clipped(self.layer)})"
        return text

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class Diagnostics:
    """An ordered collection of diagnostics."""
    items: list[Diagnostic] = field(default_factory=list)

    def add(self, diag: Diagnostic) -> None:
        self.items.append(diag)

    def error(self, loc: Location, code: str, message: str, layer: str | None = None) -> None:
        self.add(Diagnostic.at(loc, ERROR, code, message, layer))

    def warning(self, loc: Location, code: str, message: str, layer: str | None = None) -> None:
        self.add(Diagnostic.at(loc, WARNING, code, message, layer))

    def info(self, loc: Location, code: str, message: str, layer: str | None = None) -> None:
        self.add(Diagnostic.at(loc, INFO, code, message, layer))

    def extend(self, diags: Iterable[Diagnostic]) -> None:
        self.items.extend(diags)

    def __iter__(self) -> Iterator[Diagnostic]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity == ERROR]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity == WARNING]

    def sorted(self) -> list[Diagnostic]:
        return sorted(self.items, key=lambda d: (d.file, d.line, d.column))

    def raise_if_errors(self, strict: bool = False) -> None:
        bad = [d for d in self.items
               if d.severity == ERROR or (strict and d.severity == WARNING)]
        if bad:
            n = len(bad)
            raise ConfigError(f"{n} problem{'s' if n != 1 else ''} in the layer configuration",
                              sorted(bad, key=lambda d: (d.file, d.line, d.column)))

    def to_json(self) -> str:
        return json.dumps([d.to_json() for d in self.sorted()], indent=2)
