"""Dialect: what describes one descriptor dialect (`<CustomLayer type="...">`). Each dialect is a
plugin folder under config/ (simplegpu/, mvcl/) holding its spec, its checks and its Dialect;
dialects.py is the table of them, which the loader, the registry and the CLI consult instead of
testing a spec's kind.

config/ is below jit/ and runtime/, so what a dialect has there is named, not imported: its
program generation is a function of jit/ and its adapter an entry of runtime/layers/dialects.py's
table, both looked up by these names (tests/unit/test_dialects.py checks that they resolve).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Dialect:
    name: str                  # the type="..." of its <CustomLayer> elements, spec.kind
    # One kernel per layer, bound by Registry.bind, run and checked alone as a BoundKernel;
    # False: stages (and variants), which run alone only through a one-layer network
    one_kernel: bool
    # Its outputs' shapes follow from the inputs (a Tensor shape formula, else input 0's);
    # False: running it alone needs the output shapes given
    shape_formula: bool
    # the JSON schema (customlayers/schemas/) its elements are checked against: the document's
    # schema refers to it by file name (schema.py serves it from the package)
    schema: str
    # collector(diags, read_source, config_path, into): takes the file's elements of this
    # dialect (`add(node, has_error)`), checks them and registers their specs in `into`, the
    # ConfigSet being loaded, by `finish()` at the file's end
    collector: Callable
    spec: type                 # what `ConfigSet.layers` holds for a layer of this dialect
    program: str               # its program generation: "module:function" under customlayers.jit
    adapter: str               # its runtime adapter (a LayerImpl): the class name, a key of
                               # runtime/layers/dialects.py's table
