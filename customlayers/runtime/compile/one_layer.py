"""One loaded layer run alone: a graph of one node (Parameters, Const blobs -> the layer ->
Results) compiled and run by a Network, so a layer alone goes through exactly the path it takes
in a model (its adapter, reorders, internal buffers, memory plan, program cache).

    outputs = run_layer(registry, "MVN", [x], params={"eps": "1e-9"})

Any kind of loaded layer runs this way; MVCL layers, which have no single bound kernel
(Registry.bind), run alone only this way (`run-layer`, `customlayers.api.run_layer`). It lives
above the catalog (runtime/layers/registry.py): the registry loads and binds, this runs.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ...config.dialects import dialect_of
from ...errors import BindingError
from ...graph.graph import Graph, Node, Port
from ...jit.tensor import normalize_dtype
from ..layers.dialects import runtime_of
from .network import Network


def as_kernel_array(array) -> np.ndarray:
    """float64 runs as float32: custom layers take no double (most devices lack fp64)."""
    arr = np.asarray(array)
    return arr.astype(np.float32) if arr.dtype == np.float64 else arr


def output_count(spec, params: Mapping[str, str]) -> int:
    """How many outputs the layer writes: an MVCL layer's variant for these attributes decides."""
    return runtime_of(spec).output_count(spec, params)


def data_names(spec, params: Mapping[str, str]) -> list[str]:
    """The names of the constant blobs the layer binds (for these attributes)."""
    return runtime_of(spec).data_names(spec, params)


def one_layer_graph(layer_type: str, inputs: Sequence[np.ndarray],
                    data: Mapping[str, np.ndarray], outputs: Sequence[tuple | None],
                    params: Mapping[str, str]) -> Graph:
    """Parameters input0.. (and Const nodes named after the Data blobs) -> one node of
    `layer_type` named after it -> Results; the node's outputs are output0, output1, ...
    declared with `outputs` (None: undeclared, the layer decides)."""
    g = Graph(layer_type)
    ports = [Port(tuple(a.shape), normalize_dtype(a.dtype)) for a in inputs]
    blob_ports = [Port(tuple(v.shape), normalize_dtype(v.dtype), (name,))
                  for name, v in data.items()]
    out_ports = [Port(None if s is None else tuple(s), "", (f"output{j}",))
                 for j, s in enumerate(outputs)]
    g.add_node(Node(layer_type, layer_type, layer_type, {k: str(v) for k, v in params.items()},
                    [*ports, *blob_ports], out_ports))
    for i, port in enumerate(ports):
        g.add_node(Node(f"input{i}", f"input{i}", "Parameter", outputs=[port]))
        g.connect(f"input{i}", 0, layer_type, i)
    for j, (name, value) in enumerate(data.items()):
        g.add_node(Node(name, name, "Const", outputs=[blob_ports[j]], value=value))
        g.connect(name, 0, layer_type, len(ports) + j)
    for j, port in enumerate(out_ports):
        g.add_node(Node(f"output{j}/sink", f"output{j}/sink", "Result", inputs=[port]))
        g.connect(layer_type, j, f"output{j}/sink", 0)
    return g


def run_layer(registry, layer_type: str, inputs: Sequence[np.ndarray],
              params: Mapping[str, str] | None = None,
              data: Mapping[str, np.ndarray] | None = None,
              output_shapes: Sequence[Sequence[int]] | None = None) -> list[np.ndarray]:
    """Run loaded layer `layer_type` of `registry` on its engine: numpy arrays in (dense,
    B,F,Y,X), the outputs out. `output_shapes`: one per output; an MVCL layer needs them (it
    has no shape formula); without them a SimpleGPU layer's outputs take its shape formula, else
    input 0's shape."""
    network, feeds, count = one_layer_network(registry, layer_type, inputs, params, data,
                                              output_shapes)
    result = network.infer(feeds)
    return [result[f"output{j}"] for j in range(count)]


def one_layer_network(registry, layer_type: str, inputs: Sequence[np.ndarray],
                      params: Mapping[str, str] | None = None,
                      data: Mapping[str, np.ndarray] | None = None,
                      output_shapes: Sequence[Sequence[int]] | None = None):
    """What run_layer runs, not run: (the one-layer Network, its feeds {input name: array},
    the layer's output count), for a caller that checks its kernels first (run-layer's
    --check-bounds and --sanitize on an MVCL layer)."""
    spec = registry.spec(layer_type)
    params = {k: str(v) for k, v in (params or {}).items()}
    unused = runtime_of(spec).unused_params(spec, params)
    if unused:                     # a parameter no Define reads would run the default
        raise BindingError(runtime_of(spec).unused_params_message(spec, unused))
    if isinstance(inputs, np.ndarray):
        raise BindingError(f"run_layer takes the inputs of layer '{layer_type}' as a list of "
                           f"arrays, one per input port; an array was given (its first axis "
                           f"would be read as the inputs): pass [x]")
    arrays = [as_kernel_array(a) for a in inputs]
    blobs = {k: as_kernel_array(v) for k, v in (data or {}).items()}
    count = output_count(spec, params)
    if output_shapes is None and not dialect_of(spec).shape_formula:
        # alone, nothing declares the outputs, and input 0's shape would be a guess
        raise BindingError(f"layer '{layer_type}' ({spec.location}) is an MVCL layer, which has "
                           f"no shape formula: give the shape of each of its {count} output(s)")
    if output_shapes is not None and len(output_shapes) != count:
        raise BindingError(f"layer '{layer_type}' writes {count} output(s); "
                           f"{len(output_shapes)} output shape(s) given")
    declared = list(output_shapes) if output_shapes is not None else [None] * count
    graph = one_layer_graph(layer_type, arrays, blobs, declared, params)
    network = Network(graph, registry, registry.engine)
    return network, {f"input{i}": a for i, a in enumerate(arrays)}, count
