"""The text of Python CPU layer modules (`-l layers.py`) that several tests write to a file:
the Softsign example of docs/python-layers.md."""

SOFTSIGN = '''
import numpy as np
from customlayers.api import Attr, cpu_layer

@cpu_layer("Softsign")
class Softsign:
    attributes = (Attr("alpha", "float", default=1.0),)
    def output_shapes(self, input_shapes, attrs):
        return [input_shapes[0]]
    def execute(self, inputs, outputs, attrs):
        np.divide(inputs[0], 1 + attrs["alpha"] * np.abs(inputs[0]), out=outputs[0])
'''
