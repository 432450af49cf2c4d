"""ops/attention: attention as one op: ONNX Attention (opset 23/24: masks, GQA
heads, causal, softcap, past key/value) and RotaryEmbedding.

May import: the ops package's shared modules (base, _program, reorder), the base rooms (nn,
reduce, tensor), jit and the floors below. Not the other upper rooms.
"""
