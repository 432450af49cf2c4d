"""A compiled plan's states (a stateful model's variables: ops/tensor/state.py): the tensor of
each, as the layers that name it agree on, and the order that keeps a run's reads of a state
before its write.

A state's key in the plan is jit/layer.py's state_ref(variable). It is no slot of the memory
plan: each request owns one buffer per state for its whole life (runtime/execute/states.py).
"""
from __future__ import annotations

from ...errors import ModelError
from ...graph.graph import Node
from ...jit.layer import state_ref


def register_states(node: Node, work_states: dict, states: dict, owners: dict,
                    descs: dict) -> None:
    """Record the states a layer's work names (variable -> TensorDesc) in `states` (key ->
    TensorDesc, in the order first named) and `descs`; ModelError naming both layers where
    two disagree on a variable's shape or type."""
    for name, desc in work_states.items():
        key = state_ref(name)
        known = states.get(key)
        if known is None:
            states[key] = descs[key] = desc
            owners[key] = node
        elif (tuple(known.shape), known.dtype) != (tuple(desc.shape), desc.dtype):
            other = owners[key]
            raise ModelError(f"variable '{name}': {node.describe()} has it "
                             f"{list(desc.shape)} {desc.dtype}, but {other.describe()} has "
                             f"{list(known.shape)} {known.dtype}")

