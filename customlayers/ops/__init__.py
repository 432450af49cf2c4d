"""Built-in layers. Importing this package registers every op (see base.register_op).

Rooms: nn/ (Convolution, MatMul, GEMM, pooling, normalization, softmax, reduce) and tensor/
(elementwise, activations, views, concat, transpose ...), independent of each other, over the
shared base.py (Op, register_op), _nn.py, _program.py (kernel files, #define blocks) and
reorder.py. A new op is a module in one room, a line in _modules.py and its .cl file.

May import: jit, config, graph types, errors, settings, dtypes. Not passes/, runtime/ or
pyopencl.
"""
from .base import OPS, Attr, Op, get_op, register_op  # noqa: F401

# Each module registers its ops on import. Keep this list explicit.
from . import _modules  # noqa: F401,E402
