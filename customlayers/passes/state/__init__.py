"""passes/state: rewrites that give a model state of the request (ReadValue/Assign, over the
tensors runtime/execute/states.py keeps on the device across a request's runs).

binding.py   bind_state_inputs: the past_state input and present_state output of an ONNX
             CausalConvWithState become a ReadValue and an Assign of one variable (asked for,
             not in PASSES)

May import: what passes/ may (graph/, jit/, ops/, errors, dtypes) and ../graph_edit.py;
never runtime/ or pyopencl.
"""
from .binding import bind_state_inputs  # noqa: F401
