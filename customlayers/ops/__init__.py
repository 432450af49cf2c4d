"""Built-in layers. Importing this package registers every op (see base.register_op).

Rooms, over the shared base.py (Op, register_op), _nn.py, _program.py (kernel files, #define
blocks) and reorder.py:
- the base rooms, independent of each other: nn/ (Convolution, MatMul, GEMM, pooling), reduce/
  (reductions, normalizations, softmax, losses) and tensor/ (elementwise, activations, views,
  concat, transpose ...);
- the upper rooms, which may use the base rooms and not each other: logic/ (comparisons, logic,
  bitwise, Where, math functions), index/ (gather/scatter, arg-reductions, TopK, cumulative
  sums), image/ (Resize, GridSample, RoiAlign, NonMaxSuppression), recurrent/ (LSTM, GRU, RNN),
  attention/, signal/ (DFT, STFT) and quant/ (QuantizeLinear, DequantizeLinear, MatMulInteger,
  ConvInteger).
A new op is a module in one room, a line in _modules.py and its .cl file.

May import: jit, config, graph types, errors, settings, dtypes. Not passes/, runtime/ or
pyopencl.
"""
from .base import OPS, Attr, Op, get_op, register_op  # noqa: F401

# Each module registers its ops on import. Keep this list explicit.
from . import _modules  # noqa: F401,E402
