"""Checking OpenCL layers against their Python references: the comparison both `check` and
`run --check-with` print, and, for a model, a resolver that follows every checked custom layer
with a host stage comparing its outputs with its Python reference's on the same inputs (the
kernel's inputs captured from the real run: correct alone, wrong in the model?).

The checking stage is an ordinary host stage (jit.launch.HostWork) that reads the layer's
inputs and outputs and writes nothing, so the compiler needs no branch for it, and the memory
planner keeps those tensors alive until the check has read them.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ...jit.launch import HostWork
from ...jit.layer import LayerCall, LayerImpl, LayerWork, Stage, parse_attr
from ..layers.python_layer import PythonLayerDef, output_descs, run_python_layer
from ..layers.resolver import Resolver

DEFAULT_RTOL = 1e-5
DEFAULT_ATOL = 1e-5


@dataclass(frozen=True)
class Comparison:
    """How far an output is from its reference: the largest absolute and relative errors, the
    element that is worst against the tolerance (its index), and whether all are within it."""
    ok: bool
    max_abs: float = 0.0
    max_rel: float = 0.0
    worst: tuple[int, ...] | None = None      # the worst element's index (B,F,Y,X for 4-D)
    output: int = 0
    problem: str = ""                         # a shape or type that differs, said in words

    def where(self) -> str:
        if self.worst is None:
            return "-"
        index = bfyx(self.worst)
        label = "B,F,Y,X" if len(index) == 4 else "index"
        return f"{label}=({','.join(map(str, index))})"


def bfyx(index: tuple[int, ...]) -> tuple[int, ...]:
    """An index in the contract's 4-D B,F,Y,X view (a lower rank padded with 0 at the end)."""
    return tuple(index) + (0,) * (4 - len(index)) if len(index) <= 4 else tuple(index)


def compare(got: np.ndarray, expected: np.ndarray, rtol: float, atol: float,
            output: int = 0) -> Comparison:
    """`got` against `expected`, element by element: |got - expected| <= atol + rtol *
    |expected| (numpy's isclose), NaN equal to NaN."""
    got, expected = np.asarray(got), np.asarray(expected)
    if got.shape != expected.shape:
        return Comparison(False, float("inf"), float("inf"), None, output,
                          f"output {output} has shape {list(got.shape)}, the reference "
                          f"{list(expected.shape)}")
    if got.size == 0:
        return Comparison(True, output=output)
    g, e = got.astype(np.float64), expected.astype(np.float64)
    same = (g == e) | (np.isnan(g) & np.isnan(e))
    with np.errstate(invalid="ignore", divide="ignore"):
        err = np.where(same, 0.0, np.abs(g - e))
        err = np.where(np.isnan(err), np.inf, err)       # NaN against a number
        tol = atol + rtol * np.where(np.isfinite(e), np.abs(e), 0.0)
        ratio = np.where(err == 0, 0.0, err / tol)
        rel = np.where(err == 0, 0.0, err / np.abs(e))
    if not err.any():            # identical: no element is worst
        return Comparison(True, output=output)
    worst = np.unravel_index(int(np.argmax(ratio)), got.shape)
    return Comparison(bool((err <= tol).all()), float(err.max()), float(np.nanmax(rel)),
                      tuple(int(i) for i in worst), output)


def compare_all(got: Sequence[np.ndarray], expected: Sequence[np.ndarray], rtol: float,
                atol: float) -> Comparison:
    """Every output compared; the result of the first one that differs, else of the one with
    the largest error."""
    if len(got) != len(expected):
        return Comparison(False, float("inf"), float("inf"), None, 0,
                          f"{len(got)} output(s), the reference gives {len(expected)}")
    results = [compare(g, e, rtol, atol, j) for j, (g, e) in enumerate(zip(got, expected))]
    failed = [r for r in results if not r.ok]
    return failed[0] if failed else max(results, key=lambda r: r.max_abs)


def run_reference(defn: PythonLayerDef, inputs: Sequence[np.ndarray], attrs, where: str
                  ) -> list[np.ndarray]:
    """The Python layer's outputs for these inputs (shapes from its output_shapes)."""
    from ...jit.tensor import TensorDesc
    descs = output_descs(defn, [TensorDesc(a.shape, a.dtype) for a in inputs], attrs, where)
    outputs = [np.empty(d.shape, d.np_dtype) for d in descs]
    run_python_layer(defn, inputs, outputs, attrs, where)
    return outputs


# -- in a model ------------------------------------------------------------------------------
@dataclass
class LayerCheck:
    """One custom layer of a model checked against its reference."""
    name: str
    type: str
    where: str
    result: Comparison


@dataclass
class CheckReport:
    """What `run --check-with` found, in the order the layers ran."""
    rtol: float = DEFAULT_RTOL
    atol: float = DEFAULT_ATOL
    checks: list[LayerCheck] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)   # custom layer types with no reference
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, check: LayerCheck) -> None:
        with self._lock:
            self.checks.append(check)

    def first_difference(self) -> LayerCheck | None:
        return next((c for c in self.checks if not c.result.ok), None)


class CheckedLayer(LayerImpl):
    """A loaded layer, run as usual, then its Python reference on the same inputs, compared.
    The layer's attributes are its model text (a descriptor's are), parsed again by the
    reference's own declarations."""

    def __init__(self, inner: LayerImpl, reference: PythonLayerDef, report: CheckReport):
        self.inner = inner
        self.reference = reference
        self.report = report
        self.type = inner.type
        self.impl = inner.impl
        self.attributes = inner.attributes
        self.const_inputs = inner.const_inputs

    def parse_attributes(self, raw, layer):
        return self.inner.parse_attributes(raw, layer)

    def outputs(self, call: LayerCall):
        return self.inner.outputs(call)

    def work(self, call: LayerCall, outputs) -> LayerWork:
        work = self.inner.work(call, outputs)
        ref, report = self.reference, self.report
        attrs = {a.name: parse_attr(a, _text(call.attrs.get(a.name)), call.type, call.name)
                 for a in ref.attributes}
        n_in, name, layer_type, where = len(call.inputs), call.name, call.type, call.where

        def run(arrays, _outputs):     # the layer's inputs, then its outputs; writes nothing
            expected = run_reference(ref, arrays[:n_in], attrs, where)
            result = compare_all(arrays[n_in:], expected, report.rtol, report.atol)
            report.add(LayerCheck(name, layer_type, where, result))

        label = f"{ref.cls.__name__}.execute"
        work.stages.append(Stage(
            f"{call.name}/check", call.type, "check", label, [],
            [("in", i) for i in range(n_in)] + [("out", j) for j in range(len(outputs))], [],
            list(call.inputs) + [d.plain() for d in outputs], [], host=HostWork(run, label)))
        return work


def _text(value):
    return None if value is None else str(value)


class CheckingResolver(Resolver):
    """The usual resolver, but every loaded layer (other than a Python one) whose type has a
    reference is a CheckedLayer."""

    def __init__(self, registry, references: dict[str, PythonLayerDef], report: CheckReport,
                 say=None):
        super().__init__(registry, say=say)
        self.references = references
        self.report = report
        self._checked: dict[str, LayerImpl] = {}

    def find(self, node):
        impl = super().find(node)
        if impl is None or not self.is_loaded(node) or impl.impl == "python":
            return impl
        if node.type not in self.references:
            if node.type not in self.report.unchecked:
                self.report.unchecked.append(node.type)
            return impl
        checked = self._checked.get(node.type)
        if checked is None:
            checked = self._checked[node.type] = CheckedLayer(impl, self.references[node.type],
                                                              self.report)
        return checked
