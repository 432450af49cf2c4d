"""The Python layer adapter: a class registered with `@cpu_layer` (python_loader.py) as a layer
implementation (jit.layer.LayerImpl), so the network compiler runs it like any other layer.

Its work is one host stage (jit.launch.HostWork): the executor maps the inputs, runs
`execute` in a worker thread and releases the kernels after it with an event (host_step.py).
The same checked call (`run_python_layer`) serves `check` and `run --check-with`, so a Python
layer behaves alike as a layer of a model and as a reference.

What the user's class promises is checked where it shows: `output_shapes` returns one shape per
output; `execute` fills every element of every output in place. Outputs are pre-filled with a
sentinel (a NaN with a payload no arithmetic produces, for floats) and checked afterwards, so an
element `execute` forgot is an error, not a silently stale number.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ...errors import ExecutionError, PythonLayerError
from ...jit.launch import HostWork
from ...jit.layer import Attr, LayerCall, LayerImpl, LayerWork, Stage
from ...jit.tensor import TensorDesc, normalize_dtype
from ..execute.unwritten import ONE_RUN_CHECKED, fill, first_index, kept

@dataclass(frozen=True)
class PythonLayerDef:
    """A loaded Python layer: the user's class, its one instance, and where it is written."""
    type: str
    cls: type
    instance: Any
    file: str
    line: int
    attributes: tuple[Attr, ...]

    @property
    def place(self) -> str:
        return f"{self.file}:{self.line}"

    def method(self, name: str) -> str:
        """'Softsign.execute (layers.py:13)', for messages: the line of the method's `def`
        where the class defines it in its file, else the class's."""
        code = getattr(getattr(self.cls, name, None), "__code__", None)
        line = code.co_firstlineno if code is not None and \
            os.path.abspath(code.co_filename) == os.path.abspath(self.file) else self.line
        return f"{self.cls.__name__}.{name} ({self.file}:{line})"


def user_error(error_type, message: str, cause: BaseException):
    """An error of ours about an exception raised in the user's code (its traceback is shown)."""
    error = error_type(message)
    error.user_code = True
    error.__cause__ = cause
    return error


# -- shapes and types ------------------------------------------------------------------------
def output_descs(defn: PythonLayerDef, inputs: Sequence[TensorDesc], attrs: Mapping[str, Any],
                 where: str) -> list[TensorDesc]:
    """The output tensors `output_shapes` (and `output_types`, else input 0's type) give."""
    shapes_in = [tuple(d.shape) for d in inputs]
    try:
        shapes = defn.instance.output_shapes(shapes_in, dict(attrs))
    except KeyboardInterrupt:
        raise
    except BaseException as e:      # the user's code may raise anything: SystemExit too
        raise user_error(PythonLayerError, f"{where}: {defn.method('output_shapes')} raised "
                                           f"{type(e).__name__}: {e}", e) from e
    shapes = _checked_shapes(defn, shapes, where)
    dtypes = _output_types(defn, inputs, attrs, len(shapes), where)
    return [TensorDesc(s, t) for s, t in zip(shapes, dtypes)]


def _checked_shapes(defn: PythonLayerDef, shapes, where: str) -> list[tuple[int, ...]]:
    def is_dim(v) -> bool:
        return isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v > 0

    what = f"{where}: {defn.method('output_shapes')} returned {shapes!r}"
    if isinstance(shapes, (tuple, list)) and shapes and all(is_dim(v) for v in shapes):
        raise PythonLayerError(f"{what}, a single shape; return a list of shapes, one per "
                               f"output: [{tuple(int(v) for v in shapes)}]")
    if not isinstance(shapes, (tuple, list)) or not shapes or not all(
            isinstance(s, (tuple, list)) and all(is_dim(v) for v in s) for s in shapes):
        raise PythonLayerError(f"{what}; expected a list with one shape per output, each a "
                               f"tuple of positive ints, such as [(1, 3, 8, 8)]")
    return [tuple(int(v) for v in s) for s in shapes]


