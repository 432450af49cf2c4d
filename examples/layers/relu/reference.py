"""numpy reference for the ReLU example."""
import numpy as np

# formats the kernel takes as they come (format="ANY"); padded tensors work too
FORMATS = ("BFYX", "BYXF", "YXFB", "FYXB")

CASES = [
    {"inputs": [(1, 3, 5, 7)], "params": {}},
    {"inputs": [(2, 4, 3, 9)], "params": {"negative_slope": "0.1"}},
    {"inputs": [(1, 2, 4, 4)], "params": {"negative_slope": "1e-7"}},
    {"inputs": [(2, 3, 5, 8)], "params": {"negative_slope": "0.25"}},   # the float4 path
]


def reference(inputs, params, data):
    x = inputs[0]
    slope = np.float32(float(params.get("negative_slope", "0.0")))
    return [np.where(x < 0, x * slope, x).astype(np.float32)]
