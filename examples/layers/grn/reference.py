"""numpy reference for the GRN example."""
import numpy as np

FORMATS = ("BFYX", "BYXF", "YXFB", "FYXB")

CASES = [
    {"inputs": [(1, 5, 4, 6)], "params": {}},
    {"inputs": [(2, 3, 7, 5)], "params": {"bias": "0.5"}},
]


def reference(inputs, params, data):
    x = inputs[0].astype(np.float64)
    bias = float(params.get("bias", "1.0"))
    norm = np.sqrt((x * x).sum(axis=1, keepdims=True) + bias)
    return [(x / norm).astype(np.float32)]
