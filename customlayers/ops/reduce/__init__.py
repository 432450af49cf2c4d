"""ops/reduce: the ops that reduce over axes: ReduceSum/Mean/Max/... (reduce.py), the
normalizations (norm.py: MVN, NormalizeL2, ...), softmax (softmax.py) and the losses of ONNX
(loss.py: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss).

May import: the ops package's shared modules (base, _nn, _program, reorder), jit and the
floors below. Not ops/nn or ops/tensor (the base rooms are independent).
"""
