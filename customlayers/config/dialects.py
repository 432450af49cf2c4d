"""The descriptor dialects: one `Dialect` record per `<CustomLayer type=...>` dialect, and the
table that every place which treats dialects differently consults instead of testing
`spec.kind` (the loader's specs carry the name: LayerSpec.kind, MvclLayer.kind).

What a dialect needs from the floors above config (its runtime adapter, its CLI printing) is in
their companion tables keyed by the same name: runtime/layers/dialects.py and cli/layer_commands/dialects.py. A new
dialect is one entry here and one in each of those.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Dialect:
    name: str                  # the type="..." of its <CustomLayer> elements, spec.kind
    # One kernel per layer, bound by Registry.bind, run and checked alone as a BoundKernel;
    # False: stages (and variants), which run alone only through a one-layer network
    one_kernel: bool
    # Its outputs' shapes follow from the inputs (a Tensor shape formula, else input 0's);
    # False: running it alone needs the output shapes given
    shape_formula: bool


SIMPLE_GPU = Dialect("SimpleGPU", one_kernel=True, shape_formula=True)
MVCL = Dialect("MVCL", one_kernel=False, shape_formula=False)

DIALECTS: dict[str, Dialect] = {d.name: d for d in (SIMPLE_GPU, MVCL)}


def dialect_of(spec) -> Dialect:
    """The dialect of a loaded layer (a LayerSpec or an MvclLayer)."""
    return DIALECTS[spec.kind]
