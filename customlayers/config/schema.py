"""Structural validation: the JSON Schema (schemas/customlayer.schema.json) applied with
jsonschema to a JSON form of the parsed config, every error mapped back to file:line:column.

JSON form: an element is an object; its attributes are "@name" keys (text, as written), its
child elements are arrays under their tag. While building it we record the Location of every
path, so an error's `absolute_path` resolves to the element or attribute it is about.
jsonschema's messages are rewritten into ours: expected versus found, and the allowed set, using
the schema's own "x-code"/"x-expected" annotations so the words live next to the rule.
"""
from __future__ import annotations

import difflib
import json
import re
from functools import lru_cache
from importlib import resources
from typing import Any

import jsonschema

from .diagnostics import Diagnostics, Location
from .dialects import DIALECTS
from .messages import clipped
from .xmlload import LAYER_TAG, Document, Node

Path = tuple  # of str (keys) and int (array indices)


@lru_cache(maxsize=None)
def load_schema(name: str = "customlayer.schema.json") -> dict:
    """A packaged schema (also published under schemas/): the descriptor's, or the MVCL
    dialect's (mvcl.schema.json), which the descriptor's refers to for type="MVCL"."""
    text = resources.files("customlayers").joinpath(f"schemas/{name}").read_text(
        encoding="utf-8")
    return json.loads(text)


@lru_cache(maxsize=1)
def _validator() -> jsonschema.protocols.Validator:
    from referencing import Registry, Resource
    schema = load_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    # the descriptor's schema refers to each dialect's own ("mvcl.schema.json") by its $id:
    # served from the package, never fetched
    registry = Registry()
    for name in sorted({d.schema for d in DIALECTS.values()} - {"customlayer.schema.json"}):
        dialect_schema = load_schema(name)
        cls.check_schema(dialect_schema)
        registry = registry.with_resource(dialect_schema["$id"],
                                          Resource.from_contents(dialect_schema))
    return cls(schema, registry=registry)


class JsonForm:
    """The JSON instance of a document plus the place and tag of every path in it."""

    def __init__(self, doc: Document):
        self.file = doc.file
        self.locations: dict[Path, Location] = {(): Location(doc.file, 0, 1)}
        self.tags: dict[Path, str] = {(): doc.container.tag if doc.container else "file"}
        if doc.container is not None:
            self.locations[()] = doc.container.location
        self.instance = self._children(doc.nodes, ())
        self.layer_names = [n.attrs.get("name") for n in doc.nodes if n.tag == LAYER_TAG]

    def _children(self, nodes: list[Node], path: Path) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        for node in nodes:
            items = obj.setdefault(node.tag, [])
            items.append(self._element(node, path + (node.tag, len(items))))
        return obj

    def _element(self, node: Node, path: Path) -> dict[str, Any]:
        self.locations[path] = node.location
        self.tags[path] = node.tag
        obj = {}
        for name, value in node.attrs.items():
            obj["@" + name] = value
            self.locations[path + ("@" + name,)] = node.where(name)
        obj.update(self._children(node.children, path))
        return obj

    def location(self, path: Path) -> Location:
        """The place of `path`, or of its nearest recorded ancestor."""
        path = tuple(path)
        while path not in self.locations:
            path = path[:-1]
        return self.locations[path]

    def tag(self, path: Path) -> str:
        path = tuple(path)
        while path not in self.tags:
            path = path[:-1]
        return self.tags[path]

    def layer_of(self, path: Path) -> tuple[int | None, str | None]:
        """(index among the CustomLayer elements, its name) for a path inside a layer."""
        if len(path) >= 2 and path[0] == LAYER_TAG and isinstance(path[1], int):
            return path[1], self.layer_names[path[1]]
        return None, None


def _suggest(word: str, known) -> str:
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _known_properties(schema: dict) -> set[str]:
    return set(schema.get("properties", {}))


def _pattern_allowed(schema: dict, key: str) -> bool:
    """True when a patternProperties rule admits `key` (MVCL's <Where> takes any attribute)."""
    return any(re.search(p, key) for p in schema.get("patternProperties", {}))


@lru_cache(maxsize=1)
def element_names() -> frozenset[str]:
    """Every element a descriptor of any dialect has (the schemas' property names)."""
    names: set[str] = {LAYER_TAG}

    def walk(node) -> None:
        if isinstance(node, dict):
            names.update(k for k in node.get("properties", {}) if not k.startswith("@"))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(load_schema())
    for name in sorted({d.schema for d in DIALECTS.values()}):
        walk(load_schema(name))
    return frozenset(names)


