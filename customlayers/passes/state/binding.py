"""The carried state of ONNX CausalConvWithState bound to a state of the request: a graph input
that feeds nothing but one such node's past_state, paired with the graph output that is the same
node's present_state, becomes a ReadValue and an Assign of one variable (OpenVINO's names;
ops/tensor/state.py runs them, the request owns the tensor on the device across its runs).

    past_state input P ─► CausalConvWithState ─► present_state output R
becomes
    ReadValue(variable_id=P) ─► CausalConvWithState ─► Assign(variable_id=P)

The variable is named after the input (a model's input names are unique), holds the input's
shape and type, and starts at zeros (a ReadValue without an init input: so after every
reset_state too), as the op's own past_state does when it is omitted. So a model whose user
carried the state (feeding each call's present_state back as the next call's past_state) runs
chunk after chunk on one request without passing it: the state never leaves the device.

The Result goes with its input: the state no longer comes back to the host at every run (that
read is the round trip this binding is for); request.query_state() reads it when asked.

Not in PASSES: a model is bound only when asked (streamed), never silently, since the binding
takes an input and an output away from the model. Inputs that look like such a state but cannot
be bound (a dim not known, a type a state does not take) stay inputs, with a note saying why.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Sequence

from ...dtypes import BY_NAME
from ...errors import ModelError, shape_text
from ...graph.graph import Graph, Node, Port
from ...graph.variables import ASSIGN, READ_VALUE, variables_of
from ..graph_edit import rebuilt_graph

CAUSAL_CONV = "CausalConvWithState"


def bind_state_inputs(graph: Graph, is_builtin=None, *,
                      shapes: Mapping[str, Sequence[int]] | None = None
                      ) -> tuple[Graph, list[str]]:
    """(the rewritten graph, one note per input bound or left as it was); the graph itself
    when nothing is bound. `is_builtin(node)`: the node runs its type's built-in (only those
    are bound; None: every node does), as for the passes of PASSES. `shapes`: input name ->
    the state's shape where the model leaves a dim symbolic (a dynamic batch: a state holds one
    shape, and a request runs one batch); ModelError where it contradicts the model."""
    changed: dict[str, Node] = {}
    notes: list[str] = []
    taken = set(variables_of(graph))          # the model's own variables (an IR's ReadValue)
    candidates = []
    for param in graph.parameters:
        conv = _sole_past_state_reader(graph, param)
        if conv is None or (is_builtin is not None and not is_builtin(conv)):
            continue
        candidates.append(_value_name(param))
        result = _present_state_result(graph, conv)
        name = _value_name(param)
        if result is None:
            notes.append(f"input '{name}' feeds the past_state of {_layer(conv)}, whose "
                         f"present_state is no output of the model: left an input")
            continue
        port = _given_shape(param.outputs[0], name, (shapes or {}).get(name))
        why = _unbindable(port) or \
            (f"the model has a variable '{name}' already" if name in taken else "")
        if why:
            notes.append(f"input '{name}' (the past_state of {_layer(conv)}) is left an "
                         f"input: {why}")
            continue
        changed[param.id] = replace(param, type=READ_VALUE, inputs=[], outputs=[port], attrs={
            "variable_id": name, "variable_shape": ",".join(str(d) for d in port.shape),
            "variable_type": BY_NAME[port.dtype].ir_element_type})
        changed[result.id] = replace(result, type=ASSIGN, name=f"{name}/assign",
                                     attrs={"variable_id": name}, outputs=[])
        notes.append(f"input '{name}' and output '{_value_name(result)}' of {_layer(conv)} "
                     f"are bound to state '{name}' (ReadValue, Assign): the request keeps it on "
                     f"the device across runs, from zeros")
    unknown = sorted(set(shapes or {}) - set(candidates))
    if unknown:
        raise ModelError(f"bind_state_inputs: shapes names {', '.join(map(repr, unknown))}, "
                         f"which {'is' if len(unknown) == 1 else 'are'} no past_state input of "
                         f"the model; those are: {', '.join(candidates) or 'none'}")
    if not changed:
        return graph, notes
    return rebuilt_graph(graph, changed, set(), {}), notes


def _sole_past_state_reader(graph: Graph, param: Node) -> Node | None:
    """The CausalConvWithState node whose past_state `param` is, where that is all it feeds."""
    users = graph.consumers(param.id, 0)
    if len(users) != 1:
        return None
    node, port = graph.nodes[users[0][0]], users[0][1]
    if node.type != CAUSAL_CONV or node.attrs.get("has_past_state", "false") != "true":
        return None
    past_port = 3 if node.attrs.get("has_bias", "false") == "true" else 2
    return node if port == past_port and len(node.outputs) == 2 else None


def _present_state_result(graph: Graph, conv: Node) -> Node | None:
    """The Result (graph output) of `conv`'s present_state, if the model has one."""
    for dst, _ in graph.consumers(conv.id, 1):
        if graph.nodes[dst].type == "Result":
            return graph.nodes[dst]
    return None


def _given_shape(port: Port, name: str, shape) -> Port:
    """`port` with the shape the caller gives its state, checked against the model's dims."""
    if shape is None:
        return port
    shape = tuple(int(d) for d in shape)
    declared = port.shape
    if declared is not None and (len(declared) != len(shape) or any(
            d is not None and d != s for d, s in zip(declared, shape))) or \
            any(d < 0 for d in shape):
        raise ModelError(f"bind_state_inputs: shapes['{name}'] = {list(shape)} does not fit "
                         f"input '{name}', declared {_dims(declared)}")
    return replace(port, shape=shape)


def _unbindable(port: Port) -> str:
    """Why a state cannot hold a tensor like `port` ('' where it can)."""
    if port.shape is None or any(d is None for d in port.shape):
        return (f"its shape {_dims(port.shape)} is not static, and a state's shape is fixed "
                f"when the model is compiled (give it: shapes={{input name: shape}})")
    entry = BY_NAME.get(port.dtype)
    if entry is None or entry.ir_element_type is None:
        return f"a state of {port.dtype} has no IR element type (variable_type)"
    return ""


def _layer(node: Node) -> str:
    return f"layer '{node.name}' ({node.type})"


def _value_name(node: Node) -> str:
    """The model's name of a Parameter's output or a Result's input."""
    port = node.outputs[0] if node.type == "Parameter" else node.inputs[0]
    return port.names[0] if port.names else node.name


def _dims(shape) -> str:
    return "(unknown)" if shape is None else shape_text(shape)
