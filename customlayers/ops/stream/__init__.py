"""ops/stream: a causal model run one time step at a time (issue 21, "Automatic streaming").

program.py      StreamProgram: what one step computes, per stream, as a chain of frame ops
                (causal convolutions with their history, pointwise and binary ops, channel
                softmax); made from a Graph by passes/stream/causal_stream.py
reference.py    a numpy stepper of a StreamProgram: the oracle the device step is tested
                against (and the exactness tests' second opinion)
step_kernel.py  the one OpenCL kernel a step runs: the program's chain generated as code, the
                frame and every intermediate in local memory, the histories as ring buffers in
                global memory
step_chain.py   the text of that kernel's chain (its ops but a convolution's current tap, a
                barrier where an op reads another work-item's writes, the outputs)
step_exprs.py   the OpenCL C expressions of its pointwise and binary ops, its float literals
step_layout.py  where that kernel keeps everything: the packed parameters (one buffer), the
                ring buffers and step counts (the state, [N, S]), the frames (local memory)

An upper room of ops/. May import: the base rooms of ops/, jit/, errors and numpy; never
pyopencl or runtime/.
"""
