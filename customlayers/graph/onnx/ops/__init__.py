"""graph/onnx/ops: the translations of standard ONNX ops into IR ops, by kind of op, each
registered with @translates (../translate.py): shape arithmetic (fold.py), elementwise math
(arith.py), convolution, pooling and matmul (nn.py), normalizations (norm.py), tensor ops
(tensor.py), comparisons, logic and Where on data (logic.py), index ops (index.py), attention
(attention.py), losses (loss.py), Resize and the detection ops (image.py) and the recurrent ops
(recurrent.py). ../table.py imports them all.

May import: ../translate.py, ../deferred.py and ../checks.py (never ../reader.py or ../table.py,
which import these back), the rest of graph/, errors, dtypes, numpy and onnx.
"""
