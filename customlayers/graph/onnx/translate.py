"""What the ONNX -> IR op translations share: @translates, which registers them, and the
helpers they read nodes and emit IR with.

A translation is f(reader, node, name, attrs), registered for its ONNX op types with
@translates; it reads the ONNX node (attrs decoded by onnx.helper) and emits IR nodes through
reader.emit / reader.const, so the IR ops and attribute text the built-in ops read come out
(ints "1, 1", floats as the shortest float32 text). The translations live by kind of op in
the modules of ops/ (nn.py, tensor.py, arith.py, ...), which import this module; it imports none of them.
The table the reader asks is assembled in table.py, which imports them all.

Before a translation runs, the reader has checked the node against ONNX's schema of its op for
the model's opset (checks.check_node): the input and output counts, the attribute names and
types, the required attributes. So a translation may index the inputs the schema requires and
read the attributes it requires; optional inputs go through optional_input / const_input, and
the values (an axis, a group, a perm, pads per axis, a constant's contents) are checked here with
refuse, axis_in, spatial and text_attr before they are used.
"""
from __future__ import annotations

import numpy as np

from ... import dtypes

# ONNX op_type -> translation, filled by @translates as the op modules are imported; read it
# through table.TRANSLATIONS, which is sure to have imported them all
REGISTERED: dict = {}


# ONNX op_type -> why it has no translation (an op that cannot run here as a built-in, left
# untranslated so that a user's own layer of that type still binds to it); the reader's
# refusal says it
NOT_TRANSLATED: dict[str, str] = {}


def not_translated(op_type: str, why: str) -> None:
    """Record why `op_type` is left without a translation, for the reader's refusal."""
    NOT_TRANSLATED[op_type] = why


def ints_text(values) -> str:
    return ", ".join(str(int(v)) for v in values)


def float_text(value) -> str:
    """Shortest text that reads back as the same float32 (3e-08, not 2.9999999e-08)."""
    return str(np.float32(value))


def translates(*op_types):
    """Register the decorated translation for `op_types`. An op registered twice is a
    programming error (two tables that drifted apart), refused when the module is imported."""
    def register(fn):
        for op in op_types:
            if op in REGISTERED:
                raise ValueError(f"ONNX op {op} has two translations: {REGISTERED[op].__name__} "
                                 f"and {fn.__name__}")
            REGISTERED[op] = fn
        return fn
    return register


def spatial(r, attrs: dict, key: str, rank: int, default: int) -> list[int]:
    """An ints attribute with one value per spatial axis (pads: two), or the default."""
    values = list(attrs.get(key) or [default] * rank)
    if len(values) != rank:
        r.refuse(f"'{key}' has {len(values)} values; {rank} are needed here")
    return values


def text_attr(r, attrs: dict, key: str, default: str, allowed=None) -> str:
    """A string attribute as text, refused when not UTF-8 or (given `allowed`) not one of them."""
    value = attrs.get(key, default)
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            r.refuse(f"attribute '{key}' is not UTF-8 text: {value[:40]!r}")
    if allowed is not None and value not in allowed:
        r.refuse(f"attribute {key}='{value[:40]}' is not one of "
                 f"{', '.join(repr(a) for a in allowed)}")
    return value


def axis_in(r, axis: int, rank: int, what: str = "axis", end: bool = False) -> int:
    """`axis` (negative counts from the end) normalized into 0..rank-1 (0..rank with `end`:
    an axis between two, as Flatten's)."""
    high = rank if end else rank - 1
    if not -rank <= int(axis) <= high:
        r.refuse(f"{what} {axis} is out of range for rank {rank} (expected {-rank} to {high})")
    return int(axis) + rank if axis < 0 else int(axis)


