"""Semantic checks the schema cannot express, and the building of a `LayerSpec` from a checked
<CustomLayer> node.

The schema has already reported structure and value spelling; here we convert leniently (a value
the schema rejected is simply skipped, never reported twice) and check what spans several
elements: arg-index numbering, ports, outputs, defines against their types, formulas, and the
entry function in the sources. Sources are read by the caller (loader.py) and passed in.
"""
from __future__ import annotations

import re
from typing import Callable

from ..errors import FormulaError
from .define_values import check_define_value, shown
from .diagnostics import Diagnostics, Location
from .formulas import check_work_size_limits, parse_formula_list
from .spec import (FORMATS, DataBinding, DefineSpec, LayerSpec, SourceFile, TensorBinding,
                   WorkSizesSpec)
from .xmlload import Node

MAX_WORK_DIMS = 3
MAX_TENSOR_RANK = 4   # custom layers see every tensor as B,F,Y,X
_INDEX = re.compile(r"[0-9]+\Z")
_DIM = re.compile(r"(output|input)(?:(?:,\s*|\s+)([0-9]+))?\Z")

# reads one <Source> (node, layer name, where to report); None after reporting why it could not
SourceReader = Callable[[Node, "str | None", Diagnostics], "SourceFile | None"]


def _index(text: str | None) -> int | None:
    return int(text) if text is not None and _INDEX.match(text) else None


def _first(node: Node | None, tag: str) -> Node | None:
    if node is None:
        return None
    found = node.find_all(tag)
    return found[0] if found else None


def parse_dim(text: str | None) -> tuple[str, int] | None:
    """'output' | 'input' | 'input,N' | 'input N' -> (kind, N); None when misspelled."""
    if text is None:
        return ("output", 0)
    m = _DIM.match(text)
    if not m or (m.group(1) == "output" and m.group(2) is not None):
        return None
    return (m.group(1), int(m.group(2) or 0))


