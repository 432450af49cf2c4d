"""The SpatialMask example's Python reference layer: every channel times a [B,1,Y,X] mask."""
import numpy as np

from customlayers.api import cpu_layer


@cpu_layer("SpatialMask")
class SpatialMask:
    def output_shapes(self, input_shapes, attrs):
        return [input_shapes[0]]

    def execute(self, inputs, outputs, attrs):
        np.multiply(inputs[0], inputs[1], out=outputs[0])
