"""Values known when a plan is compiled (Const nodes, value inputs), and tensors with no
element (a 0 dim, as ONNX allows): such a tensor is a value known when compiling (its shape
says all of it), so no layer computes it and no buffer holds it. A graph input with no element
takes no upload (its request buffer is a 1-byte placeholder, as OpenCL refuses size 0); a graph
output with no element is returned as an empty array with no read (execute/run.py).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...errors import BindingError
from ...jit.tensor import TensorDesc


def compiled_in(key, value: np.ndarray, dtype, consts, descs, empty) -> None:
    """A value known when compiling (a Const, a value input). One with no element (empty Reduce
    axes, a Slice that keeps nothing of a constant) is held as a value only: layers read it as
    a constant input, and a tensor of it, which no buffer can hold, is never made."""
    consts[key] = value
    descs[key] = TensorDesc(value.shape, dtype)
    if value.size == 0:
        empty[key] = tuple(value.shape)


def settle_empty(node, impl, call, in_keys, out_keys, out_descs, consts, descs, empty):
    """Zero-size tensors (a 0 dim) at one layer. Outputs that all have no element are values
    known when compiling: the layer runs nothing, and no buffer is made for them (OpenCL takes
    no global size or buffer size of 0). An input with no element read as data, where the
    outputs have some: dropped (impl.skips_empty_inputs: Concat), or the outputs are known
    when compiling (impl.empty_input_outputs: a Reduce over an empty axis), else refused
    naming the layer. Returns (call, in_keys) to compile, or None where nothing runs."""
    if out_descs and all(d.count == 0 for d in out_descs):
        for key, desc in zip(out_keys, out_descs):
            compiled_in(key, np.empty(desc.shape, desc.np_dtype), desc.dtype, consts, descs, empty)
        return None
    # by the shape, not only the keys known to be empty: a fused layer's alias has no key of its own
    empty_reads = [i for i, d in enumerate(call.inputs)
                   if d.count == 0 and i not in impl.const_inputs]
    for j, desc in enumerate(out_descs):
        if desc.count == 0:
            raise BindingError(f"{node.describe()}: output {j} has no element (shape "
                               f"{list(desc.shape)}) while another has some; a {node.type} "
                               f"layer does not run with a zero-size output among others")
    if not empty_reads:
        return call, in_keys
    if impl.skips_empty_inputs and len(empty_reads) < len(in_keys):
        kept = [i for i in range(len(in_keys)) if i not in empty_reads]
        call = replace(call, inputs=[call.inputs[i] for i in kept],
                       input_names=[call.input_names[i] for i in kept],
                       consts={n: call.consts[i] for n, i in enumerate(kept) if i in call.consts})
        return call, [in_keys[i] for i in kept]
    values = impl.empty_input_outputs(call, out_descs)
    if values is None:
        i = empty_reads[0]
        raise BindingError(f"{node.describe()}: input {i} is a zero-size tensor (shape "
                           f"{list(descs[in_keys[i]].shape)}), which a {node.type} layer does "
                           f"not take where its output is not empty")
    for key, desc, value in zip(out_keys, out_descs, values):
        compiled_in(key, np.asarray(value, desc.np_dtype), desc.dtype, consts, descs, empty)
    return None


def is_empty(shape) -> bool:
    return any(int(d) == 0 for d in shape)
