"""Which layer attributes a descriptor uses, and which given ones it does not: a parameter no
Define reads (`--param bta=1.5` for `beta`) would otherwise be ignored without a word, and the
layer would run with its default: a silently wrong number.
"""
from __future__ import annotations

import difflib
from typing import Iterable, Mapping

from ..messages import clipped, listed
from .spec import LayerSpec


def used_attributes(spec: LayerSpec) -> list[str]:
    """The attribute names the layer reads, in descriptor order: for a SimpleGPU layer, the
    `param` of its Defines (the only place SimpleGPU reads layer attributes)."""
    names: list[str] = []
    for define in spec.defines:
        if define.param and define.param not in names:
            names.append(define.param)
    return names


def unused_params(spec: LayerSpec, params: Mapping[str, str] | Iterable[str]
                  ) -> list[tuple[str, list[str]]]:
    """(name, the used names it could have meant, nearest first) for every given parameter the
    layer does not use, in the order given."""
    return unused_of(used_attributes(spec), params)


def unused_of(used: list[str], params: Mapping[str, str] | Iterable[str]
              ) -> list[tuple[str, list[str]]]:
    """unused_params for a layer that reads the names `used` (any dialect)."""
    return [(name, difflib.get_close_matches(name, used, n=3, cutoff=0.5))
            for name in params if name not in used]


def unused_params_message(spec, unused: list[tuple[str, list[str]]],
                          used: list[str] | None = None) -> str:
    """One message for all of them: each name with its suggestions, then what the layer uses
    (`used`: the names it reads, by default a SimpleGPU layer's Define params)."""
    used = used_attributes(spec) if used is None else used
    parts = []
    for name, near in unused:
        hint = f" (did you mean {' or '.join(repr(n) for n in near)}?)" if near else ""
        parts.append(f"'{clipped(name)}'{hint}")
    uses = f"it uses {listed(used)}" if used else "it uses no attribute (no Define has a param)"
    s = "s" if len(unused) > 1 else ""
    return (f"layer '{spec.name}' does not use the parameter{s} {', '.join(parts)}; {uses} "
            f"({spec.location})")
