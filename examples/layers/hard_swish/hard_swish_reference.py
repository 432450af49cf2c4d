"""The HardSwishCL example's Python reference layer: x * relu6(x + 3) / 6."""
import numpy as np

from customlayers.api import cpu_layer


@cpu_layer("HardSwishCL")
class HardSwish:
    def output_shapes(self, input_shapes, attrs):
        return [input_shapes[0]]

    def execute(self, inputs, outputs, attrs):
        x = inputs[0]
        np.copyto(outputs[0], x * np.clip(x + 3.0, 0.0, 6.0) / 6.0, casting="same_kind")
