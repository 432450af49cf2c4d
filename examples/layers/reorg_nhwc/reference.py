"""numpy reference for the MVCL reorg_nhwc example (OpenVINO ReorgYolo / darknet element order)."""
import numpy as np

# the runtime reorders whatever layout the network has into the kernel's BYXF
FORMATS = ("BFYX", "BYXF", "YXFB", "FYXB")

# batch 1: the seed's work grid has no batch axis. Y = 6 and 9 are not multiples of the local
# size 8, so the rounded-up global size and the kernel's guard are exercised.
CASES = [
    {"inputs": [(1, 4, 6, 10)], "params": {"stride": "2"}},
    {"inputs": [(1, 8, 6, 6)], "params": {"stride": "2"}},
    {"inputs": [(1, 9, 9, 3)], "params": {"stride": "3"}},
]


def output_shape(shape, stride):
    b, c, h, w = shape
    return (b, c * stride * stride, h // stride, w // stride)


def reference(inputs, params, data):
    x = inputs[0]
    s = int(params["stride"])
    b, c, h, w = x.shape
    out_c = c // (s * s)
    cc, yy, xx = np.meshgrid(np.arange(c), np.arange(h), np.arange(w), indexing="ij")
    shift = cc // out_c
    src = ((cc % out_c) * h * s + yy * s + shift // s) * w * s + xx * s + shift % s
    flat = x.reshape(b, -1)[:, src.reshape(-1)]
    return [flat.reshape(output_shape(x.shape, s))]
