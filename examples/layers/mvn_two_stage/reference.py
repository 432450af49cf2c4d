"""numpy reference for the two-stage MVCL MVN example (per (b, f) plane)."""
import numpy as np

FORMATS = ("BFYX", "BYXF", "YXFB", "FYXB")   # the runtime reorders into the kernels' BFYX

CASES = [
    {"inputs": [(1, 3, 4, 5)], "params": {"normalize_variance": "1", "eps": "1e-9"}},
    {"inputs": [(2, 4, 3, 7)], "params": {"normalize_variance": "0", "eps": "1e-9"}},
    {"inputs": [(2, 2, 5, 5)], "params": {"normalize_variance": "true", "eps": "0.01"}},
]


def reference(inputs, params, data):
    x = inputs[0].astype(np.float64)
    mean = x.mean(axis=(2, 3), keepdims=True)
    out = x - mean
    if params["normalize_variance"].lower() in ("1", "true"):
        out = out / np.sqrt(x.var(axis=(2, 3), keepdims=True) + float(params["eps"]))
    return [out.astype(np.float32)]