class LayerChecker:
    """Checks one <CustomLayer> and builds its LayerSpec. `ok` stays True while no error was
    reported for this layer here."""

    def __init__(self, node: Node, diags: Diagnostics, read_source: SourceReader,
                 config_path: str | None):
        self.node = node
        self.diags = diags
        self.read_source = read_source
        self.config_path = config_path
        self.layer = node.attrs.get("name") or None
        self.ok = True

    # -- reporting -----------------------------------------------------------------------
    def error(self, loc: Location, code: str, message: str) -> None:
        self.ok = False
        self.diags.error(loc, code, message, self.layer)

    def warning(self, loc: Location, code: str, message: str) -> None:
        self.diags.warning(loc, code, message, self.layer)

    # -- the whole layer -----------------------------------------------------------------
    def build(self) -> LayerSpec | None:
        """The LayerSpec, or None when this layer has an error (reported)."""
        node = self.node
        kernel = _first(node, "Kernel")
        buffers = _first(node, "Buffers")
        entry = kernel.attrs.get("entry") if kernel else None
        sources = self._sources(kernel)
        defines = self._defines(kernel)
        tensors, data = self._buffers(buffers)
        work_sizes = self._work_sizes(_first(node, "WorkSizes"), tensors, data)
        option_nodes = node.find_all("CompilerOptions")
        options = tuple(n.attrs.get("options", "") for n in option_nodes)
        given = [n for n in option_nodes if n.attrs.get("options", "").strip()]
        options_at = given[0].where("options") if given else None
        if entry and sources and kernel is not None:
            self._check_entry(entry, sources, kernel)
        if not (self.ok and self.layer and kernel and buffers and entry and sources):
            return None
        return LayerSpec(
            name=self.layer, type=node.attrs.get("type", ""),
            version=node.attrs.get("version", ""), entry=entry, sources=tuple(sources),
            defines=tuple(defines), tensors=tuple(tensors), data=tuple(data),
            compiler_options=options, work_sizes=work_sizes, location=node.location,
            config_path=self.config_path, compiler_options_location=options_at)

    # -- sources -------------------------------------------------------------------------
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
            got = self.read_source(src, self.layer, self.diags)
            if got is None:
                self.ok = False
                failed = True
            else:
                files.append(got)
        return None if failed else files

    def _check_entry(self, entry: str, sources: list[SourceFile], kernel: Node) -> None:
        found: list[str] = []
        for src in sources:
            found += kernel_names(src.text)
        if entry in found:
            return
        names = ", ".join(src.filename for src in sources)
        have = f"; kernels found: {', '.join(found)}" if found else "; no __kernel function found"
        macros = [(src.filename, m) for src in sources for m in kernel_macros(src.text)]
        if macros:
            # `KERNEL(my_k)(...)` defines a kernel this scan cannot see without a preprocessor;
            # the build finds the entry (or not) authoritatively
            where = ", ".join(f"{name} in {file}" for file, name in macros)
            self.warning(kernel.where("entry"), "CL044",
                         f"entry function '{entry}' is not visibly defined as a __kernel in "
                         f"{names}{have}; the sources define a macro mentioning kernel ({where}), "
                         f"so the build will check the entry")
            return
        self.error(kernel.where("entry"), "CL044",
                   f"entry function '{entry}' is not defined as a __kernel in {names}{have}")

    # -- defines -------------------------------------------------------------------------
    def _defines(self, kernel: Node | None) -> list[DefineSpec]:
        result = []
        for d in (kernel.find_all("Define") if kernel else ()):
            name = d.attrs.get("name")
            if not name or not name.strip():
                continue  # the schema reported it
            param, dtype, default = (d.attrs.get(k) for k in ("param", "type", "default"))
            ident, _, own_value = name.strip().partition(" ")
            if default is not None:
                problem = check_define_value(default, dtype)
                if problem:
                    fits = f"does not fit type '{dtype}'" if dtype else "is refused"
                    self.error(d.where("default"), "CL050",
                               f"Define '{ident}': default {fits}: {problem}")
            name_problem = check_define_value(name, None)   # a name is pasted into the line too
            if name_problem:
                self.error(d.where("name"), "CL050",
                           f"Define name '{shown(name)}' is refused: {name_problem}")
            elif own_value.strip() and dtype:
                problem = check_define_value(own_value.strip(), dtype)
                if problem:
                    self.error(d.where("name"), "CL050",
                               f"Define '{ident}': the value in its name does not fit type "
                               f"'{dtype}': {problem}")
            if param is None and default is None and not own_value.strip():
                self.warning(d.location, "CL051",
                             f"Define '{ident}' has no param, no default and no value in its "
                             f"name: it will be defined empty ('#define {ident} ')")
            result.append(DefineSpec(name, param, dtype, default, d.location))
        return result

    # -- buffers -------------------------------------------------------------------------
    def _buffers(self, buffers: Node | None) -> tuple[list[TensorBinding], list[DataBinding]]:
        tensors: list[TensorBinding] = []
        data: list[DataBinding] = []
        if buffers is None:
            return tensors, data
        args: list[tuple[int, Node]] = []
        all_indices_ok = all_ports_ok = True
        ports: dict[tuple[str, int], Node] = {}
        kinds: set[str | None] = set()
        for t in buffers.find_all("Tensor"):
            arg, port = _index(t.attrs.get("arg-index")), _index(t.attrs.get("port-index"))
            kind = t.attrs.get("type")
            fmt = t.attrs.get("format", "BFYX")
            all_indices_ok &= arg is not None
            all_ports_ok &= port is not None
            kinds.add(kind)
            if arg is not None:
                args.append((arg, t))
            if kind in ("input", "output") and port is not None:
                if (kind, port) in ports:
                    first = ports[(kind, port)].location
                    self.error(t.where("port-index"), "CL033",
                               f"{kind} port {port} is bound twice; first at line {first.line}")
                ports.setdefault((kind, port), t)
            shape = t.attrs.get("shape")
            if shape is not None and shape.strip():
                self._shape(t, kind, shape)
            if arg is not None and port is not None and kind in ("input", "output") \
                    and fmt.upper() in FORMATS:
                tensors.append(TensorBinding(arg, kind, port, fmt.upper(), t.location, shape))
        for d in buffers.find_all("Data"):
            arg = _index(d.attrs.get("arg-index"))
            all_indices_ok &= arg is not None
            if arg is not None:
                args.append((arg, d))
                if d.attrs.get("name"):
                    data.append(DataBinding(d.attrs["name"], arg, d.location))
        self._check_args(args, all_indices_ok, buffers)
        if all_ports_ok:
            self._check_ports(ports, buffers)
        # a misspelled type may have meant "output": only then is "no output" a new problem
        if kinds and kinds <= {"input"}:
            self.error(buffers.location, "CL032",
                       "<Buffers> binds no output Tensor; expected at least one "
                       "<Tensor type=\"output\">")
        return tensors, data

    def _check_args(self, args: list[tuple[int, Node]], complete: bool, buffers: Node) -> None:
        seen: dict[int, Node] = {}
        for arg, el in args:
            if arg in seen:
                self.error(el.where("arg-index"), "CL030",
                           f"arg-index {arg} is bound twice: <{el.tag}> here and "
                           f"<{seen[arg].tag}> at line {seen[arg].location.line}")
            else:
                seen[arg] = el
        if not complete or not seen:
            return  # a missing or malformed index was reported; gaps would be noise
        missing = sorted(set(range(max(seen) + 1)) - set(seen))
        if missing:
            found = ", ".join(str(a) for a in sorted(seen))
            gap = ", ".join(str(a) for a in missing)
            self.error(buffers.location, "CL031",
                       f"kernel argument{'s' if len(missing) > 1 else ''} {gap} "
                       f"{'are' if len(missing) > 1 else 'is'} not bound: arg-index values must "
                       f"be 0..{max(seen)} without gaps; found {found}")

    def _check_ports(self, ports: dict[tuple[str, int], Node], buffers: Node) -> None:
        """Ports are numbered like the model's inputs and outputs: a gap would leave a model
        input without a Tensor (and INPUTk numbering would no longer follow the ports)."""
        for kind in ("input", "output"):
            bound = sorted(port for k, port in ports if k == kind)
            missing = sorted(set(range(len(bound))) - set(bound))
            if missing:
                found = ", ".join(map(str, bound))
                self.error(buffers.location, "CL035",
                           f"{kind} ports must be 0..{len(bound) - 1} without gaps; found "
                           f"{found}")

    # -- work sizes ----------------------------------------------------------------------
    def _formulas(self, el: Node, attr: str, text: str, max_entries: int | None) -> int | None:
        """Parse-check a formula list; its entry count, or None when it does not parse."""
        try:
            formulas = parse_formula_list(text, max_entries=None)
            count = len(formulas)
        except FormulaError as e:
            loc = el.where(attr)
            if attr in el.attr_locations and e.position is not None and "\n" not in text:
                # the value starts after `attr="`; point at the character
                loc = Location(loc.file, loc.line, loc.column + len(attr) + 2 + e.position)
            self.error(loc, "CL060", f"{attr} '{text}' does not parse: {e.message}")
            return None
        if max_entries is not None and count > max_entries:
            self.error(el.where(attr), "CL061",
                       f"{attr} '{text}' has {count} entries; expected at most {max_entries}")
        elif attr in ("global", "local"):
            self._constant_limits(el, attr, text, formulas)
        return count

    def _constant_limits(self, el: Node, attr: str, text: str, formulas) -> None:
        """Work-size entries without variables are known now: report one that no driver can
        run (the JIT refuses it again, for any shape)."""
        constant = [f for f in formulas if not f.variables]
        sizes = []
        for f in constant:
            try:
                sizes.append(f.evaluate({}))
            except FormulaError:
                return  # not a size problem; the JIT reports it with the shapes it has
        try:
            check_work_size_limits(sizes, constant, product=len(constant) == len(formulas))
        except FormulaError as e:
            self.error(el.where(attr), "CL065", f"{attr} '{text}': {e.message} in formula "
                                                f"'{e.formula}'")

    def _shape(self, t: Node, kind: str | None, text: str) -> None:
        """Our extension: an output Tensor's shape as formulas over the dim tensor's B,F,Y,X,
        for models that cannot say it (ONNX shape inference stops at a custom node)."""
        if kind == "input":
            self.warning(t.where("shape"), "CL064",
                         f"shape '{text}' on an input Tensor is ignored: inputs take the shape "
                         f"the model gives them; shape belongs on an output Tensor")
            return
        count = self._formulas(t, "shape", text, max_entries=None)
        if count is not None and count > MAX_TENSOR_RANK:
            self.error(t.where("shape"), "CL063",
                       f"shape '{text}' has {count} entries; a custom layer's tensor has at most "
                       f"{MAX_TENSOR_RANK} dims (B,F,Y,X)")

    def _work_sizes(self, ws: Node | None, tensors, data) -> WorkSizesSpec:
        if ws is None:
            return WorkSizesSpec(None, None, ("output", 0), self.node.location)
        g_text, l_text = ws.attrs.get("global"), ws.attrs.get("local")
        g_count = l_count = None
        if g_text is not None:
            g_count = self._formulas(ws, "global", g_text, MAX_WORK_DIMS)
        if l_text is not None and l_text.strip():
            l_count = self._formulas(ws, "local", l_text, MAX_WORK_DIMS)
        expected = g_count if g_text is not None else 1
        if l_count is not None and expected is not None and l_count != expected:
            glob = f"global '{g_text}'" if g_text is not None else "the default global"
            self.error(ws.where("local"), "CL062",
                       f"local '{l_text}' has {l_count} entr{'ies' if l_count != 1 else 'y'}, "
                       f"{glob} has {expected}; expected the same number")
        dim = parse_dim(ws.attrs.get("dim"))
        if dim is None:
            dim = ("output", 0)  # misspelling reported by the schema
        elif dim[0] == "input" and tensors is not None:
            n_inputs = max((t.port_index for t in tensors if t.kind == "input"), default=-1) + 1
            n_inputs += len(data)
            if dim[1] >= n_inputs:
                self.error(ws.where("dim"), "CL034",
                           f"dim '{ws.attrs.get('dim')}' names input {dim[1]}, but the layer "
                           f"has {n_inputs} input{'s' if n_inputs != 1 else ''}")
        split = (lambda t: tuple(p.strip() for p in t.split(",")))
        return WorkSizesSpec(split(g_text) if g_text is not None else None,
                             split(l_text) if l_text and l_text.strip() else None,
                             dim, ws.location)


_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_KERNEL_KEYWORD = re.compile(r"\b(?:__kernel|kernel)\b")
_ATTRIBUTE = re.compile(r"__attribute__\s*\(\(.*?\)\)", re.S)
_NAME_BEFORE_PAREN = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


_KERNEL_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)[^\n]*", re.M)


def kernel_macros(source: str) -> list[str]:
    """Names of the macros whose definition mentions `kernel` (any case), comments ignored."""
    text = _COMMENT.sub(" ", source)
    return [m.group(1) for m in _KERNEL_MACRO.finditer(text) if "kernel" in m.group(0).lower()]


def kernel_names(source: str) -> list[str]:
    """Names of the __kernel functions defined in OpenCL C text (comments ignored)."""
    text = _COMMENT.sub(" ", source)
    names = []
    for m in _KERNEL_KEYWORD.finditer(text):
        end = len(text)
        for stop in ("{", ";"):
            pos = text.find(stop, m.end())
            if pos != -1:
                end = min(end, pos)
        head = _ATTRIBUTE.sub(" ", text[m.end():end])
        name = _NAME_BEFORE_PAREN.search(head)
        if name:
            names.append(name.group(1))
    return names
