"""The arithmetic of ONNX Resize, on the host: the output shape, and for each axis a table of
taps (input index, weight) per output coordinate. Resize is separable (onnx's reference,
onnx/reference/ops/op_resize.py, resizes one axis at a time), so an output element is the sum,
over the product of every axis's taps, of the weights' product times the input there; the
kernel (resample.cl) does only that, and every mode of the op lives here, in float64, as the
reference computes it.

Pure numpy: testable without a device.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ...errors import BindingError

MODES = ("nearest", "linear", "cubic")
COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                    "asymmetric", "tf_crop_and_resize", "tf_half_pixel_for_nn")
# "simple": opset < 11 (Upsample, Resize-10): floor when enlarging, ceil when shrinking, as
# ONNX Runtime computes them
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")
POLICIES = ("stretch", "not_larger", "not_smaller")
MAX_ELEMENTS = 2**31 - 1     # resample.cl indexes the input and output with 32-bit ints


@dataclass(frozen=True)
class ResizeForm:
    """The attributes of one Resize node that decide its arithmetic."""
    mode: str = "nearest"
    coordinate_mode: str = "half_pixel"
    nearest_mode: str = "round_prefer_floor"
    cubic_a: float = -0.75
    exclude_outside: bool = False
    antialias: bool = False
    policy: str = "stretch"


@dataclass(frozen=True)
class AxisTable:
    """Taps of one axis: `index[o, t]` (clamped into the input) and `weight[o, t]` for output
    coordinate o; `outside[o]`: tf_crop_and_resize maps o outside the input (the output there
    is the extrapolation value)."""
    index: np.ndarray      # int32 [out, taps]
    weight: np.ndarray     # float64 [out, taps]
    outside: np.ndarray    # bool [out]

    @staticmethod
    def identity(n: int) -> "AxisTable":
        return AxisTable(np.arange(n, dtype=np.int32)[:, None], np.ones((n, 1)),
                         np.zeros(n, bool))


def output_plan(op_type: str, shape: Sequence[int], form: ResizeForm,
                scales: np.ndarray | None, sizes: np.ndarray | None,
                axes: Sequence[int] | None, roi: np.ndarray | None
                ) -> tuple[tuple[int, ...], list[float], list[tuple[float, float]] | None]:
    """(output shape, scale per axis, roi (start, end) per axis or None), as the reference's
    _interpolate_nd works them out from scales or sizes, axes and keep_aspect_ratio_policy."""
    rank = len(shape)
    axes = list(range(rank)) if axes is None else list(axes)
    given = sizes if sizes is not None else scales
    if given is None:
        raise BindingError(f"{op_type}: neither scales nor sizes is given")
    given = np.asarray(given).reshape(-1)
    if given.size != len(axes):
        raise BindingError(f"{op_type}: {'sizes' if sizes is not None else 'scales'} has "
                           f"{given.size} values; the input of rank {rank} with axes {axes} "
                           f"needs {len(axes)}")
    if roi is not None and np.asarray(roi).size:
        roi = np.asarray(roi, np.float64).reshape(-1)
        if roi.size != 2 * len(axes):
            raise BindingError(f"{op_type}: roi has {roi.size} values; {len(axes)} axes need "
                               f"{2 * len(axes)} (starts, then ends)")
        full = [(0.0, 1.0)] * rank
        for k, a in enumerate(axes):
            full[a] = (float(roi[k]), float(roi[len(axes) + k]))
        roi_axes = full
    else:
        roi_axes = None
    if sizes is not None:
        if given.dtype.kind not in "iu" or (given <= 0).any():
            raise BindingError(f"{op_type}: sizes must be positive integers, found "
                               f"{given.tolist()}")
        out = list(shape)
        for k, a in enumerate(axes):
            out[a] = int(given[k])
        factors = [out[a] / shape[a] for a in range(rank)]
        if form.policy != "stretch":
            pick = min if form.policy == "not_larger" else max
            scale = pick(factors[a] for a in axes)
            factors = [scale if a in axes else 1.0 for a in range(rank)]
            out = [int(scale * shape[a] + 0.5) if a in axes else shape[a] for a in range(rank)]
    else:
        values = given.astype(np.float64)
        if not np.isfinite(values).all() or (values <= 0).any():
            raise BindingError(f"{op_type}: scales must be positive, found {values.tolist()}")
        factors = [1.0] * rank
        for k, a in enumerate(axes):
            factors[a] = float(values[k])
        out = [int(f * d) for f, d in zip(factors, shape)]
    if any(d <= 0 for d in out):
        raise BindingError(f"{op_type}: the output shape would be {out} for the input "
                           f"{list(shape)}: empty tensors are not supported")
    if max(math.prod(out), math.prod(shape)) > MAX_ELEMENTS:
        raise BindingError(f"{op_type}: the output shape would be {out} for the input "
                           f"{list(shape)}: over {MAX_ELEMENTS} elements, past the kernel's "
                           f"32-bit indices")
    return tuple(out), factors, roi_axes


def axis_table(form: ResizeForm, in_w: int, out_w: int, scale: float,
               roi: tuple[float, float] | None) -> AxisTable:
    """The taps of one axis (the reference's _interpolate_1d_along_axis, as tables)."""
    if math.isclose(scale, 1.0) and out_w == in_w and form.coordinate_mode != \
            "tf_half_pixel_for_nn" and (roi is None or form.coordinate_mode !=
                                        "tf_crop_and_resize" or
                                        (math.isclose(roi[0], 0.0) and math.isclose(roi[1], 1.0))):
        return AxisTable.identity(in_w)    # the reference skips such an axis
    y = np.arange(out_w, dtype=np.float64)
    x, outside = _source_coordinates(form.coordinate_mode, y, scale, in_w, out_w, roi)
    x_int = np.floor(x)
    ratios = np.where(x == x_int, 1.0, x - x_int)
    coeffs = np.array([_coefficients(form, float(r), scale) for r in ratios], np.float64)
    n = coeffs.shape[1]
    pad = int(np.ceil(n / 2))
    xp = x + pad
    p = np.floor(xp).astype(np.int64)
    frac = xp - p
    if n % 2 == 0:
        start = p + np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        base = -((n - 1) // 2)
        start = p + np.where(frac <= 0.5, base, base + 1)
    index = start[:, None] + np.arange(n)[None, :] - pad
    if form.exclude_outside:
        coeffs = np.where((index < 0) | (index >= in_w), 0.0, coeffs)
        total = coeffs.sum(axis=-1, keepdims=True)
        coeffs = coeffs / np.where(total == 0, 1.0, total)
    if form.mode == "nearest":           # one-hot: keep the one tap
        pick = np.argmax(coeffs, axis=1)
        index = np.take_along_axis(index, pick[:, None], 1)
        coeffs = np.ones((out_w, 1))
    index = np.clip(index, 0, in_w - 1).astype(np.int32)
    return AxisTable(index, coeffs, outside)


def _source_coordinates(mode: str, y: np.ndarray, scale: float, in_w: int, out_w: int,
                        roi) -> tuple[np.ndarray, np.ndarray]:
    """The input coordinate of each output coordinate `y`, and where it lies outside."""
    length = scale * in_w
    outside = np.zeros(out_w, bool)
    if mode == "align_corners":
        x = np.zeros(out_w) if length == 1 else y * (in_w - 1) / (length - 1)
    elif mode == "asymmetric":
        x = y / scale
    elif mode == "tf_half_pixel_for_nn":
        x = (y + 0.5) / scale
    elif mode == "tf_crop_and_resize":
        start, end = roi if roi is not None else (0.0, 1.0)
        if length == 1:
            x = np.full(out_w, (end - start) * (in_w - 1) / 2)
        else:
            x = y * (end - start) * (in_w - 1) / (length - 1)
        x = x + start * (in_w - 1)
        outside = (x < 0) | (x > in_w - 1)
    elif mode == "pytorch_half_pixel":
        x = np.full(out_w, -0.5) if length == 1 else (y + 0.5) / scale - 0.5
    elif mode == "half_pixel":
        x = (y + 0.5) / scale - 0.5
    else:                                # half_pixel_symmetric
        offset = in_w / 2 * (1 - out_w / length)
        x = offset + (y + 0.5) / scale - 0.5
    return x, outside


def _coefficients(form: ResizeForm, ratio: float, scale: float) -> np.ndarray:
    if form.mode == "nearest":
        return _nearest(ratio, form.nearest_mode, scale)
    if form.mode == "linear":
        if not form.antialias:
            return np.array([1 - ratio, ratio])
        scale = min(scale, 1.0)
        start = int(np.floor(-1 / scale) + 1)
        args = (np.arange(start, 2 - start) - ratio) * scale
        coeffs = np.clip(1 - np.abs(args), 0, 1)
        return coeffs / coeffs.sum()
    a = form.cubic_a
    if not form.antialias:
        r, s = ratio, 1 - ratio
        return np.array([((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
                         ((a + 2) * r - (a + 3)) * r * r + 1,
                         ((a + 2) * s - (a + 3)) * s * s + 1,
                         ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a])
    scale = min(scale, 1.0)
    start = int(np.floor(-2 / scale) + 1)
    coeffs = np.array([_cubic(scale * (i - ratio), a) for i in range(start, 2 - start)])
    return coeffs / coeffs.sum()


def _cubic(x: float, a: float) -> float:
    x = abs(x)
    if x <= 1:
        return (a + 2) * x ** 3 - (a + 3) * x * x + 1
    if x < 2:
        return a * x ** 3 - 5 * a * x * x + 8 * a * x - 4 * a
    return 0.0


def _nearest(ratio: float, mode: str, scale: float) -> np.ndarray:
    """One-hot over (floor, ceil) of the coordinate; ratio is in (0, 1], 1 on an integer."""
    if ratio == 1.0:
        return np.array([0.0, 1.0])
    if mode == "simple":
        mode = "ceil" if scale < 1 else "floor"
    up = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5,
          "floor": False, "ceil": True}[mode]
    return np.array([0.0, 1.0]) if up else np.array([1.0, 0.0])


def reference(x: np.ndarray, tables: Sequence[AxisTable], extrapolation: float) -> np.ndarray:
    """The resized tensor from the tables, in float64 (for tests)."""
    out = x.astype(np.float64)
    for axis, t in enumerate(tables):
        gathered = np.take(out, t.index, axis=axis)             # [..., out, taps, ...]
        shape = (1,) * axis + t.weight.shape + (1,) * (out.ndim - axis - 1)
        out = (gathered * t.weight.reshape(shape)).sum(axis=axis + 1)
    mask = np.zeros(out.shape, bool)
    for axis, t in enumerate(tables):
        mask |= t.outside.reshape((1,) * axis + (-1,) + (1,) * (out.ndim - axis - 1))
    return np.where(mask, extrapolation, out)
