"""The project's exception types.

One base, `CustomLayersError`; each subclass also inherits the builtin that fits it (xmlschema's
pattern), so `except ValueError` in user code keeps working. Errors carry fields; they are
formatted once, at the edge (the CLI), and never rebuilt from `str(e)`: chain with `from`.
`shape_text` is how their messages write a shape.
"""
from __future__ import annotations

import errno
import os


def shape_text(shape, sep: str = ", ") -> str:
    """A shape as messages write it, an open dim as ?: [?, 4, 6] (sep ",": the compact
    [?,4,6] of the graph's and the states' messages)."""
    return "[" + sep.join("?" if d is None else str(d) for d in shape) + "]"


class CustomLayersError(Exception):
    """Base of every error this package raises on purpose.

    `context` says where the error arose when the code that raised it could not know (the
    executor sets it to the layer: "layer 'conv1' (type Convolution) at model.xml:12"); the
    message keeps its own fields. Subclasses format themselves in `describe`.

    `location` (a config.diagnostics.Location: file, line, column) and `code` (a stable CLxxx
    code) say which part of a descriptor the error is about, when it is about one: the CLI
    turns such an error into a Diagnostic at that place (`validate --compile`). `layer` names
    the layer (type) the error is about, when known.

    `user_code` is True when the error's `__cause__` was raised in the user's own Python code (a
    Python layer's module or methods): the CLI then shows that traceback, the user's file and
    line, without this package's frames.
    """
    context: str | None = None
    location = None
    code: str | None = None
    layer: str | None = None
    user_code: bool = False

    def at(self, location, code: str | None = None, layer: str | None = None):
        """Record where the error is (keeping a place set earlier, which is more precise);
        returns the error, for `raise error.at(...)`."""
        if self.location is None:
            self.location = location
        if self.code is None:
            self.code = code
        if self.layer is None:
            self.layer = layer
        return self

    def __str__(self) -> str:
        text = self.describe()
        return f"{self.context}: {text}" if self.context else text

    def describe(self) -> str:
        return super().__str__()


class ConfigError(CustomLayersError, ValueError):
    """A descriptor (config XML) is invalid. `diagnostics` holds every problem found."""

    def __init__(self, message: str, diagnostics=()):
        super().__init__(message)
        self.diagnostics = list(diagnostics)

    def describe(self) -> str:
        if not self.diagnostics:
            return super().describe()
        lines = [super().describe()]
        lines += [d.render() for d in self.diagnostics]
        return "\n".join(lines)


class InputFileError(CustomLayersError, OSError):
    """A file given as input (a model and its weights or external data, a config, a Python
    layer file) is missing or cannot be read: not there, a folder, no permission. The CLI exits
    2 on it, as on every input file it cannot read (.npy arrays, files named in arguments),
    and 1 on a file it read whose content is wrong. Also an OSError with the errno and the file
    name, so `except OSError` code keeps working. The subclasses below also derive from the
    error of their kind (ModelError, PythonLayerError, ConfigError)."""

    def __init__(self, message: str, path, error: OSError | None = None):
        OSError.__init__(self, getattr(error, "errno", None) or errno.ENOENT,
                         getattr(error, "strerror", None) or os.strerror(errno.ENOENT),
                         str(path))
        self.message = message

    def __reduce__(self):
        # pickled (a Ray actor's error, a worker process's) by its own arguments: OSError's
        # would call __init__ with (errno, strerror, filename)
        return (type(self), (self.message, self.filename, OSError(self.errno, self.strerror)),
                self.__dict__)

    def describe(self) -> str:
        return self.message


class ConfigFileError(ConfigError, InputFileError):
    """A config file cannot be read (missing, a folder, no permission)."""

    def __init__(self, path: str, error: OSError):
        OSError.__init__(self, error.errno, error.strerror, path)
        self.diagnostics = []

    def __reduce__(self):
        return (type(self), (self.filename, OSError(self.errno, self.strerror)), self.__dict__)

    def describe(self) -> str:
        return f"cannot read the config {self.filename}: {self.strerror or 'unreadable'}"

    def __str__(self) -> str:
        return self.describe()


class FormulaError(CustomLayersError, ValueError):
    """A work-size (or shape) formula does not parse or cannot be evaluated.

    `formula` is the text, `position` the 0-based character offset of the problem (or None),
    `layer` and `attribute` say where the formula came from when known, `location` the place
    in the config (file:line:col) when known.
    """

    def __init__(self, message: str, formula: str = "", position: int | None = None,
                 layer: str | None = None, attribute: str | None = None,
                 location: object | None = None):
        super().__init__(message)
        self.message = message
        self.formula = formula
        self.position = position
        self.layer = layer
        self.attribute = attribute
        self.location = location

    def describe(self) -> str:
        where = [str(self.location)] if self.location else []
        if self.layer:
            where.append(f"layer '{self.layer}'")
        if self.attribute:
            where.append(f"attribute '{self.attribute}'")
        prefix = (", ".join(where) + ": ") if where else ""
        text = f"{prefix}{self.message}"
        if self.formula:
            text += f" in formula '{self.formula}'"
            if self.position is not None:
                text += f" at column {self.position + 1}"
        return text


