"""The built-in op interface and its registry.

A built-in op is a small class: it declares its attributes as data (checked when the model is
loaded, not when it runs), infers output shapes, and describes its work as KernelLaunch values
(runtime/launch.py), the same currency custom layers use. Register with `@register_op`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import BindingError, UnknownLayerError
from ..jit.tensor import TensorDesc
from ..runtime.launch import KernelLaunch


@dataclass(frozen=True)
class Attr:
    """An op attribute: IR text -> a Python value with `kind`.

    kind: "int" | "float" | "str" | "bool" | "ints" (comma-separated ints) | "floats".
    """
    name: str
    kind: str
    default: Any = None
    required: bool = False


def parse_attr(attr: Attr, text: str | None, op_type: str, layer: str) -> Any:
    """IR attribute text -> value; BindingError naming layer, attribute, expected and found."""
    if text is None:
        if attr.required:
            raise BindingError(f"layer '{layer}' ({op_type}): attribute '{attr.name}' is required")
        return attr.default
    t = text.strip()
    try:
        if attr.kind == "int":
            return int(t)
        if attr.kind == "float":
            return float(t)
        if attr.kind == "bool":
            if t.lower() in ("true", "1"):
                return True
            if t.lower() in ("false", "0"):
                return False
            raise ValueError(t)
        if attr.kind == "ints":
            return tuple(int(v) for v in t.split(",") if v.strip()) if t else ()
        if attr.kind == "floats":
            return tuple(float(v) for v in t.split(",") if v.strip()) if t else ()
        return t
    except ValueError:
        raise BindingError(f"layer '{layer}' ({op_type}): attribute '{attr.name}'='{text}' is not "
                           f"a valid {attr.kind}") from None


class Op:
    """Base of built-in ops. Subclasses set `type` and `attributes` and implement the rest."""
    type: str = ""
    attributes: tuple[Attr, ...] = ()
    # inputs whose values must be constants known at compile time (e.g. Reshape's target shape)
    const_inputs: tuple[int, ...] = ()
    # True when output 0 is input 0's buffer under another shape (Reshape, Squeeze, ...): no kernel
    is_view: bool = False

    def parse_attributes(self, raw: Mapping[str, str], layer: str) -> dict[str, Any]:
        return {a.name: parse_attr(a, raw.get(a.name), self.type, layer) for a in self.attributes}

    def infer_shapes(self, attrs: dict[str, Any], inputs: Sequence[TensorDesc],
                     consts: Mapping[int, np.ndarray]) -> list[tuple[tuple[int, ...], str]]:
        """Output (shape, dtype) for each output port. `consts` holds constant input values."""
        raise NotImplementedError

    def launches(self, attrs: dict[str, Any], inputs: Sequence[TensorDesc],
                 outputs: Sequence[TensorDesc],
                 consts: Mapping[int, np.ndarray]) -> list[KernelLaunch]:
        """The kernels that compute the outputs from the inputs, in order (dense BFYX f32
        tensors unless the op says otherwise)."""
        raise NotImplementedError


OPS: dict[str, Op] = {}


def register_op(cls: type[Op]) -> type[Op]:
    """Class decorator: register one instance of the op under its `type`."""
    if not cls.type:
        raise TypeError(f"{cls.__name__} has no type")
    if cls.type in OPS:  # two modules claiming one type: the second would silently win
        raise TypeError(f"op type '{cls.type}' is registered twice ({type(OPS[cls.type]).__name__} "
                        f"and {cls.__name__})")
    OPS[cls.type] = cls()
    return cls


def get_op(op_type: str) -> Op:
    try:
        return OPS[op_type]
    except KeyError:
        raise UnknownLayerError(f"no built-in op of type '{op_type}'; known: "
                                f"{', '.join(sorted(OPS))}") from None
