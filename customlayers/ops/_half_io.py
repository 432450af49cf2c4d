"""How the map kernels (unary_map.cl, binary_map.cl) and the copying kernels hold float16
tensors: as float values read with vload_half and written with vstore_half_rte, or as their bits
(ushort). Both are core OpenCL C, so a half tensor needs no cl_khr_fp16 there: without the
extension `half` may name a pointer's target, never a value (OpenCL C 1.2, 6.1.1.1).
"""
from __future__ import annotations

from ..jit.tensor import TensorDesc


def moved_type(desc: TensorDesc) -> str:
    """The OpenCL C type a kernel that only moves elements (Concat, Gather) declares: a half
    tensor's bits as ushort, which needs no cl_khr_fp16 (a half value does)."""
    return "ushort" if desc.dtype == "f16" else desc.cl_type


# float_compute's conversions of a half value, which the map kernels make themselves
HALF_LOAD, HALF_STORE = "convert_float(v)", "convert_half(v)"


def half_read(name: str, value: str, desc: TensorDesc) -> dict[str, str]:
    """A map kernel's macros that read a half tensor as float (vload_half; none for others)."""
    if desc.dtype != "f16":
        return {}
    return {f"{name}(p, k)": "vload_half(k, p)", value: "float"}


def half_write(dst: TensorDesc, store: str | None) -> tuple[dict[str, str], str | None]:
    """(macros, store) of a map kernel writing `dst`: a half tensor takes float values through
    vstore_half_rte (round to nearest even, as a conversion to half does)."""
    if dst.dtype != "f16":
        return {}, store
    return {"WRITE_OUT(p, k, v)": "vstore_half_rte(v, k, p)"}, \
        "((float)(v))" if store in (None, HALF_STORE) else store


def half_load(desc: TensorDesc, load: str | None) -> str | None:
    """A map kernel's LOAD of `desc`: float_compute's widening is dropped for half, which the
    kernel reads as float already."""
    return None if desc.dtype == "f16" and load == HALF_LOAD else load
