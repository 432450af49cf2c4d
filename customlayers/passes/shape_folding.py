"""Shape arithmetic folded into constants: the fold-only nodes the ONNX reader kept (Shape of a
tensor with a symbolic batch, the Gather/Concat/Range/Where after it) evaluated with numpy
(graph/fold_eval.py) and replaced by Const nodes, which the layers that read a shape operand
(Reshape, Broadcast, Tile, Slice, Unsqueeze) take as they take any constant.

A Shape's dims are known once the symbols in them are: the model names a graph input's dims
(a Parameter's dim_names, "batch,3,224,224") and ONNX shape inference carries those names to the
tensors after it. `fold_shape_arithmetic` (in PASSES) folds what the declared shapes decide,
once, at load; what depends on a symbolic dim stays, and `fold_for_shapes` folds the rest for
one request's concrete input shapes, when the Network compiles a plan for them (a new shape
re-plans, as a dynamic batch does). What still cannot be folded then is refused, naming the
node, its op and why.

A fold-only node may read a graph input by value (a Slice's starts, a Pad's pads, Reduce axes the
caller feeds): the Network compiles such an input in per value given (a value input), and
`fold_for_shapes` takes those values with the shapes.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from ..dtypes import from_numpy
from ..errors import ModelError
from ..graph.fold_eval import FOLD_TYPE, SHAPE_READERS, evaluate, parse_dims
from ..graph.graph import Graph, Node, Port


def has_fold_nodes(graph: Graph) -> bool:
    return any(n.type == FOLD_TYPE for n in graph)


def fold_shape_arithmetic(graph: Graph, is_builtin=None) -> tuple[Graph, list[str]]:
    """The pass in PASSES: folds what the model's declared input shapes decide."""
    return _fold(graph, None)


def fold_for_shapes(graph: Graph, input_shapes: Mapping[str, tuple],
                    input_values: Mapping[str, np.ndarray] | None = None) -> Graph:
    """Every fold-only node folded for these concrete input shapes (and values of the graph
    inputs fold-only nodes read: value_inputs); ModelError naming the first node that cannot
    be."""
    folded, _ = _fold(graph, dict(input_shapes), dict(input_values or {}))
    left = [n for n in folded if n.type == FOLD_TYPE]
    if left:
        raise ModelError(_unfolded(folded, left[0], _bindings(folded, input_shapes)))
    return folded


def _describe(node: Node) -> str:
    where = f" at {node.location}" if node.location else ""
    return f"node '{node.name}' ({node.attrs.get('op', '?')}, shape arithmetic){where}"


def _bindings(graph: Graph, input_shapes: Mapping[str, tuple] | None) -> dict[str, int]:
    """Symbol name -> its size, from each graph input's dim names and its concrete shape (the
    declared one when no shapes are given: its static dims only)."""
    bound: dict[str, int] = {}
    by: dict[str, str] = {}              # symbol name -> the input that bound it first
    for p in graph.parameters:
        names = parse_dims(p.attrs.get("dim_names", ""))
        if input_shapes is not None and p.name in input_shapes:
            shape = tuple(input_shapes[p.name])
        else:
            shape = p.outputs[0].shape if p.outputs and p.outputs[0].shape is not None else ()
        for name, size in zip(names, shape):
            if not isinstance(name, str) or size is None:
                continue
            by.setdefault(name, p.name)
            if bound.setdefault(name, int(size)) != int(size):
                raise ModelError(f"the model names dim '{name}' of several inputs alike: "
                                 f"input '{p.name}' gives it {size}, input '{by[name]}' "
                                 f"{bound[name]}")
    return bound


def _concrete(dims: list, bound: dict[str, int]) -> tuple | None:
    out = []
    for d in dims:
        size = d if isinstance(d, int) else bound.get(d) if isinstance(d, str) else None
        if size is None:
            return None
        out.append(size)
    return tuple(out)


def value_inputs_read(graph: Graph) -> dict[str, str]:
    """Graph inputs a fold-only node reads by value (not a Shape's input, read for its shape):
    input name -> which node reads it (for messages)."""
    found: dict[str, str] = {}
    for node in graph:
        if node.type != FOLD_TYPE:
            continue
        shape_only = node.attrs.get("op") in SHAPE_READERS
        for port in range(len(node.inputs)):
            src = graph.nodes[graph.producer(node.id, port)[0]]
            if src.type == "Parameter" and not (shape_only and port == 0):
                found.setdefault(src.name, f"read by {_describe(node)}")
    return found


def _fold(graph: Graph, input_shapes, input_values=None) -> tuple[Graph, list[str]]:
    if not has_fold_nodes(graph):
        return graph, []
    bound = _bindings(graph, input_shapes)
    order = graph.topological_order()
    values: dict[tuple[str, int], np.ndarray] = {
        (n.id, 0): np.asarray(n.value) for n in order if n.type == "Const" and n.value is not None}
    for n in order:                        # graph inputs given by value (value inputs)
        if n.type == "Parameter" and input_values and n.name in input_values:
            values[(n.id, 0)] = np.asarray(input_values[n.name])
    folded: set[str] = set()
    inferred: dict = {}          # value name -> dims, from the model's inference run again
    asked: set[str] | None = None
    while True:
        for node in order:
            if node.type == FOLD_TYPE and node.id not in folded:
                results = _evaluate(graph, node, values, bound, inferred)
                if results is not None:
                    for port, value in enumerate(results):
                        values[(node.id, port)] = value
                    folded.add(node.id)
        # a Shape waiting for dims inference left unnamed: inference again, with the values
        # folded so far (each round, the Slices and Reshapes they decide get their dims)
        if input_shapes is None or graph.value_shapes is None or \
                len(folded) == sum(n.type == FOLD_TYPE for n in order):
            break
        known = _known_values(graph, folded, values)
        if asked is not None and set(known) == asked:
            break
        asked = set(known)
        inferred = graph.value_shapes(input_shapes, known)
    if not folded:
        return graph, []
    return _with_constants(graph, folded, values), \
        [f"info: {len(folded)} shape-arithmetic node(s) folded into constants"]


