"""The quantization ops of ONNX models (an upper room): QuantizeLinear and DequantizeLinear
(per-tensor, per-axis and blocked scales: linear.py) and the integer matmul and convolution
that accumulate int8/uint8 products exactly in int32 (MatMulInteger, ConvInteger: integer.py).
Rounding is round-half-to-even (rint), saturation to the output type's range.

May import: the base rooms (nn, reduce, tensor), the shared op modules of ops/ (base.py,
_program.py), jit, errors, dtypes. Not the other upper rooms, passes/, runtime/ or pyopencl.
"""
