"""Loading configs into a `ConfigSet`: files or strings, one or many, every problem collected.

Per file: parse (xmlload) -> structure (schema) -> each element to its dialect's collector
(dialects.py: SimpleGPU's checks build a LayerSpec, simplegpu/checks.py; MVCL's group the file's
elements into MvclLayers, mvcl/checks.py and mvcl/layers.py), which registers it. A content
problem never raises; it becomes a Diagnostic, and a layer with an error is left out of
`.layers`. Only a config file that cannot be read at all raises (OSError), so the CLI can tell
"bad file" (exit 2) from "bad content" (exit 1).
"""
from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ..errors import ConfigFileError
from ..files import read_user_file
from .diagnostics import Diagnostics, Location
from .dialects import DIALECTS, dialect_of_element
from .limits import MAX_CONFIG_BYTES, MAX_SOURCE_BYTES
from .messages import clipped, listed
from .mvcl.spec import MvclLayer
from .schema import check_structure
from .simplegpu.spec import LayerSpec
from .sources.includes import DiskIncludes, MappedIncludes, with_includes
from .sources.source_text import SourceFile
from .xmlload import LAYER_TAG, Node, parse_document


@dataclass
class ConfigSet:
    """The result of loading one or more config files."""
    # by name; a later file wins. A SimpleGPU layer is a LayerSpec, an MVCL one an MvclLayer
    # (its variants and stages); both have `kind` ("SimpleGPU" | "MVCL") and `location`
    layers: dict[str, LayerSpec | MvclLayer] = field(default_factory=dict)
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    files: list[str] = field(default_factory=list)
    # every <CustomLayer name=...> seen, valid or not, in load order: (name, where)
    definitions: list[tuple[str, Location]] = field(default_factory=list)
    # valid layers that a later definition of their name replaced, in load order: `validate
    # --compile` builds them too, as each file's layers are the user's to fix
    replaced: list[LayerSpec | MvclLayer] = field(default_factory=list)
    # name -> (index of its first definition, of its last): kept up with `definitions` by
    # _indexed, so that each new definition is looked up, not scanned for (100 files of 1,000
    # layers took 358 s scanning the list for every layer)
    _index: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    _indexed: tuple = field(default=(None, 0), init=False, repr=False, compare=False)

    def raise_if_errors(self, strict: bool = False) -> "ConfigSet":
        """ConfigError carrying every error (and warning, when strict); else self."""
        self.diagnostics.raise_if_errors(strict)
        return self

    def define(self, name: str, where: Location) -> Location | None:
        """Record a definition of `name`; the place of its first earlier one, or None."""
        earlier = self.first_definition(name)
        self.definitions.append((name, where))
        return earlier

    def first_definition(self, name: str) -> Location | None:
        found = self._lookup().get(name)
        return self.definitions[found[0]][1] if found else None

    def last_definition_index(self, name: str) -> int | None:
        found = self._lookup().get(name)
        return found[1] if found else None

    def _lookup(self) -> dict:
        """The index, brought up to date with `definitions` (appended to, or replaced whole by
        Registry, which assigns the list of a staged copy)."""
        listed, count = self._indexed
        if listed is not self.definitions or count > len(self.definitions):
            self._index, count = {}, 0
        for i in range(count, len(self.definitions)):
            first, _ = self._index.get(self.definitions[i][0], (i, i))
            self._index[self.definitions[i][0]] = (first, i)
        self._indexed = (self.definitions, len(self.definitions))
        return self._index


class _FileSources:
    """Source@filename resolved against the config's directory, refused outside its tree."""

    def __init__(self, config_path: str, allow_external: bool):
        self.base = os.path.realpath(os.path.dirname(os.path.abspath(config_path)))
        self.allow_external = allow_external

    def __call__(self, src: Node, layer: str | None, diags: Diagnostics) -> SourceFile | None:
        filename = src.attrs["filename"]
        where = src.where("filename")
        path = os.path.realpath(os.path.join(self.base, filename))
        if not self.allow_external and os.path.commonpath([path, self.base]) != self.base:
            diags.error(where, "CL042",
                             f"source '{clipped(filename)}' resolves to {clipped(path, 300)}, "
                             f"outside the config's directory {self.base}; refused (use "
                             f"--allow-external-sources, or allow_external_sources=True, to "
                             f"allow it)", layer)
            return None
        if not os.path.exists(path):
            diags.error(where, "CL040", f"source file '{clipped(filename)}' does not exist "
                             f"(looked for {clipped(path, 300)}, relative to the config's "
                             f"directory)", layer)
            return None
        try:
            data = read_user_file(path, MAX_SOURCE_BYTES)
        except OSError as e:
            diags.error(where, "CL041", f"source file '{clipped(filename)}' cannot be read: "
                             f"{e.strerror or e}", layer)
            return None
        text = _source_text(data, filename, where, layer, diags)
        if text is None:
            return None
        return with_includes(SourceFile(filename, path, text, src.location), path,
                             DiskIncludes(self.base, self.allow_external), layer, diags)