def reshaped(r, value: str, shape: list[int], name: str) -> str:
    """`value` viewed with `shape` (one dim may be -1: what the others leave): folded when
    constant, else a Reshape node."""
    folded = r.folded(value)
    if folded is not None:
        try:
            return r.const(name, folded.reshape(shape))
        except ValueError:
            r.refuse(f"'{value}' of shape {list(folded.shape)} cannot be viewed as {shape}")
    r.emit("Reshape", [value, r.const(f"{name}/shape", np.array(shape, np.int64))], [name], name,
           attrs={"special_zero": "false"}, shapes=[_declared(r.known_shape(value), shape)])
    return name


def _declared(given: tuple | None, shape: list[int]) -> tuple:
    """The output shape a Reshape to `shape` declares: its -1 worked out from the input's
    shape where that is known, else left unknown (None), never declared as -1."""
    if -1 not in shape:
        return tuple(shape)
    rest = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
    if given is None or any(d is None for d in given) or rest == 0:
        return tuple(None if d == -1 else d for d in shape)
    return tuple(int(np.prod(given, dtype=np.int64)) // rest if d == -1 else d for d in shape)


def optional_input(node, k: int) -> str | None:
    """Input k of the node, or None when absent (past the end or an empty name)."""
    return node.input[k] if len(node.input) > k and node.input[k] else None


def const_input(r, node, k: int, what: str) -> np.ndarray:
    if optional_input(node, k) is None:
        r.refuse(f"the {what} (input {k}) is missing")
    value = r.folded(node.input[k])
    if value is None:
        r.refuse(f"the {what} (input {k}) must be a constant (an initializer or folded "
                 f"Constant), as the built-in op bakes it into its program")
    return value


def dtype_of(r, value: str) -> str:
    """The element type of a value ('f32', 'i64', ...; '' when unknown): a folded constant's,
    the producing IR node's output, else what the model declares."""
    folded = r.folded(value)
    if folded is not None:
        return dtypes.from_numpy(folded.dtype) or ""
    name = r.alias.get(value, value)
    source = r.values.get(name)
    if source is not None:
        return r.graph.nodes[source[0]].outputs[source[1]].dtype or ""
    return r.info.get(name, (None, ""))[1]


def rank_of(r, value: str, why: str) -> int:
    shape = r.shape_of(value)
    if not shape:
        r.refuse(f"{why} needs the rank of '{value}', which shape inference did not give")
    return len(shape)


def intermediate(r, op_type: str, inputs: list[str], name: str, shape, attrs=None) -> str:
    """An intermediate IR node with one output named `name`, of `shape` (None = unknown)."""
    r.emit(op_type, inputs, [name], name, attrs=attrs, shapes=[shape])
    return name


def keep_axes(shape, axes) -> tuple | None:
    """`shape` reduced over `axes` with the reduced dims kept as 1."""
    if shape is None or not shape:
        return None
    return tuple(1 if i in axes else d for i, d in enumerate(shape))



def legacy_broadcast(r, a: str, b: str, axis, name: str) -> str:
    """Opset < 7 `broadcast=1`: B (of lower rank) lines up with A's axes from `axis`
    (default: with A's last axes, which is numpy's rule). Numpy broadcasting aligns at the
    end, so B is reshaped with trailing 1s."""
    if axis is None:
        return b
    shape_a, shape_b = r.known_shape(a), r.known_shape(b)
    if shape_a is None or shape_b is None or any(d is None for d in shape_b):
        r.refuse(f"legacy broadcasting (broadcast=1 with axis, opset < 7) needs the ranks "
                 f"of both inputs and B's shape; found {shape_a} and {shape_b}")
    axis = int(axis) + len(shape_a) if int(axis) < 0 else int(axis)
    if not 0 <= axis <= len(shape_a) - len(shape_b):
        r.refuse(f"legacy broadcasting: B of shape {list(shape_b)} does not fit A of "
                 f"shape {list(shape_a)} from axis {axis}")
    target = tuple(shape_b) + (1,) * (len(shape_a) - axis - len(shape_b))
    if target == tuple(shape_b):
        return b
    return reshaped(r, b, list(target), f"{name}/broadcast_b")
