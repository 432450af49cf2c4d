"""numpy reference for the HardSwishCL example."""
import numpy as np

# the descriptor asks for BFYX: other layouts are reordered before the kernel runs, so every
# format works from the caller's side
FORMATS = ("BFYX", "BYXF", "YXFB", "FYXB")

CASES = [
    {"inputs": [(1, 3, 4, 5)], "params": {}},
    {"inputs": [(2, 2, 7, 3)], "params": {}},
]


def reference(inputs, params, data):
    x = inputs[0].astype(np.float32)
    return [(x * np.clip(x + 3.0, 0.0, 6.0) / 6.0).astype(np.float32)]
