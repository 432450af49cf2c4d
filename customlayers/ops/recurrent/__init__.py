"""ops/recurrent: the recurrent ops of ONNX: LSTM, GRU and RNN (forward, reverse,
bidirectional, sequence_lens, initial states), each step on the device without a host wait.

May import: the ops package's shared modules (base, _program, reorder), the base rooms (nn,
reduce, tensor), jit and the floors below. Not the other upper rooms.
"""
