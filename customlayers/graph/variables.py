"""The variables of a stateful model (OpenVINO's ReadValue and Assign, named by variable_id):
what a graph must say of them before anything compiles it, checked on the graph alone.

Each variable is read by one or more ReadValue and written by at most one Assign; an Assign
of a variable that no ReadValue reads, and a shape or type the layers disagree on where both
are declared, are refused naming the layers and where they are in the file. The tensor of a
variable is settled when a plan is compiled (ops/tensor/state.py), which checks the rest.
"""
from __future__ import annotations

from ..errors import ModelError, shape_text
from .graph import Graph, Node

READ_VALUE = "ReadValue"
ASSIGN = "Assign"


def variables_of(graph: Graph) -> dict[str, tuple[list[Node], list[Node]]]:
    """variable id -> (its ReadValue nodes, its Assign nodes), in model order."""
    found: dict[str, tuple[list[Node], list[Node]]] = {}
    for node in graph:
        if node.type in (READ_VALUE, ASSIGN):
            name = _variable_id(node)
            readers, writers = found.setdefault(name, ([], []))
            (readers if node.type == READ_VALUE else writers).append(node)
    return found


def check_variables(graph: Graph) -> None:
    """ModelError naming the layer (and its file:line) for a variable the graph cannot hold."""
    for name, (readers, writers) in variables_of(graph).items():
        for node in readers + writers:
            _check_ports(node)
        if len(writers) > 1:
            raise ModelError(f"variable '{name}' is written by two Assign layers: "
                             f"{_where(writers[0])} and {_where(writers[1])}; a run writes a "
                             f"variable once")
        if writers and not readers:
            raise ModelError(f"{writers[0].describe()}: assigns variable '{name}', which no "
                             f"ReadValue of the model reads")
        _check_agreement(name, readers + writers)


def _variable_id(node: Node) -> str:
    name = (node.attrs.get("variable_id") or "").strip()
    if not name:
        raise ModelError(f"{node.describe()}: has no variable_id; a {node.type} names the "
                         f"variable it reads or writes")
    return name


def _check_ports(node: Node) -> None:
    if node.type == READ_VALUE:
        if len(node.inputs) > 1 or len(node.outputs) != 1:
            raise ModelError(f"{node.describe()}: a ReadValue has 0 or 1 input (its init) and "
                             f"1 output; found {len(node.inputs)} and {len(node.outputs)}")
    elif len(node.inputs) != 1 or len(node.outputs) > 1:
        raise ModelError(f"{node.describe()}: an Assign has 1 input and 0 or 1 output; found "
                         f"{len(node.inputs)} and {len(node.outputs)}")


def _declared(node: Node):
    """(shape, dtype) of the variable as the layer's port declares it."""
    port = node.outputs[0] if node.type == READ_VALUE else node.inputs[0]
    return port.shape, port.dtype


def _check_agreement(name: str, nodes: list[Node]) -> None:
    """The declared shapes and types of one variable's layers, where two are known."""
    first = None
    for node in nodes:
        shape, dtype = _declared(node)
        if first is None:
            first = (node, shape, dtype)
            continue
        other, other_shape, other_dtype = first
        if shape is not None and other_shape is not None and (
                len(shape) != len(other_shape) or
                any(a is not None and b is not None and a != b
                    for a, b in zip(shape, other_shape))):
            raise ModelError(f"variable '{name}': {_where(node)} has shape "
                             f"{shape_text(shape, ',')}, but {_where(other)} has "
                             f"{shape_text(other_shape, ',')}")
        if dtype and other_dtype and dtype != other_dtype:
            raise ModelError(f"variable '{name}': {_where(node)} has type {dtype}, but "
                             f"{_where(other)} has {other_dtype}")


def _where(node: Node) -> str:
    return f"'{node.name}' ({node.type}{' at ' + node.location if node.location else ''})"


