"""Structural checks of an ONNX model, made before any node is translated.

The ONNX schema of each standard op, for the model's opset, says how many inputs and outputs a
node may have and which attributes it takes, of which type, and which are required: every node
of the standard domain is checked against it here, so that a translation (ops_*.py) may
index the inputs the schema requires and read its required attributes without a KeyError.
Tensors (initializers, Constant values) are checked against their dims before numpy sees them,
declared shapes against the bounds of limits.py, and every name for valid UTF-8 (protobuf hands
a name with invalid UTF-8 to Python as bytes).
"""
from __future__ import annotations

import sys
from functools import lru_cache

import numpy as np

from ... import dtypes
from ...errors import ModelError
from ..guard import located
from ..limits import check_shape, element_count

# ONNX TensorProto element types read here (dtypes.ONNX_TYPES) -> the typed field holding the
# values when there is no raw_data (raw_data holds the type's itemsize bytes per element)
TENSOR_FIELDS = {1: "float_data", 2: "int32_data", 3: "int32_data", 4: "int32_data",
                 5: "int32_data", 6: "int32_data", 7: "int64_data", 9: "int32_data",
                 10: "int32_data", 11: "double_data", 12: "uint64_data", 13: "uint64_data"}
MAX_OPSET = 1000      # ONNX is at 27; a larger version is a corrupt number, not a future opset


def enum_name(enum, value: int) -> str:
    """The enum's name for `value`, or 'unknown (value)' (Enum.Name raises on a stray number)."""
    try:
        return enum.Name(value)
    except ValueError:
        return f"unknown ({value})"


def check_text(message, where: str) -> None:
    """Every string field of the message and its sub-messages holds valid UTF-8."""
    for field, repeated in _text_and_message_fields(message.DESCRIPTOR):
        if repeated:
            items = getattr(message, field.name)
        elif message.HasField(field.name):
            items = (getattr(message, field.name),)
        else:
            continue
        if field.type == field.TYPE_STRING:
            for k, item in enumerate(items):
                if isinstance(item, bytes):
                    at = f"{field.name}[{k}]" if repeated else field.name
                    raise ModelError(f"{where}: {at} {item[:60]!r} is not valid UTF-8 text")
        else:
            for k, item in enumerate(items):
                check_text(item, _child(message, where, field.name, k if repeated else None,
                                        item))


@lru_cache(maxsize=None)
def _text_and_message_fields(descriptor) -> tuple:
    """(field, repeated) for the string and message fields of a message type, by number (the
    order ListFields gives). Only these are read: reading every field would copy each
    tensor's raw_data, a model's weights, for nothing."""
    fields = sorted((f for f in descriptor.fields
                     if f.type in (f.TYPE_STRING, f.TYPE_MESSAGE)), key=lambda f: f.number)
    return tuple((f, f.is_repeated if hasattr(f, "is_repeated") else f.label == 3)
                 for f in fields)


def _child(parent, where: str, field: str, index: int | None, item) -> str:
    """Where a sub-message is, for messages: a node by index, name and op_type."""
    if field == "node":
        name = item.name if isinstance(item.name, str) else "?"
        op = item.op_type if isinstance(item.op_type, str) else "?"
        return f"{where}: node {index} '{name}' ({op})"
    if field == "graph" and index is None and type(parent).__name__ == "ModelProto":
        return where                                   # the model's graph: the file says it
    return f"{where}: {field}" + (f"[{index}]" if index is not None else "")


def check_model(onnx, model, file: str) -> None:
    """What the whole model must satisfy before it is read: text, opsets, outputs."""
    check_text(model, file)
    for o in model.opset_import:
        if not 1 <= o.version <= MAX_OPSET:
            raise ModelError(f"{file}: opset_import of domain '{o.domain or 'ai.onnx'}' has "
                             f"version {o.version}; expected 1 to {MAX_OPSET}")
    if not model.HasField("graph"):
        raise ModelError(f"{file}: the model has no graph (is it an ONNX model?)")
    if not model.graph.output:
        raise ModelError(f"{file}: the model's graph has no outputs")


def schema_of(onnx, op_type: str, version: int | None):
    """ONNX's schema of a standard op for the opset `version` (None: the newest), or None when
    the op is not in that opset."""
    try:
        if version is None:
            return onnx.defs.get_schema(op_type, "")
        return onnx.defs.get_schema(op_type, version, "")
    except onnx.defs.SchemaError:
        return None


