"""ops/reduce: the ops that reduce over axes: ReduceSum/Mean/Max/Prod (reduce.py), the
normalizations (norm.py: LRN, LpNormalization), softmax (softmax.py: SoftMax, LogSoftmax,
Hardmax), the losses of ONNX (loss.py: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss) and
LpPool (lp_pool.py).

May import: the ops package's shared modules (base, _nn, _program, reorder), jit and the
floors below. Not ops/nn or ops/tensor (the base rooms are independent).
"""
