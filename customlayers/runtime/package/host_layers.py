"""Python layers' host steps in a package: a step's HostWork is a closure over the user's
class, which a package does not hold (Python code is never embedded). The package records, per
host step, the layer type, the class and the file it came from, and the parsed attributes
(HostWork.origin); loading rebuilds the step from the class the caller loaded (`-l`,
Registry.load_python), and refuses, naming the layers and their files, when it is not loaded."""
from __future__ import annotations

from dataclasses import dataclass

from ...errors import PackageError
from ...jit.launch import HostWork
from ..layers.python_layer import run_python_layer


@dataclass(frozen=True)
class PythonHostStep:
    """What rebuilds a Python layer's host step: HostWork.origin as a record."""
    layer_type: str
    class_name: str
    file: str                 # the layer file's name (no folder): for messages
    attrs: dict
    where: str                # the node described, for messages
    label: str


def record(step) -> PythonHostStep:
    """The record of a plan step's host work; PackageError for host work that is not a
    Python layer's (a reference check of a debugging run)."""
    origin = step.host.origin
    if not origin or origin[0] != "python":
        raise PackageError(f"layer '{step.name}' ({step.type}) runs host work that cannot be "
                           f"packaged (a reference check?): compile without it")
    _, layer_type, class_name, file, attrs, where = origin
    return PythonHostStep(layer_type, class_name, file, dict(attrs), where, step.host.label)


def rebuild(rec: PythonHostStep, registry) -> HostWork:
    """The host work of `rec` from the Python layer `registry` loaded for its type."""
    defn = _loaded(rec, registry)
    if defn is None or defn.cls.__name__ != rec.class_name:
        raise PackageError(missing_message([rec]))
    attrs, where = dict(rec.attrs), rec.where

    def run(inputs, outs):
        run_python_layer(defn, inputs, outs, attrs, where)

    return HostWork(run, rec.label, origin=("python", rec.layer_type, rec.class_name,
                                            rec.file, tuple(sorted(attrs.items())), where))


def _loaded(rec: PythonHostStep, registry):
    if registry is None or rec.layer_type not in registry.python_layer_types():
        return None
    return registry.python_layer(rec.layer_type)


def missing(records, registry) -> list[PythonHostStep]:
    """The records whose class the registry has not loaded (by type and class name)."""
    found = []
    for rec in records:
        defn = _loaded(rec, registry)
        if defn is None or defn.cls.__name__ != rec.class_name:
            found.append(rec)
    return found


def missing_message(records) -> str:
    named = {}
    for rec in records:
        named.setdefault((rec.layer_type, rec.class_name, rec.file), rec.where)
    listed = "; ".join(f"type {t} (class {c} of {f}, {where})"
                       for (t, c, f), where in named.items())
    files = " ".join(sorted({f"-l {f}" for _, _, f in named}))
    return (f"the package runs Python layers, whose code it does not hold: {listed}; load "
            f"them ({files}, or Registry.load_python) and pass the registry")
