"""read_model: one entry point for every model format, chosen by the file's extension (or an
onnx.ModelProto made in memory)."""
from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

from ..errors import ModelError, ModelFileError
from ..files import open_user_file
from .graph import Graph


def read_model(path, weights=None, custom_shapes=None) -> Graph:
    """`model.xml` (OpenVINO IR, weights in the sibling .bin unless given) or `model.onnx`.
    `custom_shapes`: the output shapes of custom ONNX nodes (graph/custom_shapes.py; an IR
    declares every port's shape itself). An onnx.ModelProto made in memory is read as its file
    would be."""
    onnx = sys.modules.get("onnx")                 # a ModelProto means onnx is imported
    if onnx is not None and isinstance(path, onnx.ModelProto):
        from .onnx.reader import read_onnx
        return read_onnx(path, custom_shapes)
    if not isinstance(path, (str, os.PathLike)):
        raise ModelError(f"the model is a {type(path).__name__}; expected the path of an "
                         f"OpenVINO IR .xml or an .onnx file, or an onnx.ModelProto")
    p = Path(path)
    if not p.exists():
        raise ModelFileError(f"{p}: no such model file", p)
    if p.is_dir():
        raise ModelFileError(f"{p}: a folder, not a model file", p,
                             IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR)))
    if not p.is_file():              # a device, a FIFO: before its suffix (/dev/zero has none)
        try:
            open_user_file(p).close()
        except OSError as e:
            raise ModelFileError(f"cannot read {p}: {e.strerror or e}", p, e) from None
    suffix = p.suffix.lower()
    if suffix == ".xml":
        from .ir import read_ir
        return read_ir(p, weights)
    if suffix == ".onnx":
        from .onnx.reader import read_onnx
        return read_onnx(p, custom_shapes)
    raise ModelError(f"{p}: unknown model format '{suffix}'; expected an OpenVINO IR .xml or an "
                     f".onnx file")
