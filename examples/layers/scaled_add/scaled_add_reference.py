"""The ScaledAdd example's Python reference layer: out = a * weights[0] + b * weights[1]."""
import numpy as np

from customlayers.api import Attr, cpu_layer


@cpu_layer("ScaledAdd")
class ScaledAdd:
    attributes = (Attr("weights", "floats", default=(1.0, 1.0)),)

    def output_shapes(self, input_shapes, attrs):
        return [input_shapes[0]]

    def execute(self, inputs, outputs, attrs):
        wa, wb = (np.float32(w) for w in attrs["weights"])
        np.copyto(outputs[0], inputs[0] * wa + inputs[1] * wb)
