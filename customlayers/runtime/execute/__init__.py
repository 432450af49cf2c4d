"""runtime/execute: running launches on a device, one inference at a time or streamed.

kernel.py         BoundKernel: a compiled custom layer with its argument plan and work sizes
unwritten.py      output elements a run never wrote, found by the sentinel they kept
launch_timing.py  a layer's launches timed on scratch buffers, for the tuner
one_launch.py     one launch alone on buffers given as host bytes, read back (the checkers)
request.py        InferRequest: buffers and enqueues of one inference
request_args.py   what a request binds each argument to
run.py            one run of a request, prepared before anything is enqueued; which commands
                  wait for which on an out-of-order queue
user_tensors.py   set_tensor's values (numpy, pyopencl Buffer, Array) checked against a tensor
events.py         waiting without hanging on a failed dependency
host_step.py      host steps of a request (Python layers): maps, a worker thread, user events
stream.py         many inputs through a few requests in flight, outputs in input order

May import: runtime/device, the floors below runtime, and pyopencl.
"""
