"""ops/nn: the neural-network ops and their kernel variants: Convolution (conv.py, its variants
in _conv_variants.py, Winograd in _winograd.py, the CPU-shaped kernels in _cpu_kernels.py),
MatMul, the tiled GEMM both run (_gemm.py, its tilings in _variants.py), the one fused-epilogue
wiring (_epilogue.py) and pooling.

May import: the ops package's shared modules (base, _nn, _program, reorder), jit and the
floors below. Not ops/tensor or ops/reduce (the base rooms are independent).
"""
