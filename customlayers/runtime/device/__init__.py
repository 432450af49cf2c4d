"""runtime/device: one OpenCL device and what is built for it. The bottom room of runtime.

device.py         device selection and the Engine (context, queue, program cache; the user's own)
                  and a device's position, by which a checker's child process opens it
limits.py         what a device can run (work-group limits, fp64) and its DeviceTraits
build.py          building programs; build errors mapped to the user's files and lines
parallel_build.py several programs built at once (drivers compile in parallel)
cache.py          ProgramCache: compiled programs in memory and on disk
device_memory.py  what a run allocates, checked against the device before the first buffer
host_memory.py    pinned, mapped host tensors; numpy inputs used where they lie on a CPU device
sub_buffers.py    sub-buffers released before their parents, never by the garbage collector
kernel_release.py kernels released newest first

May import: config, jit, errors, settings, files, dtypes, and pyopencl. No other runtime room.
"""