def _known_values(graph: Graph, folded: set[str], values) -> dict[str, np.ndarray]:
    """The folded values by their names in the model."""
    known = {}
    for nid in folded:
        for port, out in enumerate(graph.nodes[nid].outputs):
            if out.names:
                known[out.names[0]] = values[(nid, port)]
    return known


def _evaluate(graph: Graph, node: Node, values, bound,
              inferred: dict) -> list[np.ndarray] | None:
    """The node's outputs, or None while an input is not known yet (a symbol not bound)."""
    op = node.attrs.get("op", "")
    present = [int(k) for k in node.attrs.get("present", "").split(",") if k]
    inputs: list = [None] * (max(present) + 1 if present else 0)
    shape = None
    for port, k in enumerate(present):
        src = graph.producer(node.id, port)
        if src in values:
            inputs[k] = values[src]
        elif op in SHAPE_READERS and k == 0:
            pass                                  # read for its shape only
        elif graph.nodes[src[0]].type in (FOLD_TYPE, "Parameter"):
            return None                           # waits for its producer, or the value
        else:
            producer = graph.nodes[src[0]]
            raise ModelError(f"{_describe(node)}: input {k} is computed at run time by "
                             f"{producer.describe()}; this op runs here only as shape "
                             f"arithmetic, folded before the network runs")
    if op in SHAPE_READERS:
        src = graph.producer(node.id, 0)
        if src in values:
            shape = values[src].shape
        else:
            shape = _concrete(parse_dims(node.attrs.get("dims", "")), bound) or \
                _inferred(graph, src, inferred)
            if shape is None:
                return None
    attrs = {k: v for k, v in node.attrs.items() if k not in ("op", "present", "dims")}
    try:
        results = evaluate(op, attrs, inputs, shape)
    except (ValueError, TypeError, IndexError) as e:
        raise ModelError(f"{_describe(node)}: {e}") from None
    if len(results) != len(node.outputs):
        raise ModelError(f"{_describe(node)}: gives {len(results)} values for "
                         f"{len(node.outputs)} outputs")
    return results


def _inferred(graph: Graph, src: tuple[str, int], inferred: dict) -> tuple | None:
    """A value's dims from the model's inference run again for the input shapes (where the
    reader's gave a dim no name: past a Reshape to a computed shape, a Slice to a computed
    end); None when it does not know them either."""
    names = graph.nodes[src[0]].outputs[src[1]].names
    dims = inferred.get(names[0]) if names else None
    return tuple(dims) if dims is not None and all(isinstance(d, int) for d in dims) else None


def _with_constants(graph: Graph, folded: set[str], values) -> Graph:
    """The graph with each folded node's read outputs as Const nodes in its place, and the
    constants only folded nodes read dropped."""
    readers = {e.src for e in graph.edges if e.dst not in folded}
    dead = {nid for nid, n in graph.nodes.items() if n.type == "Const" and nid not in readers}
    new = Graph(graph.name)
    new.value_shapes = graph.value_shapes
    made: dict[tuple[str, int], str] = {}
    for nid, node in graph.nodes.items():
        if nid in dead:
            continue
        if nid not in folded:
            new.add_node(node)
            continue
        for port, out in enumerate(node.outputs):
            if all(dst in folded for dst, _ in graph.consumers(nid, port)):
                continue                          # read by folded nodes only (or none)
            value = values[(nid, port)]
            dtype = from_numpy(value.dtype) or "i64"
            const = Node(id=f"{nid}/folded{port}", name=out.names[0] if out.names else
                         f"{node.name}/{port}", type="Const",
                         attrs={"element_type": dtype,
                                "shape": ", ".join(str(d) for d in value.shape)},
                         value=value, location=node.location,
                         outputs=[Port(tuple(value.shape), dtype, out.names)])
            new.add_node(const)
            made[(nid, port)] = const.id
    for e in graph.edges:
        if e.dst in folded or e.dst in dead:
            continue
        src = (made[(e.src, e.src_port)], 0) if e.src in folded else (e.src, e.src_port)
        new.connect(src[0], src[1], e.dst, e.dst_port)
    return new


def _unfolded(graph: Graph, node: Node, bound: dict[str, int]) -> str:
    """Why `node` is still not folded: the first of its chain whose input shape is unknown."""
    op = node.attrs.get("op", "")
    for port in range(len(node.inputs)):
        src = graph.nodes[graph.producer(node.id, port)[0]]
        if src.type == FOLD_TYPE:
            return _unfolded(graph, src, bound)
    if op in SHAPE_READERS:
        dims = ["?" if d is None else d for d in parse_dims(node.attrs.get("dims", ""))]
        unknown = [d for d in dims if not isinstance(d, int) and (d == "?" or d not in bound)]
        src, port = graph.producer(node.id, 0)
        names = graph.nodes[src].outputs[port].names
        what = names[0] if names else graph.nodes[src].name
        return (f"{_describe(node)}: the shape of '{what}' ({', '.join(map(str, dims))}) is "
                f"not known for the inputs' shapes: no graph input's dims decide "
                f"{', '.join(map(str, unknown))}")
    return f"{_describe(node)}: its inputs are not known before the network runs"
