"""Reading an .onnx file with its weights left where they lie in the file's bytes.

protobuf copies every bytes field when it parses (and again at each read of it from Python):
ResNet-50's 100 MB of initializers were copied twice after the file was read, a third of a warm
load. Here the file is read once; the raw_data of the graph's large initializers is cut out of a
copy of the message structure (a few hundred KB, what protobuf then parses), and each value is
handed on as a read-only view of the file's bytes.

The cut is made at the protobuf wire level, on the fields it needs (ModelProto.graph = 7,
GraphProto.initializer = 5, TensorProto.raw_data = 9; data_location = 14 marks external data).
Anything unusual (a graph given twice, a tensor with two raw_data, group fields, lengths past the
end) is left to protobuf: the whole file is parsed as before.
"""
from __future__ import annotations

import os
from pathlib import Path

from ...errors import ModelError, ModelFileError
from ...files import check_user_file, read_user_file
from ..limits import MAX_MODEL_BYTES

# raw_data longer than this is cut out: more than 1024 elements of any type (8 bytes at most per
# element), so shape inference still sees every value it may read (shapes.py)
CUT_BYTES = 8 * 1024

_GRAPH, _INITIALIZER, _RAW_DATA, _DATA_LOCATION = 7, 5, 9, 14
_LENGTH_DELIMITED, _VARINT = 2, 0
_EXTERNAL = 1


class _Unusual(Exception):
    """The bytes are not the plain encoding this module handles (protobuf will judge them)."""


def load_model_file(onnx, path: Path):
    """(model, raw): the ModelProto, with raw_data cut from the large initializers of its graph,
    and {initializer index: memoryview of that raw_data in the file's bytes}. Raises what
    onnx.load raises for a file that is not a model."""
    data = read_user_file(path, MAX_MODEL_BYTES)
    try:
        skeleton, spans = _cut_raw_data(data)
        model = onnx.load_model_from_string(skeleton)
    except Exception:       # noqa: BLE001 - protobuf parses the whole file and says what is wrong
        return onnx.load_model_from_string(data), {}
    view = memoryview(data)
    return model, {index: view[start:end] for index, (start, end) in spans.items()}


def _cut_raw_data(data: bytes) -> tuple[bytes, dict[int, tuple[int, int]]]:
    """The model's bytes without the large raw_data of its graph's initializers, and where
    each cut value lies in `data`, by initializer index."""
    graphs = [f for f in _fields(data, 0, len(data)) if f[0] == _GRAPH]
    if len(graphs) != 1 or graphs[0][1] != _LENGTH_DELIMITED:
        raise _Unusual("not one graph")                  # protobuf merges repeated messages
    _, _, start, end, head = graphs[0]
    parts: list[bytes] = []
    spans: dict[int, tuple[int, int]] = {}
    index = 0
    for number, wire, value_start, value_end, field_start in _fields(data, start, end):
        cut = None
        if number == _INITIALIZER and wire == _LENGTH_DELIMITED:
            cut = _large_raw_data(data, value_start, value_end)
            if cut is not None:
                tensor = data[value_start:cut[2]] + data[cut[1]:value_end]
                parts.append(_key(_INITIALIZER) + _varint(len(tensor)) + tensor)
                spans[index] = cut[:2]
            index += 1
        if cut is None:
            parts.append(data[field_start:value_end])
    graph = b"".join(parts)
    return data[:head] + _key(_GRAPH) + _varint(len(graph)) + graph + data[end:], spans


def _large_raw_data(data: bytes, start: int, end: int) -> tuple[int, int, int] | None:
    """(value start, value end, field start) of the TensorProto's raw_data in data[start:end]
    when it is the one raw_data, over CUT_BYTES, of a tensor whose data is not external."""
    found = []
    for number, wire, value_start, value_end, field_start in _fields(data, start, end):
        if number == _RAW_DATA and wire == _LENGTH_DELIMITED:
            found.append((value_start, value_end, field_start))
        elif number == _DATA_LOCATION and wire == _VARINT and \
                _read_varint(data, value_start, value_end)[0] == _EXTERNAL:
            return None
    if len(found) != 1 or found[0][1] - found[0][0] <= CUT_BYTES:
        return None
    return found[0]


def _fields(data: bytes, start: int, end: int):
    """(number, wire type, value start, value end, field start) of each field in data[start:end]
    (a varint's value is its bytes)."""
    pos = start
    while pos < end:
        field_start = pos
        key, pos = _read_varint(data, pos, end)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, value_end = _read_varint(data, pos, end)
        elif wire == 1:
            value_end = pos + 8
        elif wire == 2:
            length, pos = _read_varint(data, pos, end)
            value_end = pos + length
        elif wire == 5:
            value_end = pos + 4
        else:
            raise _Unusual(f"wire type {wire}")         # groups: long deprecated
        if number == 0 or value_end > end:
            raise _Unusual("field past the end")
        yield number, wire, pos, value_end, field_start
        pos = value_end


def _read_varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise _Unusual("varint past the end")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _key(number: int) -> bytes:
    return _varint(number << 3 | _LENGTH_DELIMITED)


def load_external_data(onnx, model, path: Path) -> None:
    """The initializers kept in other files, looked up next to the model (as onnx.load does)."""
    from onnx.external_data_helper import load_external_data_for_model
    _check_external_files(model, path)
    try:
        load_external_data_for_model(model, str(path.parent))
    except FileNotFoundError as e:
        raise ModelFileError(f"cannot read {e.filename}: no such file (external data of "
                             f"{path}, looked up next to the model)", e.filename, e) from e
    except Exception as e:                      # onnx's checks of location, offset, length
        raise ModelError(f"{path}: cannot load its external data ({type(e).__name__}: "
                         f"{e})") from e


def _check_external_files(model, path: Path) -> None:
    """Each external data file a regular file (files.py): onnx would open a FIFO and wait for a
    writer forever, and read a link to /dev/zero without end when no length is given."""
    from onnx.external_data_helper import _get_all_tensors, uses_external_data
    for tensor in _get_all_tensors(model):
        if not uses_external_data(tensor):
            continue
        location = next((e.value for e in tensor.external_data if e.key == "location"), "")
        target = path.parent / location
        if not location or not os.path.lexists(target):
            continue                             # onnx says what is missing
        try:
            check_user_file(target)
        except OSError as e:
            raise ModelError(f"cannot read {target}: {e.strerror} (external data of {path}, "
                             f"initializer '{tensor.name}')") from e


def in_memory_model(onnx, proto) -> tuple:
    """(a copy of `proto`, the label errors name it by: `<ModelProto 'graph name'>`): a model
    made in memory is read as its file would be, and the copy keeps the caller's unchanged.
    Data kept in external files is refused: there is no model file to find them next to."""
    where = f"<ModelProto '{proto.graph.name or 'graph'}'>"
    from onnx.external_data_helper import _get_all_tensors, uses_external_data
    for tensor in _get_all_tensors(proto):
        if uses_external_data(tensor):
            location = next((e.value for e in tensor.external_data if e.key == "location"), "")
            raise ModelError(f"{where}: initializer '{tensor.name}' is kept in an external file "
                             f"({location}); give the path of the saved model instead, or "
                             f"load it with its data (onnx.load(path))")
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    return model, where
