"""CPU layers in Python: the `@cpu_layer` decorator, and loading the modules that use it
(`-l layers.py`, `Registry.load_python`). OpenVINO's samples load CPU extensions with `-l`
(a shared library with a layer factory); here the library is a Python module:

    from customlayers.api import Attr, cpu_layer

    @cpu_layer("Softsign")
    class Softsign:
        attributes = (Attr("alpha", "float", default=1.0),)
        def output_shapes(self, input_shapes, attrs):
            return [input_shapes[0]]
        def execute(self, inputs, outputs, attrs):
            np.divide(inputs[0], 1 + attrs["alpha"] * np.abs(inputs[0]), out=outputs[0])

The decorator records the class under its module's name (an explicit registry, no scanning of
the module's globals); loading imports the module and checks each recorded class against the
contract, with the class's file and line in every message.
"""
from __future__ import annotations

import hashlib
import importlib.util
import inspect
import os
import re
import sys
import threading
import traceback
from pathlib import Path
from types import ModuleType

from ...config.limits import MAX_SOURCE_BYTES
from ...errors import PythonLayerError, PythonLayerFileError
from ...files import check_user_file
from ...jit.layer import Attr
from .python_layer import PythonLayerDef, user_error

ATTR_KINDS = ("int", "float", "str", "bool", "ints", "floats")

# module name -> [(layer type, class)] in the order the decorator saw them
_DECLARED: dict[str, list[tuple[str, type]]] = {}
_LOCK = threading.Lock()      # one import of a layer file at a time


def cpu_layer(layer_type: str):
    """Class decorator: the class implements layers of type `layer_type` on the host."""
    if not isinstance(layer_type, str) or not layer_type.strip():
        raise TypeError(f"@cpu_layer takes the layer type the class implements, such as "
                        f"@cpu_layer(\"Softsign\"); found {layer_type!r}")

    def register(cls):
        if not isinstance(cls, type):
            raise TypeError(f"@cpu_layer(\"{layer_type}\") decorates a class; found {cls!r}")
        _DECLARED.setdefault(cls.__module__, []).append((layer_type.strip(), cls))
        return cls

    return register


def load_python_layers(source) -> list[PythonLayerDef]:
    """The layers a module registers: `source` is a path to a .py file or an imported module.
    PythonLayerError (with the user's traceback chained where their code raised) otherwise."""
    if isinstance(source, ModuleType):
        module, shown = source, getattr(source, "__file__", None) or source.__name__
        given: dict[str, str] = {}
    else:
        module, shown = _import_file(Path(source)), str(source)
        # messages name the file as the user gave it, not its resolved path
        given = {str(Path(shown).resolve()): shown}
    declared = _DECLARED.get(module.__name__, [])
    if not declared:
        raise PythonLayerError(f"{shown}: defines no layer: decorate a class with "
                               f"@cpu_layer(\"LayerType\") (from customlayers.api import "
                               f"cpu_layer)")
    defs: dict[str, PythonLayerDef] = {}
    for layer_type, cls in declared:
        defn = _definition(layer_type, cls, given)
        if layer_type in defs:
            raise PythonLayerError(f"{defn.place}: layer type '{layer_type}' is registered "
                                   f"twice in {shown} (first at {defs[layer_type].place})")
        defs[layer_type] = defn
    return list(defs.values())


