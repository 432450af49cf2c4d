"""runtime/compile: a graph made a runnable network for one device (clDNN's "program" step).

network.py        Network: passes, resolution (layers/resolver.py), plans per input shape,
                  pooled requests
plan_keys.py      what a plan is for: input shapes, the value inputs and their values
compiler.py       a graph compiled for concrete shapes: steps, memory plan, programs
plan.py           what a compiled network is made of (steps, tensors, aliases)
planner.py        memory planning by tensor lifetime
plan_buffers.py   what a plan allocates, for the device-memory checks
concat_in_place.py  Concat inputs written straight into their slices of its output
one_layer.py      one loaded layer run alone, as a network of one node
warmup.py         the built-in programs of representative models and op probes, built once

May import: runtime/layers, runtime/tuning, runtime/execute, runtime/device, the floors below.
"""
