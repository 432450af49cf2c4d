"""The shapes a plan's input shapes give every tensor, written onto the graph's ports, so that the
rewrites that need known shapes (view_folding.py, attention_folding.py, window_folding.py, ...)
fold a model whose inputs have dynamic dims as they fold a static one.

A model read with a symbolic batch or sequence keeps None in those dims on its layers' ports;
Network folds its shape arithmetic per set of input shapes (shape_folding.fold_for_shapes) and
runs the rewrites again, which left the chains that need shapes alone: a dynamic-sequence BERT
ran its head split as copies and its attention unfused. Here each layer's own shape inference
(LayerImpl.outputs, what the compiler asks it) runs over the graph in order for the plan's
input shapes; the result is the graph with every port's shape set. Where a layer cannot say (a
custom layer, an error its compile will report with its name), the graph is returned as it was.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping

import numpy as np

from ..errors import CustomLayersError
from ..graph.graph import Graph, Node
from ..jit.launch import CompileContext
from ..jit.layer import LayerCall
from ..jit.tensor import TensorDesc


def with_concrete_shapes(graph: Graph, impl_of: Callable[[Node], object], device,
                         input_shapes: Mapping[str, tuple],
                         input_values: Mapping[str, np.ndarray] | None = None) -> Graph:
    """`graph` with the shape of every port as `input_shapes` (and the values of the value
    inputs) make it; `graph` itself where nothing is unknown or a layer cannot say.
    impl_of(node): the node's LayerImpl (None: not known); device: the DeviceTraits the layers
    choose by."""
    if all(p.shape is not None and None not in p.shape
           for n in graph.nodes.values() for p in n.inputs + n.outputs):
        return graph
    values = dict(input_values or {})
    descs: dict[tuple[str, int], TensorDesc] = {}
    consts: dict[tuple[str, int], np.ndarray] = {}
    shapes: dict[str, list[tuple]] = {}
    try:
        for node in graph.topological_order():
            if node.type == "Parameter":
                if node.name in values:
                    consts[(node.id, 0)] = np.asarray(values[node.name])
                    shape = consts[(node.id, 0)].shape
                elif node.name in input_shapes:
                    shape = tuple(int(d) for d in input_shapes[node.name])
                else:
                    return graph
                dtype = node.outputs[0].dtype if node.outputs else "f32"
                descs[(node.id, 0)] = TensorDesc(tuple(shape), dtype)
                shapes[node.id] = [tuple(shape)]
                continue
            if node.type == "Const":
                value = np.asarray(node.value)
                consts[(node.id, 0)] = value
                descs[(node.id, 0)] = TensorDesc(value.shape, node.outputs[0].dtype
                                                 if node.outputs else str(value.dtype))
                shapes[node.id] = [value.shape]
                continue
            if node.type == "Result":
                continue
            impl = impl_of(node)
            if impl is None:
                return graph
            keys = [graph.producer(node.id, i) for i in range(len(node.inputs))]
            call = LayerCall(name=node.name, where=node.describe(), type=node.type,
                             attrs=impl.parse_attributes(node.attrs, node.name),
                             inputs=[descs[k] for k in keys],
                             consts={i: consts[k] for i, k in enumerate(keys) if k in consts},
                             declared=[(p.shape, p.dtype) for p in node.outputs],
                             context=CompileContext(device, facts=node.facts))
            outs = impl.outputs(call)
            if len(outs) != len(node.outputs):
                return graph
            for j, desc in enumerate(outs):
                descs[(node.id, j)] = desc
            shapes[node.id] = [tuple(d.shape) for d in outs]
    except (CustomLayersError, KeyError):
        return graph                    # the layer's compile reports it, with its name
    return _rebuilt(graph, shapes)


def _filled(declared, inferred) -> tuple:
    """The port's declared shape with its open dims taken from the inferred one: a dim the model
    declares stays, so that where it disagrees the layer's compile refuses it, naming the
    layer, as it does for a model declared whole (an IR's shapes are the model's word)."""
    if declared is None or len(declared) != len(inferred):
        return tuple(inferred) if declared is None else tuple(declared)
    return tuple(i if d is None else d for d, i in zip(declared, inferred))


def _rebuilt(graph: Graph, shapes: dict[str, list[tuple]]) -> Graph:
    new = Graph(graph.name)
    new.value_shapes = graph.value_shapes
    for nid, node in graph.nodes.items():
        outputs = [replace(p, shape=_filled(p.shape, shapes[nid][j])) if nid in shapes else p
                   for j, p in enumerate(node.outputs)]
        inputs = []
        for i, port in enumerate(node.inputs):
            src, sport = graph.producer(nid, i)
            inputs.append(replace(port, shape=_filled(port.shape, shapes[src][sport]))
                          if src in shapes else port)
        new.add_node(replace(node, inputs=inputs, outputs=outputs))
    for e in graph.edges:
        new.connect(e.src, e.src_port, e.dst, e.dst_port)
    return new
