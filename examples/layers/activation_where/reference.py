"""numpy reference for the MVCL example whose kernel <Where> selects by the attribute `mode`."""
import numpy as np

FORMATS = ("BFYX", "BYXF", "YXFB", "FYXB")   # the runtime reorders into the kernels' BFYX

CASES = [
    {"inputs": [(1, 3, 4, 5)], "params": {"mode": "relu"}},
    {"inputs": [(2, 2, 3, 4)], "params": {"mode": "leaky", "slope": "0.1"}},
    {"inputs": [(1, 4, 2, 6)], "params": {"mode": "clamp", "range": "-0.5,0.75"}},
]


def reference(inputs, params, data):
    x = inputs[0].astype(np.float32)
    mode = params["mode"]
    if mode == "relu":
        return [np.maximum(x, 0)]
    if mode == "leaky":
        return [np.where(x >= 0, x, x * np.float32(params["slope"])).astype(np.float32)]
    lo, hi = (np.float32(v) for v in params["range"].split(","))
    return [np.clip(x, lo, hi)]
