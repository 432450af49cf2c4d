"""Semantic checks the schema cannot express, and the building of a `LayerSpec` from a checked
<CustomLayer> node.

The schema has already reported structure and value spelling; here we convert leniently (a value
the schema rejected is simply skipped, never reported twice) and check what spans several
elements: arg-index numbering, ports, outputs, defines against their types, formulas, and the
entry function in the sources. Sources are read by the caller (loader.py) and passed in.
SimpleGpuFileCollector registers each checked layer in the ConfigSet being loaded (the loader
asks a dialect for its collector: dialect.py).
"""
from __future__ import annotations

import re

from ...errors import FormulaError
from ..diagnostics import Diagnostics
from ..elements import ElementChecker, SourceReader, first_child
from ..formulas import check_work_size_limits, parse_formula_list
from ..kernel_signature import kernel_macros, kernel_names
from ..limits import (MAX_ARG_INDEX, MAX_FORMULA_LENGTH, MAX_KERNEL_ARGS, MAX_PORT_INDEX,
                      index_attr, index_value)
from ..messages import clipped, gap_ranges, listed, ranges, runs_text
from ..sources.source_text import SourceFile
from ..xmlload import Node
from .define_values import check_define_value, shown, type_problem
from .spec import (FORMATS, DataBinding, DefineSpec, LayerSpec, TensorBinding, WorkSizesSpec,
                   formula_params)

MAX_WORK_DIMS = 3
MAX_TENSOR_RANK = 4   # custom layers see every tensor as B,F,Y,X
_DIM = re.compile(r"(output|input)(?:(?:,\s*|\s+)([0-9]+))?\Z")


def parse_dim(text: str | None) -> tuple[str, int] | None:
    """'output' | 'input' | 'input,N' | 'input N' -> (kind, N); None when misspelled."""
    if text is None:
        return ("output", 0)
    m = _DIM.match(text)
    if not m or (m.group(1) == "output" and m.group(2) is not None):
        return None
    return (m.group(1), index_value(m.group(2) or "0"))


