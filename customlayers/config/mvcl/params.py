"""Which layer attributes an MVCL layer reads: the attributes its <Where> variants test, its
Scalars take, and its formulas (work sizes, buffer and __local sizes) name. A given parameter
none of them reads would be ignored without a word (`--param strdie=2` for `stride`), and the
layer would run with its default: a silently wrong number."""
from __future__ import annotations

from ...errors import FormulaError
from ..formulas import parse_formula
from .spec import MvclLayer, MvclLocalData, MvclScalar, MvclTensor, scalar_source_kind

_DIMS = {"B", "F", "Y", "X"}


def _formula_names(text: str | None) -> list[str]:
    if not text:
        return []
    try:
        return list(parse_formula(text, functions=True, extra_names=True).variables)
    except FormulaError:        # reported at load; nothing to read here
        return []


def used_attributes(layer: MvclLayer) -> list[str]:
    """The attribute names `layer` reads, across every variant and stage, in document order."""
    names: list[str] = []

    def add(name: str) -> None:
        if name not in _DIMS and name not in names:
            names.append(name)

    for variant in layer.variants:
        for condition in variant.where:
            add(condition.attr)
        for spec in variant.stages:
            for condition in spec.where:
                add(condition.attr)
            for p in spec.parameters:
                if isinstance(p, MvclScalar) and scalar_source_kind(p.source) == "attribute":
                    add(p.source)
                if isinstance(p, (MvclTensor, MvclLocalData)):
                    for name in _formula_names(p.size):
                        add(name)
            for text in spec.work_sizes.global_ + (spec.work_sizes.local or ()):
                for name in _formula_names(text):
                    add(name)
    return names
