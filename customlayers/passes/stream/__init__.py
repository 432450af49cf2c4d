"""passes/stream: a whole-window causal model [N, C, T] as the step of a stream, not a rewrite
(Network.streaming calls it; pure Python, no device, as all of passes/).

causal_stream.py     stream_program: the graph as ops/stream/program.py's StreamProgram, or a
                     refusal naming the layer and why
stream_layers.py     the handler per layer type of the time-wise body, and why the others
                     cannot stream
stream_head.py       the handlers of the head (the last step read, Gemm/MatMul, LogSoftmax)
stream_constants.py  the constants a conversion evaluates (channel and head vectors)

May import: what passes/ may (graph/, jit/, ops/, errors, dtypes), FOLDING from passes/ and
../window_folding.py; never runtime/ or pyopencl.
"""
