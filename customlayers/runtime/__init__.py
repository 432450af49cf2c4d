"""runtime: the device floor, the only part of the package that touches OpenCL. In rooms, each
one concern, one-way (import-linter contracts in pyproject.toml), top to bottom:

checks/   --check-bounds, --sanitize, reference checks      observe/  profiles and traces
compile/  Network, resolver, compiler, memory plan, one layer run alone
layers/   the Registry (catalog of loaded layer types), the SimpleGPU, MVCL and Python adapters
tuning/   kernel selection by timing, and its cache
execute/  BoundKernel, launch-argument binding, InferRequest, events, streaming
device/   Engine, limits, building and the program cache (build.py's build_layer_kernel: the
          build step of every custom layer's program, either dialect), device and host memory

pyopencl is imported only in device/ and execute/; the other rooms reach the device through them.

May import: every floor below it. Rooms import only rooms below them (contracts).
"""
