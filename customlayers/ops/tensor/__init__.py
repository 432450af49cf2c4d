"""ops/tensor: the tensor ops: elementwise and activations, concat, views (reshape, slice,
gather ...), transpose, shuffle, space/depth, the small ONNX extras (Sign, Selu, ...), the
channel affine map that passes/fusion.py makes, and a model's state (ReadValue, Assign).

May import: the ops package's shared modules (base, _program, reorder), jit and the floors
below. Not ops/nn (the two rooms are independent).
"""
