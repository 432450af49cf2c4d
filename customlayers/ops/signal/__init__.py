"""ops/signal: the Fourier transforms of ONNX's signal ops on data: DFT (forward, inverse,
one-sided, the inverse of a one-sided spectrum) and STFT, as direct sums per output bin
(signal_dft.cl). The windows and mel matrices are constants of the plan, folded on the host
(graph/fold_signal.py), not ops here.

May import: the ops package's shared modules (base, _program, reorder), the base rooms (nn,
reduce, tensor), jit and the floors below. Not the other upper rooms.
"""
