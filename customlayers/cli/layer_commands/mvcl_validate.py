"""`validate --compile` for MVCL layers: every variant of the layer built on the device through
the same pipeline a run takes (runtime/layers/mvcl_build.py), for representative tensors, with its
errors as Diagnostics (build errors at the user's .cl lines, like SimpleGPU layers).

MVCL programs depend on the layer's attributes (a <Where> picks the variant; Scalars and
formulas read attributes by name), which a config alone does not give. So each variant is
built with: 1 for every attribute its Scalars and formulas read (the `kernel="3,3"` kind of
list gets as many 1s as the Scalars index), then the values its <Where> asks for, then the
user's --param. A variant those attributes do not select is not built, and an info (CL117)
says which --param would select it.
"""
from __future__ import annotations

from typing import Mapping

from ...config.diagnostics import ERROR, INFO, Diagnostic
from ...config.formulas import parse_formula_list
from ...config.mvcl.spec import (DIM_LETTERS, NUMBER, MvclLayer, MvclLocalData, MvclScalar,
                                MvclTensor, MvclVariant, render_where)
from ...errors import CustomLayersError, FormulaError
from ...jit.tensor import TensorDesc
from .build_diagnostics import error_diagnostics, warning_diagnostics

WHERE_CODE = "CL117"


def attributes_read(variant: MvclVariant) -> dict[str, int]:
    """Attribute name -> how many list elements the variant's Scalars and formulas read."""
    found: dict[str, int] = {}

    def formula_names(texts) -> None:
        try:
            formulas = parse_formula_list(",".join(texts), max_entries=None, functions=True,
                                          extra_names=True)
        except FormulaError:        # the loader reported it; the build will say it again
            return
        for f in formulas:
            for name in f.variables:
                if name not in DIM_LETTERS:
                    found.setdefault(name, 1)

    for spec in variant.stages:
        formula_names(spec.work_sizes.global_)
        formula_names(spec.work_sizes.local or ())
        for p in spec.parameters:
            if isinstance(p, MvclScalar) and p.source_kind == "attribute":
                found[p.source] = max(found.get(p.source, 1), (p.port_index or 0) + 1)
            elif isinstance(p, (MvclTensor, MvclLocalData)) and p.size:
                formula_names([p.size])
    return found


def value_meeting(condition: str) -> str:
    """A value that meets one <Where> condition: its own text, or a number that satisfies a
    comparison (`>=2` -> 2, `>2` -> 3, `!=0` -> 1)."""
    text = condition.strip()
    for op, shift in ((">=", 0), ("<=", 0), ("!=", 1), (">", 1), ("<", -1), ("==", 0)):
        if text.startswith(op):
            bound = text[len(op):].strip()
            if not NUMBER.match(bound):
                return text
            value = float(bound.rstrip("fF")) + shift
            return str(int(value)) if float(value).is_integer() else str(value)
    return text


def variant_attributes(variant: MvclVariant, params: Mapping[str, str]) -> dict[str, str]:
    attrs = {name: ",".join(["1"] * count) for name, count in attributes_read(variant).items()}
    attrs.update({c.attr: value_meeting(c.value) for c in variant.where})
    attrs.update(params)
    return attrs


def input_ports(layer: MvclLayer) -> int:
    return 1 + max((t.port_index for s in layer.specs for t in s.tensors("input")), default=0)


def mvcl_compile_diagnostics(registry, layer: MvclLayer, given: list,
                             params: Mapping[str, str]) -> list[Diagnostic]:
    """Build every variant of `layer` for the `given` input tensors (missing ones like the
    first; the caller gives at least one), outputs like input 0 in each Tensor's layout."""
    from ...runtime.layers.mvcl import dense, output_layouts
    from ...runtime.layers.mvcl_build import PREPARE_CODE, compile_mvcl
    inputs = [given[p] if p < len(given) else given[0] for p in range(input_ports(layer))]
    found: list[Diagnostic] = []
    for variant in layer.variants:
        attrs = variant_attributes(variant, params)
        if not variant.matches(attrs):
            given_text = ", ".join(f"{k}={v}" for k, v in sorted(params.items()))
            found.append(Diagnostic.at(
                variant.location, INFO, WHERE_CODE,
                f"the variant {render_where(variant.where)} is not built: the attributes "
                f"given (--param {given_text}) do not select it; give --param values that "
                f"meet its conditions", layer.name))
            continue
        try:
            stages = list(variant.stages)
            first = inputs[0]
            outputs = [dense(TensorDesc(first.shape, first.dtype, first.format), layout)
                       for layout in output_layouts(stages).values()]
            built = compile_mvcl(registry.engine, layer, stages, attrs, inputs, outputs)
        except CustomLayersError as e:
            if e.code == PREPARE_CODE or e.code is None:
                shown = ", ".join(d.describe() for d in inputs)
                chosen = ", ".join(f'{k}="{v}"' for k, v in sorted(attrs.items())) or "none"
                at = e.location or variant.location
                found.append(Diagnostic.at(at, ERROR, PREPARE_CODE,
                                           f"cannot prepare {render_where(variant.where)} for "
                                           f"inputs {shown} and attributes {chosen}: "
                                           f"{e.describe()}", layer.name))
            else:
                found += error_diagnostics(e, variant.location, layer.name)
            continue
        for stage in built:
            found += warning_diagnostics(stage.warnings, layer.name)
    return found
