"""Grouping the MVCL definitions of one config file into MvclLayers, with the checks that span
definitions: variants told apart by <Where>, stages numbered 0..N-1 without gaps or repeats,
buffers passed from an output_buffer to a later input_buffer, and the layer's ports.

Several <CustomLayer type="MVCL"> elements with one name are variants and stages of ONE layer
(OpenVINO's VPU bindings file is written that way), so SimpleGPU's "defined again: the later
wins" warning is given only once per name and file, when the name was defined before (in an
earlier file, or by a SimpleGPU element); the whole group then replaces that definition.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..diagnostics import Diagnostics
from ..elements import SourceReader
from ..messages import clipped, gap_ranges, ranges, runs_text
from ..xmlload import Node
from .checks import MvclChecker
from .spec import (MvclLayer, MvclScalar, MvclSpec, MvclVariant, render_where,
                        scalar_dim_port, where_key)


@dataclass
class _Group:
    name: str
    first: Node
    definition_index: int                 # its entry in ConfigSet.definitions
    specs: list[MvclSpec] = field(default_factory=list)
    broken: bool = False


class MvclFileCollector:
    """Collects the MVCL elements of one file (`add`), then builds and registers one MvclLayer
    per name (`finish`). `into` is the ConfigSet being loaded."""

    def __init__(self, diags: Diagnostics, read_source: SourceReader, config_path: str | None,
                 into):
        self.diags = diags
        self.read_source = read_source
        self.config_path = config_path
        self.into = into
        self.groups: dict[str, _Group] = {}

    def add(self, node: Node, has_error: bool) -> None:
        name = node.attrs.get("name")
        specs = MvclChecker(node, self.diags, self.read_source, self.config_path).build()
        if not name:
            return
        group = self.groups.get(name)
        if group is None:
            group = _Group(name, node, len(self.into.definitions))
            earlier = self.into.define(name, node.location)
            if earlier is not None:
                self.diags.warning(node.location, "CL070",
                                   f"layer '{clipped(name)}' is defined again; this definition "
                                   f"replaces the one at {earlier}", name)
            self.groups[name] = group
        if specs is None or has_error:
            group.broken = True
        else:
            group.specs.extend(specs)

    def finish(self) -> None:
        for name, group in self.groups.items():
            layer = None if group.broken else self._layer(group)
            if self.into.last_definition_index(name) != group.definition_index:
                if layer is not None:
                    self.into.replaced.append(layer)
                continue  # a SimpleGPU definition after it in this file won
            if name in self.into.layers:
                self.into.replaced.append(self.into.layers[name])
            if layer is not None:
                self.into.layers[name] = layer
            else:
                self.into.layers.pop(name, None)

    # -- one name ------------------------------------------------------------------------
    def _layer(self, group: _Group) -> MvclLayer | None:
        ok = True
        variants: dict[frozenset, list[MvclSpec]] = {}
        for spec in group.specs:
            variants.setdefault(where_key(spec.where), []).append(spec)
        built = []
        for specs in variants.values():
            stages = self._stages(group.name, specs)
            if stages is None:
                ok = False
                continue
            ok &= self._buffers(group.name, stages)
            ok &= self._ports(group.name, stages)
            built.append(MvclVariant(stages[0].where, tuple(stages)))
        if not ok:
            return None
        return MvclLayer(group.name, tuple(built), group.first.location, self.config_path)

    def _stages(self, name: str, specs: list[MvclSpec]) -> list[MvclSpec] | None:
        """The stages of one variant in order; None after reporting repeats or gaps."""
        by_stage: dict[int, MvclSpec] = {}
        ok = True
        for spec in specs:
            first = by_stage.get(spec.stage)
            if first is None:
                by_stage[spec.stage] = spec
                continue
            ok = False
            if len(specs) == 2 and spec.stage == 0:
                # two single-kernel definitions with one set of conditions: both would match
                self.diags.error(spec.location, "CL108",
                                 f"MVCL layer '{clipped(name)}' is defined twice with "
                                 f"{render_where(spec.where)}; the first is at {first.location}; "
                                 f"both would match the same layers: give each definition its "
                                 f"own <Where> conditions (or stage numbers, for stages)", name)
            else:
                self.diags.error(spec.kernel_location, "CL107",
                                 f"stage {spec.stage} of MVCL layer '{clipped(name)}' "
                                 f"({render_where(spec.where)}) is defined twice; the first is "
                                 f"at {first.kernel_location}", name)
        if not ok:
            return None
        numbers = sorted(by_stage)
        # the gaps from the stages given, never from range(last stage): stage="10000000" built
        # a set of ten million numbers and a message of 89 MB
        missing = gap_ranges(numbers, numbers[-1])
        if missing:
            last = by_stage[numbers[-1]]
            self.diags.error(last.kernel_location, "CL107",
                             f"stages of MVCL layer '{clipped(name)}' "
                             f"({render_where(last.where)}) must be 0..{len(numbers) - 1} without "
                             f"gaps; found {ranges(numbers)} (missing {runs_text(missing)})", name)
            return None
        return [by_stage[n] for n in numbers]

    def _buffers(self, name: str, stages: list[MvclSpec]) -> bool:
        """Every input_buffer reads an output_buffer (same port-index) of an earlier stage."""
        ok = True
        written: dict[int, MvclSpec] = {}
        for spec in stages:
            for t in spec.tensors("input_buffer"):
                if t.port_index not in written:
                    ok = False
                    before = ", ".join(str(p) for p in sorted(written)) or "none"
                    self.diags.error(t.location, "CL114",
                                     f"input_buffer '{clipped(t.arg_name)}' (port-index "
                                     f"{t.port_index}) of stage {spec.stage} is written by no "
                                     f"output_buffer of an earlier stage (buffers written before "
                                     f"it: {before})",
                                     name)
            for t in spec.tensors("output_buffer"):
                written.setdefault(t.port_index, spec)
        return ok

    def _ports(self, name: str, stages: list[MvclSpec]) -> bool:
        """Inputs and outputs are the layer's ports 0..N-1 (over all stages); every dim names
        one of them."""
        ok = True
        ports: dict[str, set[int]] = {"input": set(), "output": set()}
        for spec in stages:
            for kind in ports:
                ports[kind] |= {t.port_index for t in spec.tensors(kind)}
        where = stages[-1].location
        if not ports["output"]:
            self.diags.error(where, "CL032", f"MVCL layer '{clipped(name)}' binds no output "
                             f"Tensor in any stage; expected at least one <Tensor "
                             f"type=\"output\">", name)
            ok = False
        for kind, bound in ports.items():
            # gap_ranges, as the SimpleGPU checks: a port index may be huge (10**9)
            if gap_ranges(bound, max(bound, default=-1)):
                ok = False
                self.diags.error(where, "CL115",
                                 f"{kind} ports of MVCL layer '{clipped(name)}' must be "
                                 f"0..{max(bound)} without gaps; found {ranges(bound)}", name)
        for spec in stages:
            dims = [(spec.work_sizes.dim, spec.work_sizes.location, "WorkSizes dim")]
            for p in spec.parameters:
                if getattr(p, "dim", None) is not None:
                    dims.append((p.dim, p.location, f"'{clipped(p.arg_name)}' dim"))
            for (kind, port), loc, what in dims:
                if port not in ports[kind]:
                    ok = False
                    have = ", ".join(map(str, sorted(ports[kind]))) or "none"
                    self.diags.error(loc, "CL115",
                                     f"{what} names {kind} {port}, but the layer's {kind} ports "
                                     f"are {have}", name)
        for spec in stages:
            for p in spec.parameters:
                if isinstance(p, MvclScalar) and p.source_kind == "dim":
                    kind, port = scalar_dim_port(p)
                    if port not in ports[kind]:
                        ok = False
                        have = ", ".join(map(str, sorted(ports[kind]))) or "none"
                        self.diags.error(p.location, "CL115",
                                         f"Scalar '{clipped(p.arg_name)}': source "
                                         f"'{clipped(p.source)}' names {kind} {port}, but the "
                                         f"layer's {kind} ports are {have}", name)
        return ok