def _output_types(defn: PythonLayerDef, inputs, attrs, count: int, where: str) -> list[str]:
    given = getattr(defn.instance, "output_types", None)
    if given is None:
        return [inputs[0].dtype if inputs else "f32"] * count
    if callable(given):
        try:
            given = given([d.np_dtype for d in inputs], dict(attrs))
        except KeyboardInterrupt:
            raise
        except BaseException as e:
            raise user_error(PythonLayerError, f"{where}: {defn.method('output_types')} raised "
                                               f"{type(e).__name__}: {e}", e) from e
    what = f"{where}: {defn.method('output_types')} gives {given!r}"
    if not isinstance(given, (tuple, list)) or len(given) != count:
        raise PythonLayerError(f"{what}; expected a list of {count} element type(s), one per "
                               f"output (such as [np.float32])")
    try:
        return [normalize_dtype(t) for t in given]
    except KeyboardInterrupt:
        raise
    except BaseException as e:     # TensorError names the types we take; a user's type, its own
        raise PythonLayerError(f"{what}: {e}") from None


# -- running ---------------------------------------------------------------------------------
def run_python_layer(defn: PythonLayerDef, inputs: Sequence[np.ndarray],
                     outputs: Sequence[np.ndarray], attrs: Mapping[str, Any], where: str) -> None:
    """Fill `outputs` (dense arrays, any contents) by the layer's `execute`, checked: the
    user's exception becomes an ExecutionError naming the layer (chained from theirs), and an
    output left unwritten or replaced is an error."""
    for out in outputs:
        _fill_sentinel(out)
    given = list(outputs)
    try:
        defn.instance.execute(_read_only(inputs), given, dict(attrs))
    except KeyboardInterrupt:
        raise
    except BaseException as e:      # the user's code may raise anything: SystemExit too
        raise user_error(ExecutionError, f"{where}: {defn.method('execute')} raised "
                                         f"{type(e).__name__}: {e}", e) from e
    for j, out in enumerate(outputs):
        if j >= len(given) or given[j] is not out:
            raise ExecutionError(f"{where}: {defn.method('execute')} replaced outputs[{j}] "
                                 f"instead of filling it; write into the array it was given: "
                                 f"outputs[{j}][...] = value, or out=outputs[{j}]")
        missing = _unwritten(out)
        if missing is not None:
            count, first = missing
            raise ExecutionError(
                f"{where}: {defn.method('execute')} left {count} of {out.size} element(s) of "
                f"output {j} (shape {list(out.shape)}) unwritten, the first at index "
                f"{first}; fill every element in place: outputs[{j}][...] = value, or "
                f"out=outputs[{j}]")


def _read_only(inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Views of the inputs that `execute` cannot write (as in a model, where an input may be
    another layer's too; run alone, the caller's arrays stay as they were)."""
    views = []
    for a in inputs:
        view = np.asarray(a).view()
        view.flags.writeable = False
        views.append(view)
    return views


def _fill_sentinel(out: np.ndarray) -> None:
    if out.dtype in ONE_RUN_CHECKED:
        fill(out)


def _unwritten(out: np.ndarray):
    """(how many elements still hold the sentinel, the first one's index), or None."""
    if out.dtype not in ONE_RUN_CHECKED:
        return None
    left = kept(out)
    count = int(np.count_nonzero(left))
    return (count, first_index(left)) if count else None


# -- the layer interface -----------------------------------------------------------------------
class PythonLayer(LayerImpl):
    """A Python layer as a layer implementation: one host stage."""
    impl = "python"

    def __init__(self, definition: PythonLayerDef):
        self.definition = definition
        self.type = definition.type
        self.attributes = definition.attributes

    def outputs(self, call: LayerCall) -> list[TensorDesc]:
        descs = output_descs(self.definition, call.inputs, call.attrs, call.where)
        if call.declared and len(descs) != len(call.declared):
            raise PythonLayerError(
                f"{call.where}: {self.definition.method('output_shapes')} gives "
                f"{len(descs)} output(s); the model's node has {len(call.declared)}")
        return descs

    def work(self, call: LayerCall, outputs: Sequence[TensorDesc]) -> LayerWork:
        defn, where, attrs = self.definition, call.where, dict(call.attrs)

        def run(inputs, outs):
            run_python_layer(defn, inputs, outs, attrs, where)

        label = f"{defn.cls.__name__}.execute"
        origin = ("python", defn.type, defn.cls.__name__, Path(defn.file).name,
                  tuple(sorted(attrs.items())), where)
        return LayerWork([Stage(call.name, call.type, self.impl, label, [],
                                [("in", i) for i in range(len(call.inputs))],
                                [("out", j) for j in range(len(outputs))],
                                list(call.inputs), list(outputs),
                                host=HostWork(run, label, origin))])
