"""The `#define`s of a custom layer's program (SPEC section 3): built-in and user defines.

Both functions return (name, value) pairs in program order; program.py renders them. Values are
text: user attribute text is kept exactly as the model wrote it (OpenVINO rounded floats to six
decimals, so `1e-7` became `0`; we never convert a number).
"""
from __future__ import annotations

from typing import Mapping, Sequence

from ..config.simplegpu.define_values import as_c, check_define_value, control_problem, shown
from ..config.simplegpu.spec import DefineSpec, LayerSpec
from ..errors import DefineError, TensorError
from .tensor import TensorDesc


def user_define_value(define: DefineSpec, params: Mapping[str, str],
                      layer: str) -> tuple[str, str]:
    """One Define -> (name, value). DefineError when the value does not fit the type."""
    name_problem = control_problem(define.name)
    if name_problem:
        raise DefineError(f"{define.location}: layer '{layer}', define '{shown(define.name)}': "
                          f"the name is refused: {name_problem}")
    if define.param is not None and define.param in params:
        value = params[define.param]
        origin = f"attribute {define.param}=\"{shown(value)}\""
    elif define.default is not None:
        value, origin = define.default, f"default=\"{shown(define.default)}\""
    else:
        return define.name, ""          # OpenVINO's Tile relies on this empty define
    problem = check_define_value(value, define.type)
    if problem:
        raise DefineError(f"{define.location}: layer '{layer}', define '{define.name}' "
                          f"(type {define.type}): {origin} does not fit: {problem}")
    return define.name, as_c(value, define.type)


def user_defines(spec: LayerSpec, params: Mapping[str, str]) -> list[tuple[str, str]]:
    """The layer's Defines in document order, with values from the model's attributes."""
    return [user_define_value(d, params, spec.name) for d in spec.defines]


# -- built-in defines --------------------------------------------------------------------------
def _array(name: str, c_type: str, values: Sequence[int]) -> list[tuple[str, str]]:
    """NAME_SIZE, NAME as a compound literal, NAME_INIT as an initializer list.

    Spacing is OpenVINO's: `(int []){ 1,3,224,224, }` and, when empty, `(ulong []){  }`."""
    body = "".join(f"{int(v)}," for v in values)
    return [
        (f"{name}_SIZE", str(len(values))),
        (name, f"({c_type} []){{ {body} }}"),
        (f"{name}_INIT", f"{{ {body} }}"),
    ]


INT_MAX = 2 ** 31 - 1   # the arrays are (int []) and OFFSET is used as an int in kernels


def _check_int_range(prefix: str, desc: TensorDesc) -> None:
    """A value over INT_MAX would be emitted as is and wrap (or be a long) in the kernel."""
    values = [("DIMS", desc.dims), ("LOWER_PADDING", desc.lower_pad),
              ("UPPER_PADDING", desc.upper_pad), ("PITCHES", desc.pitches),
              ("OFFSET", (desc.offset,))]
    for name, vals in values:
        for v in vals:
            if v > INT_MAX:
                raise TensorError(f"tensor {prefix} ({desc.describe()}): {prefix}_{name} would "
                                  f"hold {v}, over {INT_MAX}, the largest OpenCL C int")


def tensor_defines(prefix: str, desc: TensorDesc) -> list[tuple[str, str]]:
    """The defines of one tensor, e.g. prefix 'INPUT0'. TensorError when a value does not fit
    the int the contract declares it as."""
    _check_int_range(prefix, desc)
    out = _array(f"{prefix}_DIMS", "int", desc.dims)
    out.append((f"{prefix}_TYPE", desc.cl_type))
    out.append((f"{prefix}_FORMAT_{desc.format}", ""))
    out += _array(f"{prefix}_LOWER_PADDING", "int", desc.lower_pad)
    out += _array(f"{prefix}_UPPER_PADDING", "int", desc.upper_pad)
    out += _array(f"{prefix}_PITCHES", "int", desc.pitches)
    out.append((f"{prefix}_OFFSET", str(desc.offset)))
    return out


def builtin_defines(inputs: Sequence[TensorDesc], outputs: Sequence[TensorDesc],
                    global_size: Sequence[int],
                    local_size: Sequence[int] | None) -> list[tuple[str, str]]:
    """NUM_INPUTS, the work sizes, then INPUT0.., OUTPUT0.. (SPEC section 3, in its order).

    `inputs` are all INPUTk tensors: the real inputs by port, then the Data blobs."""
    out = [("NUM_INPUTS", str(len(inputs)))]
    out += _array("GLOBAL_WORKSIZE", "ulong", list(global_size))
    out += _array("LOCAL_WORKSIZE", "ulong", list(local_size or ()))
    for i, desc in enumerate(inputs):
        out += tensor_defines(f"INPUT{i}", desc)
    for i, desc in enumerate(outputs):
        out += tensor_defines(f"OUTPUT{i}", desc)
    return out


def render_define(name: str, value: str, *, user: bool = False) -> str:
    """`#define NAME VALUE`. A built-in define without a value (the FORMAT flag) has no trailing
    space; a user define without one keeps OpenVINO's `#define NAME ` (SPEC section 3)."""
    if value or user:
        return f"#define {name} {value}"
    return f"#define {name}"
