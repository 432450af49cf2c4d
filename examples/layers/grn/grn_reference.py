"""The GRN example's Python reference layer (customlayers check, or -l in a model)."""
import numpy as np

from customlayers.api import Attr, cpu_layer


@cpu_layer("GRN")
class GRN:
    attributes = (Attr("bias", "float", default=1.0),)

    def output_shapes(self, input_shapes, attrs):
        return [input_shapes[0]]

    def execute(self, inputs, outputs, attrs):
        x = inputs[0].astype(np.float64)
        norm = np.sqrt((x * x).sum(axis=1, keepdims=True) + attrs["bias"])
        np.divide(x, norm, out=outputs[0], casting="unsafe")
