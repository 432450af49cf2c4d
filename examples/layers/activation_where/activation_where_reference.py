"""The Where-selected activation's Python reference layer (customlayers check, or -l)."""
import numpy as np

from customlayers.api import Attr, cpu_layer


@cpu_layer("SelectActivation")
class SelectActivation:
    attributes = (Attr("mode", "str", default="relu"), Attr("slope", "float", default=0.01),
                  Attr("range", "floats", default=(-1.0, 1.0)))

    def output_shapes(self, input_shapes, attrs):
        return [input_shapes[0]]

    def execute(self, inputs, outputs, attrs):
        x = inputs[0]
        if attrs["mode"] == "relu":
            np.maximum(x, 0, out=outputs[0])
        elif attrs["mode"] == "leaky":
            np.copyto(outputs[0], np.where(x >= 0, x, x * np.float32(attrs["slope"])))
        else:
            lo, hi = (np.float32(v) for v in attrs["range"])
            np.clip(x, lo, hi, out=outputs[0])