class DefineError(CustomLayersError, ValueError):
    """A Define's value does not fit its declared type."""


class TensorError(CustomLayersError, ValueError):
    """A tensor description is impossible (rank, dtype, format, padding)."""


class KernelBuildError(CustomLayersError, RuntimeError):
    """OpenCL failed to build a program.

    `log` is the device's build log mapped to the user's own files and lines, `source_path` the
    generated program saved to disk, `options` the build options, `device` the device's name
    and driver. `options_rejected` is True when the driver refused the build options rather
    than the source.
    """
    options_rejected = False
    user_options: str | None = None     # the descriptor's own options, when others were added

    def __init__(self, message: str, log: str = "", source_path: str | None = None,
                 options: str = "", device: str = "", layer: str | None = None):
        super().__init__(message)
        self.message = message
        self.log = log
        self.source_path = source_path
        self.options = options
        self.device = device
        self.layer = layer

    def describe(self) -> str:
        parts = [self.message]
        if self.log:
            parts.append(self.log.rstrip())
        if self.source_path:
            parts.append(f"generated source saved to {self.source_path}")
        parts.append(f"device: {self.device}; options: '{self.options}'")
        return "\n".join(parts)


class KernelSourceError(CustomLayersError, RuntimeError):
    """A built-in kernel file (customlayers/ops/*.cl) cannot be put together: an #include of it
    names no kernel file or makes a cycle. A defect of the package, not of the user's input;
    the message names the file, line and column."""


class BindingError(CustomLayersError, ValueError):
    """Tensors, blobs or attributes given to a layer do not fit its descriptor or kernel."""


class PythonLayerError(CustomLayersError, ValueError):
    """A Python layer module cannot be loaded (it does not exist, or importing it raised), or a
    class in it breaks the layer contract (no `execute`, a wrong `output_shapes` result)."""


class PythonLayerFileError(PythonLayerError, InputFileError):
    """A Python layer file is missing or is not a file."""


class UnknownLayerError(CustomLayersError, KeyError):
    """No implementation is registered for a layer type."""

    def describe(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class DeviceError(CustomLayersError, RuntimeError):
    """No OpenCL device matches, or the device cannot do what is asked."""


class NoSuchDeviceError(DeviceError):
    """The device asked for (-d GPU, a name) is not on this machine: a wrong argument, which
    the command line answers with exit status 2, as it does a missing input file."""


class ModelError(CustomLayersError, ValueError):
    """A model file (IR or ONNX) is malformed or uses something unsupported."""


class ModelFileError(ModelError, InputFileError):
    """A model file, its weights or its external data is missing or cannot be read."""


class UnsupportedLayersError(ModelError):
    """Layers of a model that neither a built-in op nor a loaded custom layer implements.

    `layers` lists them in model order as (name, type, domain) tuples; domain is "" for IR
    layers and standard ONNX ops. Tools read this field rather than parse the message.
    """

    def __init__(self, message: str, layers=()):
        super().__init__(message)
        self.layers = [tuple(layer) for layer in layers]


class ExecutionError(CustomLayersError, RuntimeError):
    """A layer failed while a network ran; the message names the layer."""


class KernelWriteError(ExecutionError):
    """A custom kernel's output had elements it never wrote, or bytes written past its end,
    found by execute/unwritten.py's sentinels and guard zones: the message names the layer,
    the output, the first element and what to fix. `unwritten`: elements never written (the
    output's shape may be the caller's guess), not a write past the end."""
    unwritten = False

    @classmethod
    def never_written(cls, message: str) -> "KernelWriteError":
        error = cls(message)
        error.unwritten = True
        return error


class PackageError(ModelError):
    """A compiled package (customlayers compile -o model.clpkg) that cannot be used: not a
    package, truncated, corrupted or tampered with (`part` names the part that fails its
    checksum), of a newer format, or built for another device, driver or version of ours."""

    def __init__(self, message: str, part: str | None = None):
        super().__init__(message)
        self.part = part


class PackageFileError(ModelFileError, PackageError):
    """A package file that is missing or cannot be read: a PackageError, and an input file
    error (the command line exits 2, as for a missing model)."""

    def __init__(self, message: str, path, error: OSError | None = None):
        InputFileError.__init__(self, message, path, error)
        self.part = None


class LayerRedefinedWarning(UserWarning):
    """A loaded layer's type defined again (CL070): the later definition replaces the earlier
    one. Registry.load and load_python return it among their diagnostics and also warn it, so
    that an API user who never reads the diagnostics still sees it (the command line prints
    the diagnostics and ignores this warning)."""