class LayerChecker(ElementChecker):
    """Checks one SimpleGPU <CustomLayer> and builds its LayerSpec."""

    params: tuple[str, ...] = ()     # the parameters its formulas may name (LayerSpec's)

    # -- the whole layer -----------------------------------------------------------------
    def build(self) -> LayerSpec | None:
        """The LayerSpec, or None when this layer has an error (reported)."""
        node = self.node
        kernel = first_child(node, "Kernel")
        buffers = first_child(node, "Buffers")
        entry = kernel.attrs.get("entry") if kernel else None
        sources = self._sources(kernel)
        defines = self._defines(kernel)
        self.params = formula_params(defines)   # names the formulas may use besides B F Y X
        tensors, data = self._buffers(buffers)
        work_sizes = self._work_sizes(first_child(node, "WorkSizes"), tensors, data)
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

    def _check_entry(self, entry: str, sources: list[SourceFile], kernel: Node) -> None:
        found: list[str] = []
        for src in sources:
            found += kernel_names(src.text)
        if entry in found:
            return
        names = listed([src.filename for src in sources])
        have = f"; kernels found: {listed(found)}" if found else "; no __kernel function found"
        macros = [(src.filename, m) for src in sources for m in kernel_macros(src.text)]
        if macros:
            # `KERNEL(my_k)(...)` defines a kernel this scan cannot see without a preprocessor;
            # the build finds the entry (or not) authoritatively
            where = listed([f"{name} in {file}" for file, name in macros])
            self.warning(kernel.where("entry"), "CL044",
                         f"entry function '{clipped(entry)}' is not visibly defined as a "
                         f"__kernel in {names}{have}; the sources define a macro mentioning "
                         f"kernel ({where}), so the build will check the entry")
            return
        self.error(kernel.where("entry"), "CL044",
                   f"entry function '{clipped(entry)}' is not defined as a __kernel in "
                   f"{names}{have}")

    # -- defines -------------------------------------------------------------------------
    def _defines(self, kernel: Node | None) -> list[DefineSpec]:
        result = []
        for d in (kernel.find_all("Define") if kernel else ()):
            name = d.attrs.get("name")
            if not name or not name.strip():
                continue  # the schema reported it
            param, dtype, default = (d.attrs.get(k) for k in ("param", "type", "default"))
            ident, _, own_value = name.strip().partition(" ")
            ident = clipped(ident)  # for messages only
            problem = type_problem(dtype)
            if problem:
                self.error(d.where("type"), "CL052", f"Define '{ident}': {problem}")
                dtype = None  # values are still checked for what any Define refuses
            if default is not None:
                problem = check_define_value(default, dtype)
                if problem:
                    fits = f"does not fit type '{dtype}'" if dtype else "is refused"
                    self.error(d.where("default"), "CL050",
                               f"Define '{ident}': default {fits}: {problem}")
            name_problem = check_define_value(name, None)   # a name is pasted into the line too
            if name_problem:
                self.error(d.where("name"), "CL050",
                           f"Define name '{shown(clipped(name))}' is refused: {name_problem}")
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
        elements = buffers.find_all("Tensor") + buffers.find_all("Data")
        if len(elements) > MAX_KERNEL_ARGS:
            # one error, not one per duplicate or gap: the layer cannot run on any device
            self.error(buffers.location, "CL036",
                       f"<Buffers> binds {len(elements)} buffers; a kernel takes at most "
                       f"{MAX_KERNEL_ARGS} arguments on any OpenCL device")
            return tensors, data
        for t in buffers.find_all("Tensor"):
            arg = self._bounded(t, "arg-index", MAX_ARG_INDEX)
            port = self._bounded(t, "port-index", MAX_PORT_INDEX)
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
            arg = self._bounded(d, "arg-index", MAX_ARG_INDEX)
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

    def _bounded(self, el: Node, attr: str, bound: int) -> int | None:
        """An index attribute's value; None (after an error) when it is over `bound`, or when
        it is missing or malformed (the schema reported that)."""
        text = el.attrs.get(attr)
        value = index_attr(text)
        if value is not None and value > bound:
            self.error(el.where(attr), "CL026",
                       f"{attr} {clipped(text)} is over the bound: at most {bound} (a kernel takes "
                       f"at most {MAX_KERNEL_ARGS} arguments on any OpenCL device)")
            return None
        return value

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
            return  # a missing, malformed or out-of-bound index was reported; gaps would be noise
        gaps = gap_ranges(seen, max(seen))
        if gaps:
            count = sum(b - a + 1 for a, b in gaps)
            self.error(buffers.location, "CL031",
                       f"kernel argument{'s' if count > 1 else ''} {runs_text(gaps)} "
                       f"{'are' if count > 1 else 'is'} not bound: arg-index values must "
                       f"be 0..{max(seen)} without gaps; found {ranges(seen)}")

    def _check_ports(self, ports: dict[tuple[str, int], Node], buffers: Node) -> None:
        """Ports are numbered like the model's inputs and outputs: a gap would leave a model
        input without a Tensor (and INPUTk numbering would no longer follow the ports)."""
        for kind in ("input", "output"):
            bound = sorted(port for k, port in ports if k == kind)
            if gap_ranges(bound, len(bound) - 1):
                self.error(buffers.location, "CL035",
                           f"{kind} ports must be 0..{len(bound) - 1} without gaps; found "
                           f"{ranges(bound)}")

    # -- work sizes ----------------------------------------------------------------------
    def _formulas(self, el: Node, attr: str, text: str, max_entries: int | None) -> int | None:
        """Parse-check a formula list; its entry count, or None when it does not parse."""
        if len(text) > MAX_FORMULA_LENGTH:
            # parsing is linear, but one layer may carry a thousand shape formulas
            self.error(el.where(attr), "CL060",
                       f"{attr} '{clipped(text)}' is not parsed: {len(text)} characters; a "
                       f"formula list is at most {MAX_FORMULA_LENGTH}")
            return None
        try:
            formulas = parse_formula_list(text, max_entries=None,
                                          params=self.params)
            count = len(formulas)
        except FormulaError as e:
            self.formula_error(el, attr, text, e)
            return None
        for f in formulas:
            at = f.zero_divisor()
            if at is not None:
                what = "division" if f.text[at:at + 1] == "/" else "modulo"
                self.error(el.where(attr), "CL060",
                           f"{attr} '{clipped(text)}': {what} by zero in '{clipped(f.text)}' "
                           f"at column {at + 1}, whatever the shapes")
                return None
        if max_entries is not None and count > max_entries:
            self.error(el.where(attr), "CL061", f"{attr} '{clipped(text)}' has {count} entries; "
                                                f"expected at most {max_entries}")
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
            self.error(el.where(attr), "CL065", f"{attr} '{clipped(text)}': {e.message} in "
                                                f"formula '{clipped(e.formula)}'")

    def _shape(self, t: Node, kind: str | None, text: str) -> None:
        """Our extension: an output Tensor's shape as formulas over the dim tensor's B,F,Y,X,
        for models that cannot say it (ONNX shape inference stops at a custom node)."""
        if kind == "input":
            self.warning(t.where("shape"), "CL064",
                         f"shape '{clipped(text)}' on an input Tensor is ignored: inputs take "
                         f"the shape the model gives them; shape belongs on an output Tensor")
            return
        count = self._formulas(t, "shape", text, max_entries=None)
        if count is not None and count > MAX_TENSOR_RANK:
            self.error(t.where("shape"), "CL063",
                       f"shape '{clipped(text)}' has {count} entries; a custom layer's tensor "
                       f"has at most {MAX_TENSOR_RANK} dims (B,F,Y,X)")

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
            glob = f"global '{clipped(g_text)}'" if g_text is not None else "the default global"
            entries = "entries" if l_count != 1 else "entry"
            self.error(ws.where("local"), "CL062",
                       f"local '{clipped(l_text)}' has {l_count} {entries}, {glob} has "
                       f"{expected}; expected the same number")
        dim = parse_dim(ws.attrs.get("dim"))
        if dim is None:
            dim = ("output", 0)  # misspelling reported by the schema
        elif dim[0] == "input" and dim[1] > MAX_PORT_INDEX:
            self.error(ws.where("dim"), "CL026",
                       f"dim '{clipped(ws.attrs['dim'])}' names an input over the bound: at most "
                       f"input {MAX_PORT_INDEX} (each input is a kernel argument, and a kernel "
                       f"takes at most {MAX_KERNEL_ARGS})")
        elif dim[0] == "input" and tensors is not None:
            n_inputs = max((t.port_index for t in tensors if t.kind == "input"), default=-1) + 1
            n_inputs += len(data)
            if dim[1] >= n_inputs:
                self.error(ws.where("dim"), "CL034",
                           f"dim '{clipped(ws.attrs['dim'])}' names input {dim[1]}, but the layer "
                           f"has {n_inputs} input{'s' if n_inputs != 1 else ''}")
        split = (lambda t: tuple(p.strip() for p in t.split(",")))
        return WorkSizesSpec(split(g_text) if g_text is not None else None,
                             split(l_text) if l_text and l_text.strip() else None,
                             dim, ws.location)


class SimpleGpuFileCollector:
    """Registers each SimpleGPU element of one file as it comes (`add`): a name defined again
    replaces the earlier definition, with a warning; a definition with an error leaves none
    (a broken redefinition must not leave the old one active). `into` is the ConfigSet being
    loaded; `finish` has nothing left to do (MVCL's collector groups elements until then)."""

    def __init__(self, diags: Diagnostics, read_source: SourceReader, config_path: str | None,
                 into):
        self.diags = diags
        self.read_source = read_source
        self.config_path = config_path
        self.into = into

    def add(self, node: Node, has_error: bool) -> None:
        name = node.attrs.get("name")
        spec = LayerChecker(node, self.diags, self.read_source, self.config_path).build()
        if not name:
            return
        into = self.into
        earlier = into.define(name, node.location)
        if earlier is not None:
            self.diags.warning(node.location, "CL070",
                               f"layer '{clipped(name)}' is defined again; this definition "
                               f"replaces the one at {earlier}", name)
        if name in into.layers:
            into.replaced.append(into.layers[name])
        if spec is not None and not has_error:
            into.layers[name] = spec
        else:
            into.layers.pop(name, None)

    def finish(self) -> None:
        pass
