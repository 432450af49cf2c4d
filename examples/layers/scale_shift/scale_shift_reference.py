"""The ScaleShift example's Python reference layer. Its Data blobs `weights` and `biases` come
after the input (in a model: the layer's constant inputs; in `check`: in the kernel's order)."""
import numpy as np

from customlayers.api import cpu_layer


@cpu_layer("ScaleShift")
class ScaleShift:
    def output_shapes(self, input_shapes, attrs):
        return [input_shapes[0]]

    def execute(self, inputs, outputs, attrs):
        x, weights, biases = inputs
        np.copyto(outputs[0], x * weights.reshape(1, -1, 1, 1) + biases.reshape(1, -1, 1, 1))
