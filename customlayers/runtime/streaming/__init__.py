"""runtime/streaming: a causal model run one time step at a time (issue 21).

causal_stream.py  CausalStream: what Network.streaming returns; the step kernel
                  (ops/stream/step_kernel.py) built and bound once, the ring buffers and the
                  frames on the device, step(frame) / reset() / query_state()

A room of runtime/ between compile (above: Network.streaming makes one) and execute/device
(below). May import: runtime/execute and runtime/device (the Engine, buffers, the build
cache), ops/ (the step kernel's text), jit/, errors, and pyopencl for its buffers and its one
kernel, as execute/ does.
"""
