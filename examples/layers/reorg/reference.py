"""numpy reference for the YOLO reorg example (OpenVINO ReorgYolo / darknet element order)."""
import numpy as np

FORMATS = ("BFYX", "BYXF", "YXFB", "FYXB")

# X values that are not multiples of 8 exercise the rounded-up global size and its guard
CASES = [
    {"inputs": [(1, 4, 6, 10)], "params": {}},
    {"inputs": [(2, 8, 6, 6)], "params": {"stride": "2"}},
    {"inputs": [(1, 9, 9, 3)], "params": {"stride": "3"}},
]


def output_shape(shape, stride):
    b, c, h, w = shape
    return (b, c * stride * stride, h // stride, w // stride)


def reference(inputs, params, data):
    x = inputs[0]
    s = int(params.get("stride", "2"))
    b, c, h, w = x.shape
    out_c = c // (s * s)
    # dst flat order walks (c, y, x) of the input; the source is read from [out_c, h*s, w*s]
    cc, yy, xx = np.meshgrid(np.arange(c), np.arange(h), np.arange(w), indexing="ij")
    shift = cc // out_c
    src = ((cc % out_c) * h * s + yy * s + shift // s) * w * s + xx * s + shift % s
    flat = x.reshape(b, -1)[:, src.reshape(-1)]
    return [flat.reshape(output_shape(x.shape, s))]
