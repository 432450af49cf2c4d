"""The table of descriptor dialects: one `Dialect` (dialect.py) per `<CustomLayer type=...>`
dialect, each from its plugin folder (simplegpu/, mvcl/). Every place that treats dialects
differently consults it instead of testing `spec.kind` (the loader's specs carry the name:
LayerSpec.kind, MvclLayer.kind): the loader (which collector checks an element), the schema
(which dialect schemas the document's refers to), the registry and the CLI.

What a dialect needs from the floors above config (its runtime adapter, its CLI printing) is in
their companion tables, keyed by what the Dialect names: runtime/layers/dialects.py and
cli/layer_commands/dialects.py. A new dialect is a folder here, one entry below, and one in each
of those.
"""
from __future__ import annotations

from .dialect import Dialect
from .mvcl.dialect import MVCL
from .simplegpu.dialect import SIMPLE_GPU

DIALECTS: dict[str, Dialect] = {d.name: d for d in (SIMPLE_GPU, MVCL)}

# an element whose type is missing or unknown is checked as SimpleGPU (the schema reports the
# type; the checks still report what else is wrong with it)
DEFAULT_DIALECT = SIMPLE_GPU


def dialect_of(spec) -> Dialect:
    """The dialect of a loaded layer (a LayerSpec or an MvclLayer)."""
    return DIALECTS[spec.kind]


def dialect_of_element(type_attribute: str | None) -> Dialect:
    """The dialect that checks a <CustomLayer> element with this type="..." attribute."""
    return DIALECTS.get(type_attribute or "", DEFAULT_DIALECT)


__all__ = ["Dialect", "DIALECTS", "DEFAULT_DIALECT", "SIMPLE_GPU", "MVCL", "dialect_of",
           "dialect_of_element"]