def check_attribute_types(onnx, node, where: str) -> None:
    """Each attribute has one known type and appears once (any domain)."""
    types = onnx.AttributeProto.AttributeType
    seen = set()
    for a in node.attribute:
        if a.name in seen:
            raise ModelError(f"{where}: attribute '{a.name}' is given twice")
        seen.add(a.name)
        if a.type == 0 or enum_name(types, a.type).startswith("unknown"):
            raise ModelError(f"{where}: attribute '{a.name}' has type "
                             f"{enum_name(types, a.type)}; expected one of ONNX's attribute "
                             f"types (INT, FLOAT, STRING, INTS, ...)")


def _optional(onnx, params, k: int) -> bool:
    """Whether formal parameter k of a schema may be left out (an empty name in a node): an
    LSTM or GRU without its output 0 is valid ONNX and reaches the translation, which names
    the op when it has none."""
    return k < len(params) and \
        params[k].option == onnx.defs.OpSchema.FormalParameterOption.Optional


def check_node(onnx, node, version: int | None, where: str) -> None:
    """A standard node against its op's schema: input and output counts, attribute names,
    types, required attributes."""
    schema = schema_of(onnx, node.op_type, version)
    if schema is None:
        newest = schema_of(onnx, node.op_type, None)
        first = next((v for v in range((version or 0) + 1, newest.since_version + 1)
                      if schema_of(onnx, node.op_type, v) is not None), None) if newest else None
        since = f" (it exists from opset {first} on)" if first else ""
        raise ModelError(f"{where}: {node.op_type} is not an op of opset {version} of the "
                         f"default domain, which the model imports{since}")
    label = f"{node.op_type}-{schema.since_version}"
    for kind, items, low, high in (("input", node.input, schema.min_input, schema.max_input),
                                   ("output", node.output, schema.min_output,
                                    schema.max_output)):
        if not low <= len(items) <= high:
            wanted = str(low) if low == high else (f"{low} or more" if high >= 2**31 - 1
                                                   else f"{low} to {high}")
            raise ModelError(f"{where}: has {len(items)} {kind}(s); {label} takes {wanted}")
    if node.output and not node.output[0] and not _optional(onnx, schema.outputs, 0):
        raise ModelError(f"{where}: output 0 ({schema.outputs[0].name}) has no name; "
                         f"{label} requires it")
    types = onnx.AttributeProto.AttributeType
    given = {a.name: a for a in node.attribute}
    for name, a in given.items():
        spec = schema.attributes.get(name)
        if spec is None:
            known = ", ".join(sorted(schema.attributes)) or "none"
            raise ModelError(f"{where}: {label} has no attribute '{name}'; its attributes: "
                             f"{known}")
        if int(a.type) != int(spec.type):
            raise ModelError(f"{where}: attribute '{name}' is of type "
                             f"{enum_name(types, a.type)}; {label} expects {spec.type.name}")
    missing = [n for n, spec in schema.attributes.items() if spec.required and n not in given]
    if missing:
        raise ModelError(f"{where}: {label} requires the attribute(s) {', '.join(missing)}, "
                         f"which the node does not give")


def tensor_array(onnx, proto, where: str, raw_data=None) -> np.ndarray:
    """A TensorProto's value, after its dims, element type and data length are checked.
    `raw_data` (bytes or a memoryview) stands for the proto's raw_data field where the reader
    left it in the file's bytes (file.py)."""
    from onnx import numpy_helper
    dims = [int(d) for d in proto.dims]
    check_shape(dims, where, "dims")
    kind = enum_name(onnx.TensorProto.DataType, proto.data_type)
    if proto.data_type not in TENSOR_FIELDS:
        raise ModelError(f"{where} has element type {kind}, which is not supported; supported: "
                         f"{dtypes.ONNX_SUPPORTED_TEXT}")
    if proto.HasField("segment"):
        raise ModelError(f"{where} is a segment of a tensor, which is not supported")
    if proto.data_location == onnx.TensorProto.EXTERNAL:
        raise ModelError(f"{where}: its external data was not loaded")
    count = element_count(dims)
    field = TENSOR_FIELDS[proto.data_type]
    itemsize = dtypes.itemsize_of(dtypes.ONNX_TYPES[proto.data_type])
    # protobuf hands out a new copy of raw_data at each read: it is read once, here
    raw = raw_data if raw_data is not None else \
        proto.raw_data if proto.HasField("raw_data") else None
    if raw is not None:
        have, want, unit = len(raw), count * itemsize, "bytes of raw_data"
    else:
        have, want, unit = len(getattr(proto, field)), count, f"values in {field}"
    if have != want:
        raise ModelError(f"{where}: holds {have} {unit}; dims {dims} of {kind} need {want}")
    with located(where):
        if raw is None:
            return numpy_helper.to_array(proto)
        # what numpy_helper.to_array does with raw_data (which ONNX stores little-endian)
        value = np.frombuffer(raw, dtype=onnx.helper.tensor_dtype_to_np_dtype(proto.data_type))
        if sys.byteorder == "big":
            value = value.byteswap()
        return value.reshape(dims)


