"""The signal ops whose inputs are sizes (fold_eval.py's evaluators, for the ONNX reader and the
shape-folding pass): HannWindow, HammingWindow, BlackmanWindow and MelWeightMatrix, in numpy
with exactly the formulas of ONNX's reference (onnx/reference/ops/op_*_window.py,
op_mel_weight_matrix.py), so that a window or a mel matrix is a constant of the plan.

attrs (text): "periodic" (0/1) for the windows, "dtype" the numpy name of the output's element
type (the translation maps ONNX's output_datatype). A size that is not a positive integer is a
ValueError (the callers name the node)."""
from __future__ import annotations

import numpy as np

# a window or a mel matrix larger than this is not a size a model means
MAX_SIGNAL_SIZE = 1 << 20


def _scalar(value, what: str, integer: bool = True):
    value = np.asarray(value)
    if value.size != 1:
        raise ValueError(f"the {what} must be one value, found {value.size}")
    if integer and value.dtype.kind not in "iu":
        raise ValueError(f"the {what} must be an integer, found {value.dtype}")
    return value.reshape(-1)[0]


def _size(value, what: str = "size") -> int:
    size = int(_scalar(value, what))
    if not 1 <= size <= MAX_SIGNAL_SIZE:
        raise ValueError(f"the {what} {size} is not in 1..{MAX_SIGNAL_SIZE}")
    return size


def _dtype(attrs: dict) -> np.dtype:
    return np.dtype(attrs.get("dtype") or "float32")


def _window_axis(attrs: dict, inputs) -> tuple[int, np.ndarray, int]:
    """(size, n = 0..size-1 in the output type, N: size when periodic, else size - 1)."""
    size = _size(inputs[0])
    periodic = int(attrs.get("periodic") or 1)
    return size, np.arange(size, dtype=_dtype(attrs)), size if periodic == 1 else size - 1


def _hann(attrs, inputs, shape):
    _, ni, n_1 = _window_axis(attrs, inputs)
    return (np.sin(ni * np.pi / n_1) ** 2).astype(_dtype(attrs))


def _hamming(attrs, inputs, shape):
    _, ni, n_1 = _window_axis(attrs, inputs)
    alpha = 25.0 / 46.0
    return (alpha - np.cos(ni * np.pi * 2 / n_1) * (1 - alpha)).astype(_dtype(attrs))


def _blackman(attrs, inputs, shape):
    size, _, n_1 = _window_axis(attrs, inputs)
    ni = np.arange(size)                    # the reference counts in integers here
    y = np.cos((ni * (np.pi * 2)) / n_1) * (-0.5)
    y += np.cos((ni * (np.pi * 4)) / n_1) * 0.08
    y += 0.42
    return y.astype(_dtype(attrs))


def _mel_weight_matrix(attrs, inputs, shape):
    num_mel_bins = _size(inputs[0], "num_mel_bins")
    dft_length = _size(inputs[1], "dft_length")
    sample_rate = int(_scalar(inputs[2], "sample_rate"))
    if sample_rate < 1:
        raise ValueError(f"the sample_rate {sample_rate} is not positive")
    lower = _scalar(inputs[3], "lower_edge_hertz", integer=False)
    upper = _scalar(inputs[4], "upper_edge_hertz", integer=False)
    bins = dft_length // 2 + 1
    frequency_bins = np.arange(0, num_mel_bins + 2)
    low_mel = 2595 * np.log1p(lower / 700) / np.log(10)
    high_mel = 2595 * np.log1p(upper / 700) / np.log(10)
    mel_step = (high_mel - low_mel) / frequency_bins.shape[0]
    frequency_bins = frequency_bins * mel_step + low_mel
    frequency_bins = 700 * np.expm1(frequency_bins / 2595 * np.log(10))
    frequency_bins = (((dft_length + 1) * frequency_bins) // sample_rate).astype(int)
    if frequency_bins.min() < 0 or frequency_bins.max() >= bins:
        raise ValueError(f"the edges {float(lower)}..{float(upper)} Hz at sample rate "
                         f"{sample_rate} fall outside the {bins} bins of a DFT of "
                         f"{dft_length}")
    output = np.zeros((bins, num_mel_bins))
    for i in range(num_mel_bins):
        low, center, high = frequency_bins[i:i + 3]
        if center == low:
            output[center, i] = 1
        else:
            for j in range(low, center + 1):
                output[j, i] = float(j - low) / float(center - low)
        if high > center:
            for j in range(center, high):
                output[j, i] = float(high - j) / float(high - center)
    return output.astype(_dtype(attrs))


SIGNAL_OPS = {"HannWindow": _hann, "HammingWindow": _hamming, "BlackmanWindow": _blackman,
              "MelWeightMatrix": _mel_weight_matrix}
