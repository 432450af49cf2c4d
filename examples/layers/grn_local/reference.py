"""numpy reference for the MVCL GRN example with a local line buffer."""
import numpy as np

FORMATS = ("BFYX", "BYXF", "YXFB", "FYXB")   # the runtime reorders into the kernel's BFYX

# the local size is X (one work group per row): X stays within every device's work-group limit
CASES = [
    {"inputs": [(1, 5, 4, 6)], "params": {"bias": "1.0"}},
    {"inputs": [(2, 3, 7, 5)], "params": {"bias": "0.5"}},
]


def reference(inputs, params, data):
    x = inputs[0].astype(np.float64)
    bias = float(params["bias"])
    norm = np.sqrt((x * x).sum(axis=1, keepdims=True) + bias)
    return [(x / norm).astype(np.float32)]
