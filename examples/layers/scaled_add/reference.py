"""numpy reference for the ScaledAdd example."""
import numpy as np

FORMATS = ("BFYX", "BYXF", "YXFB", "FYXB")

CASES = [
    {"inputs": [(1, 3, 4, 5), (1, 3, 4, 5)], "params": {}},
    {"inputs": [(2, 2, 3, 7), (2, 2, 3, 7)], "params": {"weights": "0.5,-2.0"}},
]


def reference(inputs, params, data):
    w = [float(v) for v in params.get("weights", "1.0,1.0").split(",")]
    a, b = (x.astype(np.float32) for x in inputs)
    return [(a * np.float32(w[0]) + b * np.float32(w[1])).astype(np.float32)]
