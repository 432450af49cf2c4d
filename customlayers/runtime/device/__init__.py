"""runtime/device: one OpenCL device and what is built for it. The bottom room of runtime.

device.py         device selection and the Engine (context, queue, program cache; the user's own)
                  and a device's position, by which a checker's child process opens it
limits.py         what a device can run (work-group limits, fp64) and its DeviceTraits
build.py          building programs; build errors mapped to the user's files and lines; the
                  build step of every custom layer (build_layer_kernel, finish_layer_kernel)
kernel_info.py    what a built program says of its kernels (names, parameter declarations)
parallel_build.py several programs built at once (drivers compile in parallel)
build_workers.py  programs compiled in worker processes, for NVIDIA's one-at-a-time compiler
cache.py          ProgramCache: compiled programs in memory and on disk
device_memory.py  what a run allocates, checked against the device before the first buffer
host_memory.py    pinned, mapped host tensors; numpy inputs used where they lie on a CPU device
sub_buffers.py    sub-buffers released before their parents, never by the garbage collector
kernel_objects.py the kernels of requests: argument setters made once per kind, scalar
                  arguments declared by type, kernels released newest first
launch_args.py    the one walk that binds a KernelLaunch's arguments (every caller uses it:
                  requests, the tuner, the bounds checker, the sanitizer, BoundKernel)

May import: config, jit, errors, settings, files, dtypes, and pyopencl. No other runtime room.
"""