def check_text(doc: Document, diags: Diagnostics) -> None:
    """CL017 for text inside a descriptor's elements (a doubled '/>'): none holds any. Text
    inside an unknown element goes with it (CL010 says it is ignored)."""
    known = element_names()
    for words, where, owner in doc.stray:
        if owner in known:
            diags.warning(where, "CL017", f"text {clipped(repr(words), 40)} inside <{owner}> "
                                          f"is ignored: a config's elements hold attributes, "
                                          f"no text (a doubled '/>'?)")


def check_structure(doc: Document, diags: Diagnostics) -> set[int]:
    """Apply the schema to `doc`; report every problem; return the indices (among the
    CustomLayer elements) of layers that got an error."""
    check_text(doc, diags)
    form = JsonForm(doc)
    bad_layers: set[int] = set()
    reported_required: set[Path] = set()
    for error in _validator().iter_errors(form.instance):
        path = tuple(error.absolute_path)
        index, layer = form.layer_of(path)
        before = len(diags.errors)
        _report(error, path, form, layer, diags, reported_required)
        if index is not None and len(diags.errors) > before:
            bad_layers.add(index)
    return bad_layers


def _report(error, path: Path, form: JsonForm, layer: str | None, diags: Diagnostics,
            reported_required: set[Path]) -> None:
    kind = error.validator
    schema = error.schema if isinstance(error.schema, dict) else {}
    if kind == "additionalProperties":
        _unknown(error, path, form, layer, diags)
    elif kind == "required":
        if path in reported_required:  # jsonschema gives one error per missing key: we list
            return                     # them all on the first
        reported_required.add(path)
        _missing(error, path, form, layer, diags)
    elif kind == "maxItems":
        tag = path[-1]
        diags.error(form.location(path + (1,)), "CL014",
                    f"<{tag}> appears {len(error.instance)} times in <{form.tag(path[:-1])}>; "
                    f"expected at most one", layer)
    elif kind in ("const", "enum", "pattern") and "x-code" in schema:
        attr = str(path[-1]).lstrip("@")
        value = error.instance
        code = schema["x-code"]
        if code == "CL015":
            message = f"'{clipped(attr)}' is empty; expected {schema['x-expected']}"
        else:
            message = f"{clipped(attr)} '{clipped(str(value))}' is not {schema['x-expected']}"
            hint = schema.get("x-hints", {}).get(value)
            if hint:
                message += f": {hint}"
        diags.error(form.location(path), code, message, layer)
    else:  # a rule without our annotations: still reported, with jsonschema's words
        diags.error(form.location(path), "CL016",
                    f"{clipped('/'.join(map(str, path))) or 'document'}: "
                    f"{clipped(error.message, 200)}", layer)


def _unknown(error, path: Path, form: JsonForm, layer: str | None, diags: Diagnostics) -> None:
    known = _known_properties(error.schema)
    owner = form.tag(path)
    for key in error.instance:
        if key in known or _pattern_allowed(error.schema, key):
            continue
        if key.startswith("@"):
            name = key[1:]
            attrs = [k[1:] for k in known if k.startswith("@")]
            diags.warning(form.location(path + (key,)), "CL011",
                          f"unknown attribute '{clipped(name)}' on <{clipped(owner)}> is "
                          f"ignored; expected "
                          f"{_one_of(attrs)}{_suggest(name, attrs)}", layer)
        else:
            elements = [k for k in known if not k.startswith("@")]
            for i in range(len(error.instance[key])):
                where = "at the top level" if owner in ("file",) else f"in <{clipped(owner)}>"
                diags.warning(form.location(path + (key, i)), "CL010",
                              f"unknown element <{clipped(key)}> {where} is ignored; expected "
                              f"{_one_of(elements, '<', '>')}{_suggest(key, elements)}", layer)


def _missing(error, path: Path, form: JsonForm, layer: str | None, diags: Diagnostics) -> None:
    owner = form.tag(path)
    for key in error.validator_value:
        if key in error.instance:
            continue
        if key.startswith("@"):
            diags.error(form.location(path), "CL013",
                        f"<{owner}> has no '{key[1:]}' attribute; it is required", layer)
        else:
            once = error.schema.get("properties", {}).get(key, {}).get("maxItems") == 1
            diags.error(form.location(path), "CL012",
                        f"<{owner}> has no <{key}> element; expected "
                        f"{'exactly one' if once else 'at least one'}", layer)


def _one_of(names, left: str = "", right: str = "") -> str:
    names = sorted(names)
    if not names:
        return "none here"
    return "one of " + ", ".join(f"{left}{n}{right}" for n in names)
