"""runtime: running layers on an OpenCL device.

device.py    device selection and the Engine (context, queue, program cache)
registry.py  Registry: custom layer types from configs, bound to tensors by bind()
kernel.py    BoundKernel: a compiled custom layer with its argument plan and work sizes
launch.py    KernelLaunch/Arg: the work of any layer as data, for the executor
network.py   the graph executor
"""
