"""numpy reference for the ScaleShift example (Data blobs `weights` and `biases`)."""
import numpy as np

FORMATS = ("BFYX", "BYXF", "YXFB", "FYXB")

# "data" gives the shape of each constant blob; the tests fill them with random values
CASES = [
    {"inputs": [(1, 3, 4, 5)], "params": {}, "data": {"weights": (3,), "biases": (3,)}},
    {"inputs": [(2, 5, 3, 3)], "params": {}, "data": {"weights": (5,), "biases": (5,)}},
]


def reference(inputs, params, data):
    x = inputs[0].astype(np.float32)
    w = data["weights"].astype(np.float32).reshape(1, -1, 1, 1)
    b = data["biases"].astype(np.float32).reshape(1, -1, 1, 1)
    return [(x * w + b).astype(np.float32)]
