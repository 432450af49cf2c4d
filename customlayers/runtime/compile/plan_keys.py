"""What one compiled plan of a Network is for, and the key that tells plans apart: the input
shapes, and the values of the value inputs (graph inputs a layer reads as a compile-time
constant, such as a Reshape target fed by the caller). network.py keeps one plan per key.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ...errors import ModelError
from ...graph.graph import Graph
from ...jit.tensor import TensorDesc
from ...passes.shape_folding import value_inputs_read

# A graph input that a built-in op reads as a compile-time constant (a Reshape target, an
# Expand shape, Tile repeats) is compiled in by value; more elements than this is not a shape.
MAX_VALUE_INPUT_ELEMENTS = 64


def find_value_inputs(graph: Graph, order, impls) -> dict[str, str]:
    """Graph inputs that a layer reads as a compile-time constant (its implementation's
    const_inputs), directly or through shape-only views, or that shape arithmetic left for the
    plans reads (passes/shape_folding.py): their values are part of a plan's key. Name -> the
    layer input that reads it (for messages)."""
    g = graph
    found: dict[str, str] = dict(value_inputs_read(g))
    for node in order:
        if node.id not in impls:
            continue
        for i in impls[node.id].const_inputs:
            if i >= len(node.inputs):
                continue
            src = g.nodes[g.producer(node.id, i)[0]]
            while src.id in impls and impls[src.id].is_view and src.inputs:
                src = g.nodes[g.producer(src.id, 0)[0]]
            if src.type == "Parameter":
                found.setdefault(src.name, f"input {i} of layer '{node.name}' ({node.type})")
    return found


def value_input_arrays(graph: Graph, value_inputs: Mapping[str, str],
                       arrays: Mapping[str, np.ndarray],
                       shapes: Mapping[str, tuple]) -> dict[str, np.ndarray]:
    """The value inputs' arrays, in their declared element type, checked to be small."""
    values = {}
    for name, why in value_inputs.items():
        if name not in arrays:
            raise ModelError(f"input '{name}' is {why}, which is compiled in as a constant: "
                             f"give its value (infer with arrays, or input_values)")
        value = np.asarray(arrays[name])
        if value.size > MAX_VALUE_INPUT_ELEMENTS or value.dtype.kind not in "biuf":
            raise ModelError(f"input '{name}' is {why}, which is compiled in as a constant: "
                             f"expected at most {MAX_VALUE_INPUT_ELEMENTS} numbers, found "
                             f"{value.size} of type {value.dtype}")
        if name in shapes and tuple(value.shape) != tuple(shapes[name]):
            raise ModelError(f"input '{name}' has shape {list(value.shape)}, but shape "
                             f"{list(shapes[name])} was given for it")
        node = next(p for p in graph.parameters if p.name == name)
        dtype = node.outputs[0].dtype if node.outputs and node.outputs[0].dtype else "i64"
        values[name] = value.astype(TensorDesc((), dtype).np_dtype)
    return values


def has_open_inputs(graph: Graph) -> bool:
    """Whether the model leaves a dimension of an input (or a whole shape) open."""
    return any(not p.outputs or p.outputs[0].shape is None or
               any(d is None for d in p.outputs[0].shape) for p in graph.parameters)


def static_input_shapes(graph: Graph, given: Mapping[str, Sequence[int]]):
    """Every input's shape, from `given` or the model's own; None where one is open (the
    plans are then compiled per shape at the first infer)."""
    shapes = {}
    for p in graph.parameters:
        if p.name in given:
            shapes[p.name] = tuple(int(d) for d in given[p.name])
        elif p.outputs and p.outputs[0].shape is not None and \
                all(d is not None for d in p.outputs[0].shape):
            shapes[p.name] = tuple(p.outputs[0].shape)
        else:
            return None
    unknown = set(given) - {p.name for p in graph.parameters}
    if unknown:
        named = ", ".join(f"'{name}'" for name in sorted(unknown))
        verb = "is not an input" if len(unknown) == 1 else "are not inputs"
        raise ModelError(f"{named} {verb} of the model; its inputs: "
                         f"{', '.join(p.name for p in graph.parameters)}")
    return shapes


def plan_key(shapes: Mapping[str, tuple], values: Mapping[str, np.ndarray]) -> tuple:
    """Plans differ by input shapes and by the values of the value inputs."""
    return (tuple(sorted((n, tuple(s)) for n, s in shapes.items())),
            tuple(sorted((n, tuple(v.reshape(-1).tolist())) for n, v in values.items())))
