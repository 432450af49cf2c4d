"""runtime: the device layer, the only part of the package that touches OpenCL.

device.py     device selection and the Engine (context, queue, program cache; the user's own)
build.py      building programs; build errors mapped to the user's files and lines; the build
              step of every custom layer's program (build_layer_kernel)
cache.py      ProgramCache: compiled programs in memory and on disk
limits.py     what a device can run (work-group limits, fp64) and its DeviceTraits
registry.py   Registry: loaded layer types; bind() is SimpleGPU's entry into the one
              layer-compile pipeline (mvcl_build.py is MVCL's)
kernel.py     BoundKernel: a compiled custom layer with its argument plan and work sizes
simplegpu.py  the SimpleGPU adapter: a LayerSpec as a layer implementation (jit/layer.py)
python_layer.py  the Python layer adapter: a @cpu_layer class as a layer implementation
python_loader.py @cpu_layer and loading the modules that use it (-l, Registry.load_python)
reference_check.py  comparing outputs with a Python reference (check, run --check-with)
resolver.py   what implements each node: loaded layers first, then built-ins
layer_shapes.py  a loaded layer's output shapes for a model being read (constants, symbolic dims)
layer_input_types.py  the element type each input of a layer takes when it runs alone
compiler.py   a graph compiled for concrete shapes: steps, memory plan, programs
planner.py    memory planning by tensor lifetime
device_memory.py  what a run allocates, checked against the device before the first buffer;
              the per-device ledger requests reserve in
network.py    Network: resolution, plans, pooled requests
request.py    InferRequest: buffers and enqueues of one inference; the user's tensors and events
user_tensors.py  set_tensor's values (numpy, pyopencl Buffer, Array) checked against a tensor
host_memory.py   pinned, mapped host tensors; numpy inputs used where they lie on a CPU device
ordering.py   which commands wait for which on an out-of-order queue (buffers are reused)
events.py     waiting without hanging on a failed dependency
stream.py     many inputs through nireq requests in flight, outputs in input order
host_step.py  host steps of a request (Python layers): maps, a worker thread, user events
profile.py    per-layer device times
bounds_process.py, bounds_worker.py  --check-bounds (bounds.py) in a child process: a crash
              is a problem of the layer
"""
