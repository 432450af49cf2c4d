"""The two-stage MVN example's Python reference layer (customlayers check, or -l)."""
import numpy as np

from customlayers.api import Attr, cpu_layer


@cpu_layer("MVN")
class MVN:
    attributes = (Attr("normalize_variance", "bool", default=True),
                  Attr("eps", "float", default=1e-9))

    def output_shapes(self, input_shapes, attrs):
        return [input_shapes[0]]

    def execute(self, inputs, outputs, attrs):
        x = inputs[0].astype(np.float64)
        out = x - x.mean(axis=(2, 3), keepdims=True)
        if attrs["normalize_variance"]:
            out = out / np.sqrt(x.var(axis=(2, 3), keepdims=True) + attrs["eps"])
        np.copyto(outputs[0], out, casting="unsafe")
