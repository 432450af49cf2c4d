"""The op modules, imported for their registrations. One line per module."""
import importlib

for _name in (
    # neural-network ops (convolution, matmul, pooling, normalization, softmax, reduce)
    "nn.conv", "nn.matmul", "nn.pooling", "nn.norm", "nn.softmax", "nn.reduce",
    # tensor ops (elementwise, activations, concat, views, transpose, shuffle, convert, ...)
    "tensor.eltwise", "tensor.activation", "tensor.concat", "tensor.views", "tensor.transpose",
    "tensor.shuffle", "tensor.misc", "tensor.space_depth",
    "tensor.onnx_extra",   # Sign, SoftSign, Selu, HardSigmoid, Shrink (for ONNX models)
):
    importlib.import_module(f"{__package__}.{_name}")