class _MappedSources:
    """Source@filename looked up in a mapping of name -> text (configs loaded from strings)."""

    def __init__(self, sources: Mapping[str, str | bytes] | None):
        self.sources = dict(sources or {})

    def __call__(self, src: Node, layer: str | None, diags: Diagnostics) -> SourceFile | None:
        filename = src.attrs["filename"]
        where = src.where("filename")
        key = filename if filename in self.sources else posixpath.normpath(filename)
        if key not in self.sources:
            given = listed(sorted(map(str, self.sources))) or "none"
            diags.error(where, "CL040", f"source '{clipped(filename)}' is not among the given "
                             f"sources (given: {given})", layer)
            return None
        value = self.sources[key]
        if isinstance(value, bytes):
            value = _source_text(value, filename, where, layer, diags)
            if value is None:
                return None
        elif not isinstance(value, str):
            diags.error(where, "CL041", f"source '{clipped(filename)}' is given as "
                             f"{type(value).__name__}; expected text", layer)
            return None
        return with_includes(SourceFile(filename, None, value, src.location), key,
                             MappedIncludes(self.sources), layer, diags)


def _source_text(data: bytes, filename: str, where: Location, layer: str | None,
                 diags: Diagnostics) -> str | None:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        diags.error(where, "CL041", f"source file '{clipped(filename)}' is not UTF-8 text (byte "
                    f"0x{data[e.start]:02x} on its line {line})", layer)
        return None


def _is_opencl_source(data: bytes | str, file: str) -> bool:
    """Whether a file given as a config is a kernel's source instead: named .cl, or a kernel
    definition with no <CustomLayer> in it."""
    text = data if isinstance(data, str) else data.decode("utf-8", "replace")
    return file.lower().endswith(".cl") or (
        ("__kernel" in text or "kernel void" in text) and "<CustomLayer" not in text)


def _load_one(data: bytes | str, file: str, reader, config_path: str | None,
              into: ConfigSet) -> None:
    diags = Diagnostics()
    into.files.append(file)
    # a .cl given as -c: the run went on with no layer loaded (one warning above the whole
    # list of built-ins), or stopped at an XML error at its first '<' or '&'
    doc = None if _is_opencl_source(data, file) else parse_document(data, file, diags)
    if doc is None and not diags.errors:
        diags.error(Location(file, 1, 1), "CL004",
                    "this is an OpenCL source, not a config: pass the .xml whose <Source "
                    "filename=...> names it (-c layer.xml)")
    if doc is not None:
        layer_nodes = [n for n in doc.nodes if n.tag == LAYER_TAG]
        if not layer_nodes:
            diags.warning(Location(file, 1, 1), "CL004",
                          "no <CustomLayer> element found; expected one or more, at the top "
                          "level or inside one container element")
        bad = check_structure(doc, diags)
        # each dialect's collector checks its elements and registers their specs; one may wait
        # for the file's end (MVCL elements of one name are variants and stages of one layer)
        collectors = {name: d.collector(diags, reader, config_path, into)
                      for name, d in DIALECTS.items()}
        for i, node in enumerate(layer_nodes):
            collectors[dialect_of_element(node.attrs.get("type")).name].add(node, i in bad)
        for collector in collectors.values():
            collector.finish()
    # file order, then line and column; stable, so one place keeps its reporting order
    into.diagnostics.extend(sorted(diags, key=lambda d: (d.line, d.column)))


def load_configs(paths: Iterable[str | os.PathLike] | str | os.PathLike, *,
                 allow_external_sources: bool = False,
                 into: ConfigSet | None = None) -> ConfigSet:
    """Load config files (in order) into a ConfigSet. Raises ConfigFileError (a ConfigError and
    an OSError) only when a config file itself cannot be read; every content problem is a
    diagnostic."""
    result = into if into is not None else ConfigSet()
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    for path in paths:
        path = os.fspath(path)
        try:
            data = read_user_file(path, MAX_CONFIG_BYTES)
        except OSError as e:
            raise ConfigFileError(path, e) from e
        _load_one(data, path, _FileSources(path, allow_external_sources), path, result)
    return result


def load_config_string(xml: str | bytes, sources: Mapping[str, str] | None = None, *,
                       name: str = "<string>", into: ConfigSet | None = None) -> ConfigSet:
    """Load a config from text or bytes; Source@filename is looked up in `sources`
    (name -> text). Never raises for content problems."""
    result = into if into is not None else ConfigSet()
    _load_one(xml, name, _MappedSources(sources), None, result)
    return result
