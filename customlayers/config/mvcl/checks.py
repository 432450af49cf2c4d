"""Semantic checks of one <CustomLayer type="MVCL"> element, and the building of its MvclSpecs
(one per <Kernel>, i.e. per stage).

The schema (schemas/mvcl.schema.json) has already reported structure and spelling; here values
are converted leniently (what the schema rejected is skipped, never reported twice) and what
spans elements is checked: the binding of every kernel parameter by name against the parameter
list read from the .cl text (config/kernel_signature.py), Scalar sources, formulas, stages within
the element, and the .bin -> .cl substitution. Checks across elements (variants, stages, buffers
between stages) are in mvcl/layers.py.
"""
from __future__ import annotations

import difflib
import re

from ...errors import FormulaError
from ..diagnostics import Diagnostics
from ..elements import ElementChecker
from ..formulas import parse_formula_list
from ..kernel_signature import KernelParameter, find_kernel_parameters, kernel_names
from ..limits import MAX_PORT_INDEX, index_attr
from ..messages import clipped
from ..sources.source_text import SourceFile
from ..xmlload import Node
from .spec import (DIM_SOURCE, MvclData, MvclLocalData, MvclParameter, MvclScalar,
                        MvclSpec, MvclTensor, MvclWorkSizes, WhereCondition, scalar_source_kind)

MAX_WORK_DIMS = 3
_DIM = re.compile(r"(output|input)(?:(?:,\s*|\s+)([0-9]+))?\Z")
BUFFER_KINDS = ("input_buffer", "output_buffer")
PARAMETER_TAGS = ("Tensor", "Scalar", "Data")     # the elements that bind a kernel parameter




def _first(node: Node | None, tag: str) -> Node | None:
    found = node.find_all(tag) if node is not None else []
    return found[0] if found else None


def parse_mvcl_dim(text: str | None) -> tuple[str, int] | None:
    """'input,N' | 'output,N' | 'input N' | 'input' (port 0) -> (kind, N); None if misspelled."""
    if text is None:
        return None
    m = _DIM.match(text.strip())
    return (m.group(1), int(m.group(2) or 0)) if m else None


def _suggest(word: str, known) -> str:
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


