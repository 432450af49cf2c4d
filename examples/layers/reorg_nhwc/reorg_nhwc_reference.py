"""The MVCL reorg example's Python reference layer (customlayers check, or -l): darknet's and
OpenVINO's ReorgYolo element order."""
import numpy as np

from customlayers.api import Attr, cpu_layer


@cpu_layer("ReorgYoloNHWC")
class ReorgYoloNHWC:
    attributes = (Attr("stride", "int", default=2),)

    def output_shapes(self, input_shapes, attrs):
        b, c, h, w = input_shapes[0]
        s = attrs["stride"]
        return [(b, c * s * s, h // s, w // s)]

    def execute(self, inputs, outputs, attrs):
        x, s = inputs[0], attrs["stride"]
        b, c, h, w = x.shape
        out_c = c // (s * s)
        cc, yy, xx = np.meshgrid(np.arange(c), np.arange(h), np.arange(w), indexing="ij")
        shift = cc // out_c
        src = ((cc % out_c) * h * s + yy * s + shift // s) * w * s + xx * s + shift % s
        np.copyto(outputs[0], x.reshape(b, -1)[:, src.reshape(-1)].reshape(outputs[0].shape))
