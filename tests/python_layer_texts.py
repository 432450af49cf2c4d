"""The text of Python CPU layer modules (`-l layers.py`) that several tests write to a file:
the Softsign example of docs/python-layers.md, and `grn_layer(wait_s)`: examples/layers/grn's
Python reference, in float32, waiting `wait_s` before it reads its input, as a layer that does
other work first would."""

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


def grn_layer(wait_s: float = 0.0) -> str:
    return f'''
import time
import numpy as np
from customlayers.api import Attr, cpu_layer

@cpu_layer("GRN")
class GRN:
    attributes = (Attr("bias", "float", default=1.0),)
    def output_shapes(self, input_shapes, attrs):
        return [input_shapes[0]]
    def execute(self, inputs, outputs, attrs):
        time.sleep({wait_s!r})
        x = inputs[0]
        norm = np.sqrt((x * x).sum(axis=1, keepdims=True) + np.float32(attrs["bias"]))
        np.copyto(outputs[0], x / norm)
'''
