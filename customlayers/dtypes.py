"""The one table of element types: for each type the package holds, its short name (the spelling
used everywhere inside: TensorDesc.dtype, a graph Port's dtype, "f32", "i64" ...), numpy dtype,
OpenCL C type, size in bytes, OpenVINO IR spellings and ONNX TensorProto code.

Booleans have no type of their own: they are held as u8 (0 or 1). The BOOL_* names list the
spellings that name them in each format.

The lookups answer a short name, or None where a spelling names no type here: each caller words
its own refusal (and says where), since a model's precision and a kernel's argument type are
refused in different words.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ElementType:
    name: str                      # the short name
    np_dtype: np.dtype
    cl_type: str                   # OpenCL C
    itemsize: int                  # bytes per element (on the host and on the device)
    is_float: bool
    onnx: int                      # ONNX TensorProto.DataType
    onnx_name: str                 # its name there
    ir_precision: str | None       # IR port precision; None: the IR reader refuses the type
    ir_element_type: str | None    # IR Const/Parameter element_type (Convert's destination_type)
    # a <T>_TYPE of the custom-layer contract (SPEC section 3: float|half|char|uchar|int|long);
    # the wider integers are built-in ops' only, so that a layer's kernel never meets a type the
    # contract does not name (the layer is refused with the list instead)
    custom_layer: bool
    aliases: tuple[str, ...]       # other names of it (lower case) that a user may write


TYPES: tuple[ElementType, ...] = (
    ElementType("f32", np.dtype(np.float32), "float", 4, True, 1, "FLOAT", "FP32", "f32", True,
                ("fp32", "float32", "float")),
    ElementType("f16", np.dtype(np.float16), "half", 2, True, 10, "FLOAT16", "FP16", "f16", True,
                ("fp16", "float16", "half")),
    ElementType("i8", np.dtype(np.int8), "char", 1, False, 3, "INT8", "I8", "i8", True,
                ("int8", "char")),
    ElementType("u8", np.dtype(np.uint8), "uchar", 1, False, 2, "UINT8", "U8", "u8", True,
                ("uint8", "uchar")),
    ElementType("i16", np.dtype(np.int16), "short", 2, False, 5, "INT16", "I16", "i16", False,
                ("int16", "short")),
    ElementType("u16", np.dtype(np.uint16), "ushort", 2, False, 4, "UINT16", "U16", "u16", False,
                ("uint16", "ushort")),
    ElementType("i32", np.dtype(np.int32), "int", 4, False, 6, "INT32", "I32", "i32", True,
                ("int32", "int")),
    ElementType("u32", np.dtype(np.uint32), "uint", 4, False, 12, "UINT32", "U32", "u32", False,
                ("uint32", "uint")),
    ElementType("i64", np.dtype(np.int64), "long", 8, False, 7, "INT64", "I64", "i64", True,
                ("int64", "long")),
    ElementType("u64", np.dtype(np.uint64), "ulong", 8, False, 13, "UINT64", "U64", "u64", False,
                ("uint64", "ulong")),
    # built-in ops only (ONNX DOUBLE models); needs cl_khr_fp64, which the Network checks
    ElementType("f64", np.dtype(np.float64), "double", 8, True, 11, "DOUBLE", None, None, False,
                ("fp64", "float64", "double")),
)
BY_NAME: dict[str, ElementType] = {t.name: t for t in TYPES}
NAMES = tuple(BY_NAME)
# the element types the contract gives custom layers (SPEC section 3, <T>_TYPE)
CUSTOM_LAYER_DTYPES = tuple(t.name for t in TYPES if t.custom_layer)

# booleans, held as u8
BOOL_HELD_AS = "u8"
BOOL_NP_DTYPE = np.dtype(np.bool_)
BOOL_ONNX, BOOL_ONNX_NAME = 9, "BOOL"
BOOL_IR_PRECISIONS = ("BOOL", "BOOLEAN")
BOOL_IR_ELEMENT_TYPE = "boolean"
BOOL_ALIASES = ("boolean", "bool")

# the order in which refusals list the types a format may name (users and tests read them so)
_IR_ORDER = ("f32", "f16", "i64", "i32", "i16", "i8", "u64", "u32", "u16", "u8")
_ONNX_ORDER = ("f32", "f16", "f64", "i64", "i32", "i16", "i8", "u64", "u32", "u16", "u8")

# IR port precision (upper case) -> short name
IR_PRECISIONS: dict[str, str] = {
    **{BY_NAME[n].ir_precision: n for n in _IR_ORDER},  # type: ignore[misc]
    **dict.fromkeys(BOOL_IR_PRECISIONS, BOOL_HELD_AS)}
# IR Const/Parameter element_type (lower case) -> short name
IR_ELEMENT_TYPES: dict[str, str] = {
    **{BY_NAME[n].ir_element_type: n for n in _IR_ORDER},  # type: ignore[misc]
    BOOL_IR_ELEMENT_TYPE: BOOL_HELD_AS}
# ONNX TensorProto element type -> short name
ONNX_TYPES: dict[int, str] = {**{t.onnx: t.name for t in TYPES}, BOOL_ONNX: BOOL_HELD_AS}
ONNX_SUPPORTED_TEXT = ", ".join([BY_NAME[n].onnx_name for n in _ONNX_ORDER] + [BOOL_ONNX_NAME])

_BY_ALIAS = {**{t.name: t.name for t in TYPES}, **{a: t.name for t in TYPES for a in t.aliases},
             **dict.fromkeys(BOOL_ALIASES, BOOL_HELD_AS)}
_BY_CL_TYPE = {t.cl_type: t.name for t in TYPES}


def from_text(text: str) -> str | None:
    """A written element type ('f32', 'FP32', 'float32', 'float', 'bool' ...) -> short name."""
    return _BY_ALIAS.get(text.strip().lower())


def from_numpy(dtype) -> str | None:
    """A numpy dtype (or anything np.dtype takes) -> short name; bool -> u8."""
    try:
        npd = np.dtype(dtype)
    except TypeError:
        return None
    if npd == BOOL_NP_DTYPE:
        return BOOL_HELD_AS
    return next((t.name for t in TYPES if t.np_dtype == npd), None)


def from_cl_type(cl_type: str) -> str | None:
    """An OpenCL C scalar type ('float', 'long' ...) -> short name."""
    return _BY_CL_TYPE.get(cl_type)


def numpy_of(name: str) -> np.dtype:
    return BY_NAME[name].np_dtype


def cl_type_of(name: str) -> str:
    return BY_NAME[name].cl_type


def itemsize_of(name: str) -> int:
    return BY_NAME[name].itemsize


def is_float(name: str) -> bool:
    """Whether `name` is a floating-point type (False for any other string)."""
    t = BY_NAME.get(name)
    return t is not None and t.is_float
