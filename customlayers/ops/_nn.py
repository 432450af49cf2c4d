"""Helpers shared by the neural-network ops (convolution, pooling, matmul, normalization,
softmax, reduce): ops that name their layer in every message, the f32 check, and the window
arithmetic of convolution and pooling (output size, auto_pad, 1-D as 2-D).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..errors import BindingError
from ..jit.tensor import TensorDesc
from .base import Op

AUTO_PADS = ("explicit", "notset", "valid", "same_upper", "same_lower")
ROUNDING_TYPES = ("floor", "ceil", "ceil_torch")


def layer_of(attrs: Mapping[str, Any]) -> str:
    """The layer the attributes were parsed for (jit.layer.ParsedAttrs), for messages."""
    return str(getattr(attrs, "layer", "?"))


def require_f32(op: Op, attrs, descs: Sequence[TensorDesc]) -> None:
    for i, d in enumerate(descs):
        if d.dtype != "f32":
            raise BindingError(f"layer '{layer_of(attrs)}' ({op.type}): input {i} is {d.dtype}; "
                               f"this built-in runs f32 only")


class NamedOp(Op):
    """An Op that checks its attributes when the model is loaded (`check`) and names its layer
    (the parsed attributes carry it) in every later message."""

    def parse_attributes(self, raw, layer):
        attrs = super().parse_attributes(raw, layer)
        self.check(attrs)
        return attrs

    def check(self, attrs: dict[str, Any]) -> None:
        """Raise BindingError for unsupported attribute values."""

    def fail(self, attrs, message: str) -> BindingError:
        return BindingError(f"layer '{layer_of(attrs)}' ({self.type}): {message}")

    def check_choice(self, attrs, name: str, allowed: Sequence[str]) -> None:
        value = attrs.get(name)
        if value is not None and value.lower() not in allowed:
            raise self.fail(attrs, f"attribute '{name}'='{value}' is not one of "
                                   f"{', '.join(allowed)}")


# -- window arithmetic (Convolution, pooling) -------------------------------------------------
def window_geometry(op: NamedOp, attrs, spatial_in: Sequence[int], kernel: Sequence[int],
                    strides: Sequence[int], dilations: Sequence[int],
                    rounding: str = "floor") -> tuple[list[int], list[int], list[int]]:
    """(output sizes, pads_begin, pads_end) per spatial axis, following auto_pad."""
    n = len(spatial_in)
    for name, values in (("strides", strides), ("dilations", dilations),
                         ("kernel", kernel)):
        if len(values) != n:
            raise op.fail(attrs, f"attribute '{name}' has {len(values)} values, the input has "
                                 f"{n} spatial axes")
        if any(v < 1 for v in values):
            raise op.fail(attrs, f"attribute '{name}' must be positive, found {list(values)}")
    auto_pad = (attrs.get("auto_pad") or "explicit").lower()
    pads_b = list(attrs.get("pads_begin") or (0,) * n)
    pads_e = list(attrs.get("pads_end") or (0,) * n)
    if auto_pad in ("explicit", "notset"):
        for name, values in (("pads_begin", pads_b), ("pads_end", pads_e)):
            if len(values) != n:
                raise op.fail(attrs, f"attribute '{name}' has {len(values)} values, the input "
                                     f"has {n} spatial axes")
            if any(v < 0 for v in values):
                raise op.fail(attrs, f"attribute '{name}' must not be negative, found {values}")
    out, begin, end = [], [], []
    for i in range(n):
        size, s = spatial_in[i], strides[i]
        k_eff = (kernel[i] - 1) * dilations[i] + 1
        if auto_pad == "valid":
            pb = pe = 0
            o = (size - k_eff) // s + 1
        elif auto_pad in ("same_upper", "same_lower"):
            o = -(-size // s)
            total = max(0, (o - 1) * s + k_eff - size)
            pb = total // 2 if auto_pad == "same_upper" else total - total // 2
            pe = total - pb
        else:
            pb, pe = pads_b[i], pads_e[i]
            span = size + pb + pe - k_eff
            if span < 0:
                o = 0
            elif rounding == "floor":
                o = span // s + 1
            else:
                o = -(-span // s) + 1
                # ceil_torch (opset14): no window may start in the end padding
                if rounding == "ceil_torch" and (o - 1) * s >= size + pb:
                    o -= 1
        if o < 1 and size == 0:
            raise op.fail(attrs, f"spatial axis {i} of its input is empty (size 0): there is "
                                 f"no window to compute; give the input at least one position "
                                 f"there")
        if o < 1:
            raise op.fail(attrs, f"the window (spanning {k_eff} positions with its dilation) "
                                 f"does not fit spatial axis {i} of size {size} with pads "
                                 f"{pb}+{pe}")
        out.append(o)
        begin.append(pb)
        end.append(pe)
    return out, begin, end


def spatial_rank(op: NamedOp, attrs, desc: TensorDesc, what: str = "input 0",
                 max_spatial: int = 2) -> int:
    """1 or 2 spatial axes: the input is [N, C, W] or [N, C, H, W]; with max_spatial=3 also
    [N, C, D, H, W] (the ops that have a 3-D kernel)."""
    ranks = tuple(range(3, max_spatial + 3))
    if len(desc.shape) not in ranks:
        names = {3: "3 (N,C,W)", 4: "4 (N,C,H,W)", 5: "5 (N,C,D,H,W)"}
        raise op.fail(attrs, f"{what} has shape {list(desc.shape)}; expected rank "
                             f"{' or '.join(names[r] for r in ranks)}")
    return len(desc.shape) - 2


def as_3d(values: Sequence[int], fill: int) -> tuple[int, int, int]:
    """A 1-D or 2-D spatial attribute as (z, y, x) with the missing leading axes trivial."""
    values = tuple(values)
    return (fill,) * (3 - len(values)) + values  # type: ignore[return-value]


def as_2d(values: Sequence[int], fill: int) -> tuple[int, int]:
    """A 1-D spatial attribute as (y, x) with y the trivial axis."""
    values = tuple(values)
    return values if len(values) == 2 else (fill,) + values  # type: ignore[return-value]


def axis_view(op: NamedOp, attrs, desc: TensorDesc,
              dtypes: Sequence[str] | None = ("f32", "f64")):
    """(outer, length, inner): the tensor as [outer, length, inner] around attribute 'axis'
    (negative counts from the end), refused naming the layer for a type not in `dtypes` (None:
    the caller checked the type) or an axis out of range (the ops of one axis: SoftMax,
    LpNormalization, Hardmax)."""
    if dtypes is not None and desc.dtype not in dtypes:
        raise op.fail(attrs, f"input 0 is {desc.dtype}; expected {' or '.join(dtypes)}")
    shape = tuple(desc.shape)
    axis = attrs["axis"]
    if not -len(shape) <= axis < len(shape):
        raise op.fail(attrs, f"attribute 'axis'={axis} is out of range for input 0 of shape "
                             f"{list(shape)}")
    axis %= len(shape)
    outer = inner = 1
    for d in shape[:axis]:
        outer *= d
    for d in shape[axis + 1:]:
        inner *= d
    return outer, shape[axis], inner
