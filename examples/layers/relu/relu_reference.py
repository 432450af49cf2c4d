"""The ReLU example's Python reference layer: what `customlayers check` compares the kernel with,
and a CPU layer that runs in a model when loaded with -l."""
import numpy as np

from customlayers.api import Attr, cpu_layer


@cpu_layer("ReLU")
class ReLU:
    # the same attribute the descriptor's Define reads (param="negative_slope")
    attributes = (Attr("negative_slope", "float", default=0.0),)

    def output_shapes(self, input_shapes, attrs):
        return [input_shapes[0]]

    def execute(self, inputs, outputs, attrs):
        x = inputs[0]
        slope = np.float32(attrs["negative_slope"])
        np.copyto(outputs[0], np.where(x < 0, x * slope, x))
