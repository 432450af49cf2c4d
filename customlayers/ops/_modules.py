"""The op modules, imported for their registrations. One line per module."""
import importlib

for _name in (
    # neural-network ops (convolution, matmul, pooling, normalization, softmax, reduce)
    "conv", "matmul", "pooling", "norm", "softmax", "reduce",
    # tensor ops (elementwise, activations, concat, views, transpose, shuffle, convert, ...)
    "eltwise", "activation", "concat", "views", "transpose", "shuffle", "misc", "space_depth",
    "onnx_extra",   # Sign, SoftSign, Selu, HardSigmoid, Shrink (for ONNX models)
):
    importlib.import_module(f"{__package__}.{_name}")