def value_shape(vi, where: str) -> tuple | None:
    """A ValueInfo's shape: None when not given, a dim None when symbolic or not given; dims
    checked against the bounds."""
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    shape = tuple(d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim)
    check_shape(shape, where)
    return shape


def own_layer_hint(of_type: str) -> str:
    """How a user runs an op we have no translation for (the reader binds it to their loaded
    layer of that type); `of_type`: "type Trilu", "its type"."""
    return (f"run it as your own layer: a CustomLayer of {of_type} (-c config.xml) or a Python "
            f"layer (@cpu_layer, -l layers.py)")


def refuse_untranslated(named_nodes, is_custom, translated, file: str, known: list[str],
                        reasons=None) -> None:
    """Every standard op of the model with no translation, with its nodes, in one refusal
    (a model that needs several is told all it needs at once, not one op per attempt), and why
    where `reasons` (op -> text) says it. One node alone is left to the translation loop, which
    refuses it at the node with its own place."""
    reasons = reasons or {}
    missing: dict[str, list[str]] = {}
    for index, name, node in named_nodes:       # (index, the reader's name for it, node)
        if not is_custom(node) and node.op_type not in translated:
            missing.setdefault(node.op_type, []).append(f"{index} '{name}'")
    if sum(len(v) for v in missing.values()) < 2:
        return
    parts = []
    for op, where in sorted(missing.items()):
        shown = ", ".join(where[:5]) + (f" and {len(where) - 5} more" if len(where) > 5 else "")
        why = f"; {reasons[op]}" if op in reasons else ""
        parts.append(f"the ONNX op {op} has no translation "
                     f"(node{'s' if len(where) > 1 else ''} {shown}{why})")
    raise ModelError(f"{file}: {len(missing)} ONNX op type(s) of the model have no "
                     f"translation to IR ops here: {'; '.join(parts)}. For each, "
                     f"{own_layer_hint('its type')}; translated: {', '.join(known)}")


def element_types(model) -> dict[str, int]:
    """Value name -> TensorProto element type of the graph's tensors where the model (or
    inference) says it; 0 where it does not."""
    g = model.graph
    types = {vi.name: vi.type.tensor_type.elem_type
             for vi in list(g.input) + list(g.value_info) + list(g.output)}
    types.update((t.name, t.data_type) for t in g.initializer)
    return types


def check_input_types(onnx, node, version: int | None, elem_types: dict, where: str) -> None:
    """The inputs that a standard op's schema binds to one type variable (Add's A and B: T)
    have one element type, as ONNX's type rules say (ONNX Runtime refuses such a model too):
    a float32 score plus a float16 mask otherwise ran in the first input's type, or was refused
    by the later layer that had absorbed the Add, as an input the model does not have.
    `elem_types`: value name -> TensorProto element type, where the model or inference says."""
    schema = schema_of(onnx, node.op_type, version)
    if schema is None or not schema.inputs:
        return
    variables = {c.type_param_str for c in schema.type_constraints}
    variadic = onnx.defs.OpSchema.FormalParameterOption.Variadic
    last = schema.inputs[-1]
    first: dict[str, tuple[int, str, int]] = {}   # type variable -> (input, name, type)
    for i, name in enumerate(node.input):
        if i < len(schema.inputs):
            formal = schema.inputs[i]
        elif last.option == variadic and last.is_homogeneous:
            formal = last
        else:
            continue
        elem = elem_types.get(name, 0)
        if not name or not elem or formal.type_str not in variables:
            continue
        seen = first.setdefault(formal.type_str, (i, name, elem))
        if seen[2] != elem:
            raise ModelError(
                f"{where}: input {i} '{name}' is {_type_name(onnx, elem)}, input {seen[0]} "
                f"'{seen[1]}' {_type_name(onnx, seen[2])}; {node.op_type}-"
                f"{schema.since_version}'s inputs of type {formal.type_str} take one element "
                f"type: cast one of them")


def _type_name(onnx, elem: int) -> str:
    """numpy's name where there is one (float32, not ONNX's FLOAT), else ONNX's."""
    name = onnx.TensorProto.DataType.Name(elem)
    return {"FLOAT": "float32", "DOUBLE": "float64"}.get(name, name.lower())
