"""Values known when a plan is compiled (Const nodes, value inputs), and tensors with no
element: a compiled-in value with a 0 dim (empty Reduce axes, pads of no axis) is held as a
value only, for the layers that read it as a constant input; anything that would need a
zero-size tensor (a graph input, a layer's data input, a graph output) is refused naming it.
"""
from __future__ import annotations

import numpy as np

from ...errors import TensorError
from ...jit.tensor import TensorDesc


def compiled_in(key, value: np.ndarray, dtype, consts, descs, empty) -> None:
    """A value known when compiling (a Const, a value input). One with no element (empty Reduce
    axes, a Slice that keeps nothing of a constant) is held as a value only: layers read it as
    a constant input, and a tensor of it, which no buffer can hold, is never made."""
    consts[key] = value
    if value.size == 0:
        empty[key] = tuple(value.shape)
        descs[key] = TensorDesc((1,), dtype)        # a stand-in, never read
    else:
        descs[key] = TensorDesc(value.shape, dtype)


def check_not_empty(name: str, shape) -> None:
    """A graph input given with a 0 dim: refused naming it (layers run on tensors with at least
    one element; an empty input compiled in by value is taken: _compiled_in)."""
    if any(int(d) == 0 for d in shape):
        raise TensorError(f"input '{name}' is given with shape {list(shape)}: a zero-size "
                          f"tensor, which the layers here do not run on")


def check_empty_reads(node, in_keys, empty, impl) -> None:
    """A zero-size value read as data (not as an op's constant input), or a graph output of one,
    is refused naming the layer: the stand-in desc would give a wrong shape."""
    for i, key in enumerate(in_keys):
        if key in empty and (impl is None or i not in impl.const_inputs):
            what = "graph output" if impl is None else f"input {i}"
            raise TensorError(f"{what} is a zero-size tensor (shape {list(empty[key])}), which "
                              f"is not supported here as data")
