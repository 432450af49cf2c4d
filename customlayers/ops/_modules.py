"""The op modules, imported for their registrations. One line per module."""
import importlib

for _name in (
    # neural-network ops (convolution, matmul, pooling, normalization, softmax, reduce)
    "nn.conv", "nn.matmul", "nn.pooling",
    # reductions, normalizations and softmax
    "reduce.norm", "reduce.softmax", "reduce.reduce",
    # tensor ops (elementwise, activations, concat, views, transpose, shuffle, convert, ...)
    "tensor.eltwise", "tensor.activation", "tensor.concat", "tensor.views", "tensor.transpose",
    "tensor.shuffle", "tensor.misc", "tensor.space_depth",
    "tensor.onnx_extra",   # Sign, SoftSign, Selu, HardSigmoid, Shrink (for ONNX models)
    "tensor.state",        # ReadValue, Assign: a model's state across a request's runs
    # the upper rooms: ops on data that ONNX models use, over the base rooms above
    "logic.compare",       # comparisons, logic (And/Or/Xor), bitwise ops and shifts
    "logic.unary",         # IsNaN, IsInf, LogicalNot, BitwiseNot, Acos..Tan, Round, Celu ...
    "logic.select",        # Select (ONNX Where)
    "index.gather",        # GatherElements, GatherND, Compress
    "index.scatter",       # ScatterElementsUpdate, ScatterNDUpdate (reductions), TensorScatter
    "index.select",        # ArgMax, ArgMin, TopK
    "index.scan",          # CumSum, CumProd
    "index.make",          # OneHot, Range, Eye, Trilu, ReverseSequence
    "index.einsum",        # Einsum of one or two operands
    "image.resize",        # Resize, Upsample
    "image.grid_sample",   # GridSample, AffineGrid
    "image.col2im",        # Col2Im
    "image.center_crop_pad",  # CenterCropPad (onto tensor.misc's Pad)
    "image.roi_align",     # RoiAlign
    "recurrent.rnn",       # LSTM, GRU, RNN
    "attention.attention", # ONNX Attention (opset 23-25)
    "attention.rotary",    # RotaryEmbedding
    "attention.fused",     # FusedAttention (passes/attention_folding.py's attention chains)
    "reduce.loss",         # NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss
    "reduce.lp_pool",      # LpPool
    "signal.dft",          # ONNX DFT and STFT on data (windows, mel matrices fold on the host)
    "reduce.layer_norm",   # LayerNorm (ONNX LayerNormalization as one kernel)
    "quant.linear",        # QuantizeLinear, DequantizeLinear, Requantize (QLinear* ops)
    "quant.integer",       # MatMulInteger, ConvInteger (exact int32 sums)
    "nn.causal_conv",      # CausalConvWithState (ONNX opset 27): the conv and its carried state
    "nn.temporal_block",   # TemporalBlocks: a run of TCN blocks in one launch (passes/temporal)
):
    importlib.import_module(f"{__package__}.{_name}")