def _import_file(path: Path) -> ModuleType:
    if not path.exists():
        raise PythonLayerFileError(f"{path}: no such Python layer file", path)
    if path.suffix != ".py":
        raise PythonLayerError(f"{path}: a Python layer file is a .py module; found "
                               f"'{path.suffix or 'no suffix'}'")
    try:                       # a regular file of sane size (import would block on a FIFO)
        check_user_file(path, MAX_SOURCE_BYTES)
    except OSError as e:
        raise PythonLayerFileError(f"{path}: cannot read the Python layer file: "
                                   f"{e.strerror}", path, e) from e
    real = path.resolve()
    # a name of its own per file: two files called layers.py do not replace each other (the
    # path's bytes: a file name need not be UTF-8)
    name = "customlayers_user_{}_{}".format(re.sub(r"\W", "_", real.stem),
                                            hashlib.sha1(os.fsencode(real)).hexdigest()[:10])
    spec = importlib.util.spec_from_file_location(name, real)
    module = importlib.util.module_from_spec(spec)
    with _LOCK:
        _DECLARED.pop(name, None)          # loaded again: its classes are declared anew
        sys.modules[name] = module         # as import does (dataclasses, pickle look it up)
        try:
            spec.loader.exec_module(module)
        except KeyboardInterrupt:
            sys.modules.pop(name, None)
            _DECLARED.pop(name, None)
            raise
        except BaseException as e:     # SystemExit, or the user's own BaseException subclass
            sys.modules.pop(name, None)
            _DECLARED.pop(name, None)
            line = _line_in(e, real)
            raise user_error(PythonLayerError, f"{path}{f':{line}' if line else ''}: loading "
                                               f"the Python layers raised {type(e).__name__}: "
                                               f"{e}", e) from e
    return module


def _line_in(error: BaseException, path: Path) -> int | None:
    """The line of `path` where `error` arose (a syntax error's own, else the deepest frame)."""
    if isinstance(error, SyntaxError) and error.filename and Path(error.filename) == path:
        return error.lineno
    lines = [f.lineno for f in traceback.extract_tb(error.__traceback__)
             if Path(f.filename) == path]
    return lines[-1] if lines else None


def _definition(layer_type: str, cls: type, given: dict[str, str]) -> PythonLayerDef:
    """Check a class against the contract and make its one instance. `given`: resolved path ->
    the path as the user wrote it."""
    try:
        file = inspect.getsourcefile(cls) or "<unknown>"
        file = given.get(str(Path(file).resolve()), file)
        line = inspect.getsourcelines(cls)[1]
    except (OSError, TypeError):
        file, line = getattr(sys.modules.get(cls.__module__), "__file__", "<unknown>"), 0
    place = f"{file}:{line}"
    title = f"{place}: class {cls.__name__} (@cpu_layer(\"{layer_type}\"))"
    for name, args in (("execute", "inputs, outputs, attrs"),
                       ("output_shapes", "input_shapes, attrs")):
        if not callable(getattr(cls, name, None)):
            raise PythonLayerError(f"{title} has no {name}(self, {args}) method")
    attributes = getattr(cls, "attributes", ())
    if not isinstance(attributes, (tuple, list)) or not all(
            isinstance(a, Attr) for a in attributes):
        raise PythonLayerError(f"{title}: `attributes` must be a tuple of Attr(name, kind, "
                               f"default=..., required=...); found {attributes!r}")
    for a in attributes:
        if a.kind not in ATTR_KINDS:
            raise PythonLayerError(f"{title}: attribute '{a.name}' has kind '{a.kind}'; "
                                   f"expected one of {', '.join(ATTR_KINDS)}")
    try:
        instance = cls()
    except KeyboardInterrupt:
        raise
    except BaseException as e:
        raise user_error(PythonLayerError, f"{title}: creating an instance with {cls.__name__}() "
                                           f"raised {type(e).__name__}: {e}", e) from e
    for name, args in (("execute", 3), ("output_shapes", 2)):
        try:
            inspect.signature(getattr(instance, name)).bind(*([None] * args))
        except TypeError:
            wanted = "inputs, outputs, attrs" if name == "execute" else "input_shapes, attrs"
            raise PythonLayerError(f"{title}: {name} must take (self, {wanted}); it is "
                                   f"{name}{inspect.signature(getattr(cls, name))}") from None
        except ValueError:          # a builtin without a signature: let the call tell
            pass
    return PythonLayerDef(layer_type, cls, instance, file, line, tuple(attributes))
