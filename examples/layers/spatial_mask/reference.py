"""numpy reference for the SpatialMask example."""
import numpy as np

FORMATS = ("BFYX", "BYXF", "YXFB", "FYXB")

CASES = [
    {"inputs": [(1, 4, 5, 6), (1, 1, 5, 6)], "params": {}},
    {"inputs": [(2, 3, 3, 8), (2, 1, 3, 8)], "params": {}},
]


def reference(inputs, params, data):
    x, mask = inputs
    return [(x * mask).astype(np.float32)]