class MvclChecker(ElementChecker):
    """Checks one MVCL <CustomLayer> element; `build()` gives its MvclSpecs in stage order, or
    None when it has an error (reported). `ok` stays True while no error was reported here."""

    # -- the element -----------------------------------------------------------------------
    def build(self) -> list[MvclSpec] | None:
        node = self.node
        shaves = node.attrs.get("max-shaves")
        if shaves is not None:
            self.info(node.where("max-shaves"), "CL100",
                      f"max-shaves '{clipped(shaves)}' is a VPU scheduling hint (SHAVE cores); "
                      f"accepted and not used on OpenCL devices")
        where = self._where(_first(node, "Where"))
        kernels = node.find_all("Kernel")
        outer_params, outer_ws = _first(node, "Parameters"), _first(node, "WorkSizes")
        stages = self._stages(kernels, outer_params, outer_ws)
        specs = []
        for kernel, stage in zip(kernels, stages):
            spec = self._kernel(kernel, where, stage, outer_params, outer_ws)
            if spec is not None:
                specs.append(spec)
        if not (self.ok and self.layer and kernels and len(specs) == len(kernels)):
            return None
        return sorted(specs, key=lambda s: s.stage)

    def _where(self, where: Node | None) -> tuple[WhereCondition, ...]:
        if where is None:
            return ()
        return tuple(WhereCondition(name, value, where.where(name))
                     for name, value in where.attrs.items())

    def _stages(self, kernels: list[Node], outer_params, outer_ws) -> list[int]:
        """The stage of each Kernel: Kernel@stage, else CustomLayer@stage, else 0."""
        node = self.node
        layer_stage = index_attr(node.attrs.get("stage"))
        if len(kernels) > 1:
            for extra in (outer_params, outer_ws):
                if extra is not None:
                    self.error(extra.location, "CL106",
                               f"<{extra.tag}> beside {len(kernels)} <Kernel> elements: with "
                               f"several kernels (stages) each <Kernel> holds its own "
                               f"<Parameters> and <WorkSizes>")
            if "stage" in node.attrs:
                self.error(node.where("stage"), "CL107",
                           f"stage on <CustomLayer> with {len(kernels)} <Kernel> elements; give "
                           f"each <Kernel> its own stage instead")
        stages, seen = [], {}
        for k in kernels:
            own = k.attrs.get("stage")
            if own is None and len(kernels) > 1:
                self.error(k.location, "CL107",
                           f"<Kernel entry=\"{k.attrs.get('entry', '')}\"> has no stage; with "
                           f"several <Kernel> elements each needs stage=\"0\", \"1\", ...")
            elif own is not None and "stage" in node.attrs and len(kernels) == 1 \
                    and own != node.attrs["stage"]:
                self.error(k.where("stage"), "CL107",
                           f"stage '{clipped(own)}' on <Kernel> differs from stage "
                           f"'{clipped(node.attrs['stage'])}' on its <CustomLayer>; give it once")
            stage = index_attr(own) if own is not None else layer_stage
            stage = 0 if stage is None else stage
            if own is not None and index_attr(own) is not None and stage in seen:
                self.error(k.where("stage"), "CL107",
                           f"stage {stage} is given twice in this <CustomLayer>; first at line "
                           f"{seen[stage].location.line}")
            seen.setdefault(stage, k)
            stages.append(stage)
        return stages

    # -- one kernel ------------------------------------------------------------------------
    def _kernel(self, kernel: Node, where, stage: int, outer_params: Node | None,
                outer_ws: Node | None) -> MvclSpec | None:
        params_node = self._one_of(kernel, "Parameters", outer_params)
        ws_node = self._one_of(kernel, "WorkSizes", outer_ws)
        entry = kernel.attrs.get("entry")
        sources = self._sources(kernel)
        kparams = None
        if entry and entry.strip() and sources:
            kparams = self._kernel_parameters(entry, sources, kernel)
        parsed = self._parameters(params_node) if params_node is not None else []
        if kparams is not None and params_node is not None:
            self._check_bindings(entry, kparams, parsed, params_node)
        work_sizes = self._work_sizes(ws_node) if ws_node is not None else None
        if kparams is None or work_sizes is None or params_node is None or not self.ok:
            return None
        shaves = index_attr(self.node.attrs.get("max-shaves"))
        return MvclSpec(
            name=self.layer or "", where=where, stage=stage, entry=entry,
            sources=tuple(sources), parameters=tuple(p for p, _ in parsed),
            kernel_parameters=kparams, work_sizes=work_sizes, location=self.node.location,
            kernel_location=kernel.location, version=self.node.attrs.get("version", ""),
            max_shaves=shaves, config_path=self.config_path)

    def _one_of(self, kernel: Node, tag: str, outer: Node | None) -> Node | None:
        inner = _first(kernel, tag)
        if inner is not None and outer is not None:
            self.error(outer.location, "CL106",
                       f"<{tag}> is given both inside <Kernel> (line {inner.location.line}) and "
                       f"beside it; give it once")
            return None
        found = inner if inner is not None else outer
        if found is None:
            self.error(kernel.location, "CL106",
                       f"<Kernel entry=\"{kernel.attrs.get('entry', '')}\"> has no <{tag}>; "
                       f"expected one inside the <Kernel> or beside it")
        return found

    # -- sources ---------------------------------------------------------------------------
    def _sources(self, kernel: Node) -> list[SourceFile] | None:
        files = super()._sources(kernel)
        return files or None               # an MVCL kernel without a source cannot be built

    def _read(self, src: Node, filename: str) -> SourceFile | None:
        if not filename.lower().endswith(".bin"):
            return self.read_source(src, self.layer, self.diags)
        # An offline VPU binary runs on no OpenCL device here: build the OpenCL C it was
        # compiled from, expected next to it under the same name
        cl_name = filename[:-4] + ".cl"
        proxy = Node(src.tag, {**src.attrs, "filename": cl_name}, src.location,
                     dict(src.attr_locations))
        scratch = Diagnostics()
        got = self.read_source(proxy, self.layer, scratch)
        if got is None:
            missing = [d for d in scratch if d.code == "CL040"]
            if missing:
                self.error(src.where("filename"), "CL102",
                           f"source '{clipped(filename)}' is an offline VPU binary, which OpenCL "
                           f"devices cannot run, and its OpenCL C source '{clipped(cl_name)}' is "
                           f"not next to it ({missing[0].message}); put the .cl it was compiled "
                           f"from there, or name the .cl in Source")
            else:
                self.ok = False
                self.diags.extend(scratch)
            return None
        self.info(src.where("filename"), "CL101",
                  f"source '{clipped(filename)}' is an offline VPU binary; using "
                  f"'{clipped(cl_name)}' next to it, compiled for the device instead")
        return got

    def _kernel_parameters(self, entry: str, sources: list[SourceFile],
                           kernel: Node) -> tuple[KernelParameter, ...] | None:
        names = [n for s in sources for n in kernel_names(s.text)]
        files = ", ".join(s.filename for s in sources)
        if entry not in names:
            have = f"kernels found: {', '.join(names)}" if names else "no __kernel function found"
            self.error(kernel.where("entry"), "CL044",
                       f"entry function '{clipped(entry)}' is not defined as a __kernel in "
                       f"{files}; {have}{_suggest(entry, names)}")
            return None
        found = find_kernel_parameters([s.text for s in sources], entry)
        if found is None:
            self.error(kernel.where("entry"), "CL109",
                       f"the parameter list of kernel '{clipped(entry)}' cannot be read from "
                       f"{files}; MVCL binds arguments by name, so the kernel's head must be "
                       f"written out (not made by a macro)")
        return found

    # -- parameters ------------------------------------------------------------------------
    def _parameters(self, params: Node) -> list[tuple[MvclParameter, Node]]:
        result = []
        for el in params.children:
            p = None
            if el.tag == "Tensor":
                p = self._tensor(el)
            elif el.tag == "Scalar":
                p = self._scalar(el)
            elif el.tag == "Data":
                p = self._data(el)
            if p is not None:
                result.append((p, el))
        return result

    def _port_index(self, el: Node) -> int | None:
        """port-index, bounded: a port (or a Scalar's element of a list attribute) sizes what
        is built from it (`",".join(["1"] * (port + 1))` for --compile's default attributes
        took 17 GB for port-index="1000000000"). None after an error when over the bound."""
        text = el.attrs.get("port-index")
        value = index_attr(text)
        if value is not None and value > MAX_PORT_INDEX:
            self.error(el.where("port-index"), "CL026",
                       f"port-index {clipped(text)} is over the bound: at most {MAX_PORT_INDEX} "
                       f"(each port is a kernel argument, and a kernel takes at most "
                       f"{MAX_PORT_INDEX + 1} arguments on any OpenCL device)")
            return None
        return value

    def _tensor(self, el: Node) -> MvclTensor | None:
        arg, kind = el.attrs.get("arg-name"), el.attrs.get("type")
        port = self._port_index(el)
        fmt = el.attrs.get("format", "BFYX").upper()
        if not arg or kind not in ("input", "output", "input_buffer", "output_buffer") \
                or port is None:
            return None
        dim = size = None
        if kind in BUFFER_KINDS:
            dim = parse_mvcl_dim(el.attrs.get("dim"))
            size = el.attrs.get("size")
            if size is None or dim is None or self._formulas(el, "size", size, 1) is None:
                return None
        return MvclTensor(arg, kind, port, fmt, el.location, dim, size)

    def _scalar(self, el: Node) -> MvclScalar | None:
        arg, dtype, source = (el.attrs.get(k) for k in ("arg-name", "type", "source"))
        if not arg or dtype not in ("int", "float") or source is None or not source.strip():
            return None
        port = self._port_index(el)
        if port is None and index_attr(el.attrs.get("port-index")) is not None:
            return None                     # over the bound (reported)
        source = source.strip()
        kind = scalar_source_kind(source)
        if kind is None:
            self.error(el.where("source"), "CL105",
                       f"Scalar '{clipped(arg)}': source '{clipped(source)}' is neither a "
                       f"dimension (I.B, I.F, I.Y, I.X, O.B ... O.X, or I1.X for port 1), a "
                       f"number, nor an attribute name")
            return None
        if kind == "literal" and dtype == "int" and not re.fullmatch(r"[+-]?[0-9]+", source):
            self.error(el.where("source"), "CL105",
                       f"Scalar '{clipped(arg)}' of type int: source '{clipped(source)}' is not "
                       f"an integer")
            return None
        if kind == "dim":
            m = DIM_SOURCE.match(source)
            if m.group(2) and port is not None and int(m.group(2)) != port:
                self.error(el.where("port-index"), "CL105",
                           f"Scalar '{clipped(arg)}': source '{clipped(source)}' names port "
                           f"{m.group(2)}, port-index says {port}; give the port once")
                return None
        return MvclScalar(arg, dtype, source, port, el.location)

    def _data(self, el: Node) -> MvclData | MvclLocalData | None:
        arg, kind = el.attrs.get("arg-name"), el.attrs.get("type")
        if not arg:
            return None
        if kind == "data":
            blob = el.attrs.get("source")
            return MvclData(arg, blob, el.attrs.get("format", "ANY").upper(), el.location) \
                if blob else None
        if kind == "local_data":
            dim, size = parse_mvcl_dim(el.attrs.get("dim")), el.attrs.get("size")
            if dim is None or size is None or self._formulas(el, "size", size, 1) is None:
                return None
            return MvclLocalData(arg, dim, size, el.location)
        return None

    def _check_bindings(self, entry: str, kparams: tuple[KernelParameter, ...],
                        parsed: list[tuple[MvclParameter, Node]], params_node: Node) -> None:
        by_name = {k.name: k for k in kparams}
        names = [k.name for k in kparams]
        listed = ", ".join(names) or "none"
        seen: dict[str, Node] = {}
        for p, el in parsed:
            where = el.where("arg-name")
            if p.arg_name in seen:
                self.error(where, "CL112",
                           f"arg-name '{clipped(p.arg_name)}' is bound twice: <{el.tag}> here "
                           f"and <{seen[p.arg_name].tag}> at line {seen[p.arg_name].location.line}")
                continue
            seen[p.arg_name] = el
            if p.arg_name not in by_name:
                self.error(where, "CL111",
                           f"arg-name '{clipped(p.arg_name)}' is not a parameter of kernel "
                           f"'{clipped(entry)}'; its parameters are "
                           f"{listed}{_suggest(p.arg_name, names)}")
                continue
            self._check_fit(p, by_name[p.arg_name], el, entry)
        # Every parameter is bound, or this kernel is an error: a spec is built only when each
        # has its element (MvclSpec.arguments relies on it). A <Tensor>, <Scalar> or <Data>
        # that names it but was rejected has had its own error (here or from the schema); any
        # other element naming it (a misspelt <Scala1r>, only a warning by itself) binds
        # nothing.
        rejected = {c.attrs.get("arg-name") for c in params_node.children
                    if c.tag in PARAMETER_TAGS}
        for k in kparams:
            if k.name in seen or k.name in rejected:
                continue
            unknown = next((c for c in params_node.children if c.tag not in PARAMETER_TAGS
                            and c.attrs.get("arg-name") == k.name), None)
            hint = (f"; <{clipped(unknown.tag)}> at line {unknown.location.line} names it, but "
                    f"only <Tensor>, <Scalar> and <Data> bind parameters"
                    f"{_suggest(unknown.tag, PARAMETER_TAGS)}") if unknown is not None else ""
            self.error(params_node.location, "CL110",
                       f"parameter {k.position} of kernel '{clipped(entry)}' "
                       f"('{clipped(k.declaration)}') is bound by nothing; expected a <Tensor>, "
                       f"<Scalar> or <Data> with arg-name=\"{k.name}\"{hint}")

    def _check_fit(self, p: MvclParameter, k: KernelParameter, el: Node, entry: str) -> None:
        """What we can know of the declaration without a compiler: pointer or not, address
        space, integer or floating scalar."""
        problem = None
        if isinstance(p, MvclScalar):
            if k.is_pointer:
                problem = "a Scalar needs a value parameter, not a pointer"
            elif p.type == "float" and k.is_integer:
                problem = "a float Scalar would be passed to an integer parameter"
            elif p.type == "int" and k.is_float:
                problem = "an int Scalar would be passed to a floating-point parameter"
        elif isinstance(p, MvclLocalData):
            if k.address_space != "local":
                problem = "local_data needs a __local pointer parameter"
        elif k.address_space == "local":
            problem = f"a <{el.tag}> needs a __global pointer parameter; __local ones take " \
                      f"<Data type=\"local_data\">"
        elif not k.is_pointer and (k.is_integer or k.is_float):
            problem = f"a <{el.tag}> needs a __global pointer parameter, not a value"
        if problem:
            self.error(el.where("arg-name"), "CL113",
                       f"arg-name '{clipped(p.arg_name)}' binds '{clipped(k.declaration)}' of "
                       f"kernel '{clipped(entry)}': {problem}")

    # -- formulas --------------------------------------------------------------------------
    def _formulas(self, el: Node, attr: str, text: str, max_entries: int) -> int | None:
        """Parse-check a formula list in MVCL's language (attributes by name, floor ceil round
        abs sqrt); its entry count, or None when it does not parse (reported)."""
        try:
            count = len(parse_formula_list(text, max_entries=None, functions=True,
                                           extra_names=True))
        except FormulaError as e:
            self.formula_error(el, attr, text, e)
            return None
        if count > max_entries:
            what = "one formula (a byte count)" if max_entries == 1 else f"at most {max_entries}"
            self.error(el.where(attr), "CL061" if attr != "size" else "CL060",
                       f"{attr} '{clipped(text)}' has {count} entries; expected {what}")
            return None
        return count

    def _work_sizes(self, ws: Node) -> MvclWorkSizes | None:
        g_text, l_text = ws.attrs.get("global"), ws.attrs.get("local")
        if g_text is None or not g_text.strip():
            return None  # the schema reported it
        g_count = self._formulas(ws, "global", g_text, MAX_WORK_DIMS)
        l_count = None
        if l_text is not None and l_text.strip():
            l_count = self._formulas(ws, "local", l_text, MAX_WORK_DIMS)
        if g_count is not None and l_count is not None and g_count != l_count:
            self.error(ws.where("local"), "CL062",
                       f"local '{clipped(l_text)}' has {l_count} "
                       f"entr{'ies' if l_count != 1 else 'y'}, global '{clipped(g_text)}' has "
                       f"{g_count}; expected the same number")
        dim_text = ws.attrs.get("dim")
        dim = parse_mvcl_dim(dim_text) if dim_text is not None else ("output", 0)
        if g_count is None or dim is None:
            return None
        split = (lambda t: tuple(p.strip() for p in t.split(",")))
        return MvclWorkSizes(split(g_text), split(l_text) if l_text and l_text.strip() else None,
                             dim, ws.location)
