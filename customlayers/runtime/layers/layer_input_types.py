"""The element type each input (and Data blob) of a loaded layer takes when it runs alone, with
no model around it to say (`run-layer`).

A descriptor declares no types: the contract compiles a layer for the tensors it is given
(INPUT0_TYPE ...). In a model, the model decides; alone, the array file would, and an int32
.npy compiled a float layer for int (Mish returned integers), a bool one ran it as uchar. So
the layer decides:

- a kernel argument declared with a concrete element type (`__global const half* x`, as every
  MVCL kernel and many SimpleGPU ones are) takes that type;
- a generic one (INPUT0_TYPE: a macro the scanner cannot see through) takes a float array as it
  is (float32 or half, both types a float layer is written for) and runs anything else (integer,
  bool) in float32, the type custom layers run in;
- one declared with a type no contract tensor has (uint, short ...) takes the array as it is
  (KEEP): the binding then says what it accepts.
"""
from __future__ import annotations

import re
from typing import Mapping

import numpy as np

from ...config.kernel_signature import (FLOAT_TYPES, INTEGER_TYPES, KernelParameter,
                                       find_kernel_parameters)
from ...config.mvcl.spec import MvclData, MvclTensor
from ...dtypes import from_cl_type, numpy_of

DEFAULT = np.dtype(np.float32)
KEEP = "keep"                          # declared, in a type no contract tensor has
_VECTOR = re.compile(r"^([a-z]+?)(2|3|4|8|16)?$")


def declared_types(spec, params: Mapping[str, str]
                   ) -> tuple[dict[int, object], dict[str, object]]:
    """({input port: dtype or KEEP}, {Data blob name: dtype or KEEP}) for the arguments whose
    kernel declares a concrete element type; the others are left out (generic)."""
    from .dialects import runtime_of
    return runtime_of(spec).declared_types(spec, params)


def stage_declared_types(spec, params: Mapping[str, str]
                         ) -> tuple[dict[int, object], dict[str, object]]:
    """declared_types of an MVCL layer: its stages' kernels for the variant of `params`."""
    inputs: dict[int, np.dtype] = {}
    data: dict[str, np.dtype] = {}
    from .mvcl_build import select_stages
    for stage in select_stages(spec, params):
        for k, p in stage.arguments:
            dtype = _element_type(k)
            if dtype is None:
                continue
            if isinstance(p, MvclTensor) and p.kind == "input":
                inputs.setdefault(p.port_index, dtype)
            elif isinstance(p, MvclData):
                data.setdefault(p.blob, dtype)
    return inputs, data


def kernel_declared_types(spec) -> tuple[dict[int, object], dict[str, object]]:
    """declared_types of a SimpleGPU layer: its one kernel's parameters."""
    inputs: dict[int, np.dtype] = {}
    data: dict[str, np.dtype] = {}
    kernel = find_kernel_parameters([s.text for s in spec.sources], spec.entry) or ()
    by_position = {k.position: k for k in kernel}
    for t in spec.inputs:
        dtype = _element_type(by_position.get(t.arg_index))
        if dtype is not None:
            inputs[t.port_index] = dtype
    for d in spec.data:
        dtype = _element_type(by_position.get(d.arg_index))
        if dtype is not None:
            data[d.name] = dtype
    return inputs, data


def _element_type(k: KernelParameter | None):
    """The dtype `k` declares, KEEP for a C scalar type with no tensor type, None (generic) for
    anything else (a macro, a struct)."""
    if k is None or not k.is_pointer:
        return None
    m = _VECTOR.match(k.base_type)
    if m is None:
        return None
    # (bool: a kernel's bool* is not a buffer type; unsigned ones have no tensor type of the
    # contract: KEEP)
    name = from_cl_type(m.group(1))
    if name is not None:
        return numpy_of(name)
    return KEEP if m.group(1) in INTEGER_TYPES | FLOAT_TYPES else None


def type_to_take(declared, given: np.dtype) -> np.dtype:
    """The type an array of `given` type runs in, for an argument declared `declared` (None:
    generic; KEEP: as given)."""
    if declared is KEEP:
        return given
    if declared is not None:
        return declared
    if given.kind == "f" and given.itemsize <= 4:
        return given                   # float32 or half, as given
    return DEFAULT                     # float64 (no double in custom layers), integers, bool
