"""TensorDesc: the one description of a tensor, used by the JIT, the executor and the tests.

A tensor has a logical shape (rank 0 to 4 for custom layers; built-in ops may use up to
MAX_RANK dense dims), which the OpenVINO contract always views as four
dims in B,F,Y,X order (a lower rank is padded with 1 at the end), an element type, a memory
format (the order of the four dims in memory, outermost first) and lower/upper padding per dim.
Pitches are in elements over the padded sizes; OFFSET is where element (0,0,0,0) lives.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .. import dtypes
from ..errors import TensorError

MAX_RANK = 8  # built-in ops see up to 8 dims; custom layers only the 4-D B,F,Y,X view

# memory order of each format, outermost first, as indices into (b, f, y, x)
FORMAT_ORDER: dict[str, tuple[int, int, int, int]] = {
    "BFYX": (0, 1, 2, 3),
    "BYXF": (0, 2, 3, 1),
    "YXFB": (2, 3, 1, 0),
    "FYXB": (1, 2, 3, 0),
}


def normalize_dtype(dtype) -> str:
    """'f32', 'float32', np.float32 ... -> the short name (dtypes.py); TensorError when
    unsupported."""
    name = dtypes.from_text(dtype) if isinstance(dtype, str) else dtypes.from_numpy(dtype)
    if name is None:
        raise TensorError(f"element type {dtype!r} is not one of {', '.join(dtypes.NAMES)}")
    return name


def normalize_format(fmt: str) -> str:
    """Upper- or lower-case spelling (not mixed) -> upper case; TensorError otherwise."""
    if fmt in FORMAT_ORDER:
        return fmt
    if fmt.lower() == fmt and fmt.upper() in FORMAT_ORDER:
        return fmt.upper()
    raise TensorError(f"format {fmt!r} is not one of {', '.join(FORMAT_ORDER)} (or lower case)")


def _four(values, what: str) -> tuple[int, int, int, int]:
    vals = tuple(int(v) for v in values)
    if len(vals) != 4:
        raise TensorError(f"{what} needs 4 values in B,F,Y,X order, found {len(vals)}")
    if any(v < 0 for v in vals):
        raise TensorError(f"{what} must not be negative, found {list(vals)}")
    return vals  # type: ignore[return-value]


@dataclass(frozen=True)
class TensorDesc:
    shape: tuple[int, ...]                      # logical shape, rank 0..4
    dtype: str = "f32"                          # short name (dtypes.py)
    format: str = "BFYX"                        # key of FORMAT_ORDER
    lower_pad: tuple[int, int, int, int] = (0, 0, 0, 0)   # B,F,Y,X
    upper_pad: tuple[int, int, int, int] = (0, 0, 0, 0)

    def __post_init__(self):
        shape = tuple(int(d) for d in self.shape)
        if len(shape) > MAX_RANK:
            raise TensorError(f"rank {len(shape)} is over {MAX_RANK} (shape {list(shape)})")
        # a 0 dim is a tensor with no element (ONNX allows them); the runtime launches nothing
        # for it and gives it no buffer (runtime/compile/compiled_values.py)
        if any(d < 0 for d in shape):
            raise TensorError(f"no dim may be negative, found shape {list(shape)}")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", normalize_dtype(self.dtype))
        object.__setattr__(self, "format", normalize_format(self.format))
        object.__setattr__(self, "lower_pad", _four(self.lower_pad, "lower padding"))
        object.__setattr__(self, "upper_pad", _four(self.upper_pad, "upper padding"))
        if len(shape) > 4 and (self.format != "BFYX" or any(self.lower_pad) or any(self.upper_pad)):
            raise TensorError(f"a tensor of rank {len(shape)} can only be dense BFYX: formats and "
                              f"padding are defined on the 4-D B,F,Y,X view")

    # -- the B,F,Y,X view ------------------------------------------------------------------
    # (the derived sizes are computed once per desc: a frozen desc never changes, and a run
    # asks for them on every inference, the planner thousands of times per model)
    @cached_property
    def dims(self) -> tuple[int, int, int, int]:
        """The four B,F,Y,X dims (rank below 4 padded with 1 at the end)."""
        if len(self.shape) > 4:
            raise TensorError(f"shape {list(self.shape)} has rank {len(self.shape)}: the B,F,Y,X "
                              f"view that custom layers see holds at most 4 dims")
        return tuple(self.shape) + (1,) * (4 - len(self.shape))  # type: ignore[return-value]

    @cached_property
    def padded_dims(self) -> tuple[int, int, int, int]:
        return tuple(d + lo + up for d, lo, up in
                     zip(self.dims, self.lower_pad, self.upper_pad))  # type: ignore[return-value]

    @cached_property
    def pitches(self) -> tuple[int, int, int, int]:
        """Element distance between neighbours in each of B,F,Y,X."""
        padded = self.padded_dims
        pitch = [0, 0, 0, 0]
        step = 1
        for axis in reversed(FORMAT_ORDER[self.format]):
            pitch[axis] = step
            step *= padded[axis]
        return tuple(pitch)  # type: ignore[return-value]

    @cached_property
    def offset(self) -> int:
        return sum(p * lo for p, lo in zip(self.pitches, self.lower_pad))

    @cached_property
    def count(self) -> int:
        """Number of logical elements."""
        n = 1
        for d in self.shape:
            n *= d
        return n

    @cached_property
    def buffer_count(self) -> int:
        """Number of elements in the (padded) buffer."""
        if len(self.shape) > 4:
            return self.count
        n = 1
        for d in self.padded_dims:
            n *= d
        return n

    @cached_property
    def itemsize(self) -> int:
        return dtypes.itemsize_of(self.dtype)

    @cached_property
    def nbytes(self) -> int:
        return self.buffer_count * self.itemsize

    @property
    def cl_type(self) -> str:
        return dtypes.cl_type_of(self.dtype)

    @cached_property
    def np_dtype(self) -> np.dtype:
        return dtypes.numpy_of(self.dtype)

    @cached_property
    def is_padded(self) -> bool:
        return any(self.lower_pad) or any(self.upper_pad)

    @cached_property
    def is_plain(self) -> bool:
        """Dense BFYX without padding: the buffer is the logical array in C order."""
        return self.format == "BFYX" and not self.is_padded

    # -- variants --------------------------------------------------------------------------
    def with_format(self, fmt: str) -> "TensorDesc":
        return TensorDesc(self.shape, self.dtype, fmt, self.lower_pad, self.upper_pad)

    def with_padding(self, lower=(0, 0, 0, 0), upper=(0, 0, 0, 0)) -> "TensorDesc":
        return TensorDesc(self.shape, self.dtype, self.format, tuple(lower), tuple(upper))

    def with_shape(self, shape) -> "TensorDesc":
        return TensorDesc(tuple(shape), self.dtype, self.format, self.lower_pad, self.upper_pad)

    def with_dtype(self, dtype) -> "TensorDesc":
        return TensorDesc(self.shape, dtype, self.format, self.lower_pad, self.upper_pad)

    def plain(self) -> "TensorDesc":
        return TensorDesc(self.shape, self.dtype)

    # -- host conversion -------------------------------------------------------------------
    def _memory_shape(self) -> tuple[int, ...]:
        padded = self.padded_dims
        return tuple(padded[a] for a in FORMAT_ORDER[self.format])

    def pack(self, array: np.ndarray, fill=0) -> np.ndarray:
        """Logical array -> the flat buffer contents (padding filled with `fill`)."""
        arr = np.asarray(array)
        if tuple(arr.shape) != self.shape:
            raise TensorError(f"array of shape {list(arr.shape)} does not match the tensor's "
                              f"shape {list(self.shape)}")
        arr = arr.astype(self.np_dtype, copy=False)
        if self.is_plain:
            return np.ascontiguousarray(arr).reshape(-1)
        arr = arr.reshape(self.dims)
        padded = np.pad(arr, list(zip(self.lower_pad, self.upper_pad)), constant_values=fill)
        return np.ascontiguousarray(padded.transpose(FORMAT_ORDER[self.format])).reshape(-1)

    def unpack(self, flat: np.ndarray) -> np.ndarray:
        """Flat buffer contents -> the logical array (a copy, C order)."""
        flat = np.asarray(flat).reshape(-1)
        if flat.size < self.buffer_count:
            raise TensorError(f"buffer holds {flat.size} elements, the tensor needs "
                              f"{self.buffer_count}")
        flat = flat[: self.buffer_count].view(self.np_dtype) if flat.dtype == self.np_dtype \
            else flat[: self.buffer_count].astype(self.np_dtype)
        if self.is_plain:
            return flat.copy().reshape(self.shape)
        mem = flat.reshape(self._memory_shape())
        order = FORMAT_ORDER[self.format]
        inverse = tuple(order.index(i) for i in range(4))
        bfyx = mem.transpose(inverse)
        b, f, y, x = self.dims
        lb, lf, ly, lx = self.lower_pad
        view = bfyx[lb:lb + b, lf:lf + f, ly:ly + y, lx:lx + x]
        return np.ascontiguousarray(view).reshape(self.shape)

    def describe(self) -> str:
        """Short text, e.g. '1x3x224x224 f32 bfyx'."""
        shape = "x".join(str(d) for d in self.shape) or "scalar"
        text = f"{shape} {self.dtype} {self.format.lower()}"
        if self.is_padded:
            text += (f" pad={','.join(map(str, self.lower_pad))}"
                     f"/{','.join(map(str, self.upper_pad))}")
        return text


def tensor_arg_gives_dtype(text: str) -> bool:
    """Whether the CLI form `text` names an element type (parse_tensor_arg's default is f32)."""
    return any(not part.startswith("pad=") and part.upper() not in FORMAT_ORDER
               for part in text.strip().split(":")[1:])


def parse_tensor_arg(text: str) -> TensorDesc:
    """CLI form: 1x3x224x224[:f32][:bfyx][:pad=0,0,1,1/0,0,1,1] -> TensorDesc."""
    parts = text.strip().split(":")
    try:
        shape = tuple(int(p) for p in parts[0].lower().split("x")) if parts[0] else ()
    except ValueError:
        raise TensorError(f"shape {parts[0]!r} is not like 1x3x224x224") from None
    dtype, fmt = "f32", "BFYX"
    lower = upper = (0, 0, 0, 0)
    seen: dict[str, str] = {}   # what -> the part that gave it: a second one is a mistake

    def once(what: str, part: str) -> None:
        if what in seen:
            raise TensorError(f"{text.strip()!r} gives two {what}s, {seen[what]!r} and "
                              f"{part!r}; give one")
        seen[what] = part

    for part in parts[1:]:
        if part.startswith("pad="):
            once("padding", part)
            spec = part[4:]
            lo, _, up = spec.partition("/")
            try:
                lower = tuple(int(v) for v in lo.split(","))
                upper = tuple(int(v) for v in up.split(",")) if up else lower
            except ValueError:
                raise TensorError(f"padding {spec!r} is not like 0,0,1,1/0,0,1,1") from None
        elif part.upper() in FORMAT_ORDER:
            once("format", part)
            fmt = part
        else:
            once("element type", part)
            dtype = part
    return TensorDesc(shape, dtype, fmt, lower, upper)
