"""Every example custom layer inside a network: the executor may hand kernels padded tensors, and
each example gives the same result on padded inputs as on dense ones (and as its reference).
MVCL kernels take dense tensors (no pitches), so for them the rule is that the padding offered
never reaches a kernel. The MVCL examples also run inside real model files: an OpenVINO IR and an
ONNX model (a custom-domain node) written by the test."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.cli.model_commands.demo import case_arrays, find_examples, layer_type_of
from customlayers.graph.graph import Graph, Node, Port
from model_files import write_ir, write_onnx

EXAMPLES = find_examples()
PADDINGS = [((0, 0, 1, 1), (0, 0, 1, 1)), ((1, 2, 0, 3), (0, 1, 2, 0))]


def one_layer_graph(layer_type: str, inputs, data: dict, outputs, params: dict) -> Graph:
    """Parameters (and Const Data blobs) -> one layer of `layer_type` -> Results."""
    g = Graph(layer_type)
    ports = [Port(tuple(a.shape), "f32") for a in inputs]
    blob_ports = [Port(tuple(v.shape), "f32", (name,)) for name, v in data.items()]
    g.add_node(Node("layer", "layer", layer_type, {k: str(v) for k, v in params.items()},
                    [*ports, *blob_ports], [Port(tuple(o.shape), "f32") for o in outputs]))
    for i, port in enumerate(ports):
        g.add_node(Node(f"in{i}", f"in{i}", "Parameter", outputs=[port]))
        g.connect(f"in{i}", 0, "layer", i)
    for j, (name, value) in enumerate(data.items()):
        g.add_node(Node(name, name, "Const", outputs=[blob_ports[j]], value=value))
        g.connect(name, 0, "layer", len(ports) + j)
    for j, o in enumerate(outputs):
        g.add_node(Node(f"out{j}", f"out{j}", "Result", inputs=[Port(tuple(o.shape), "f32")]))
        g.connect("layer", j, f"out{j}", 0)
    return g


@pytest.fixture(scope="module")
def registry(test_device):
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.layers.registry import Registry
    reg = Registry(Engine(test_device))
    reg.load(*(e.config for e in EXAMPLES))
    return reg


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_example_in_a_network_with_padded_inputs(registry, example):
    from customlayers.runtime.compile.network import Network
    layer = layer_type_of(registry, example)
    for case in example.reference.CASES:
        inputs, data = case_arrays(case, seed=3)
        params = dict(case.get("params", {}))
        expected = example.reference.reference(inputs, params, data)
        graph = one_layer_graph(layer, inputs, data, expected, params)
        feed = {f"in{i}": a for i, a in enumerate(inputs)}
        dense = Network(graph, registry, registry.engine).infer(feed)
        for pad in PADDINGS:
            net = Network(graph, registry, registry.engine, pad_custom_inputs=pad)
            custom = [s for s in net.plan.steps if s.impl == "custom"]
            if example.kind == "MVCL":
                # raw pointers, no pitches: whatever padding is offered, MVCL kernels see
                # dense tensors
                assert custom and not any(d.is_padded for s in custom
                                          for d in s.input_descs + s.output_descs)
            else:
                assert all(d.is_padded for d in custom[0].input_descs)
            padded = net.infer(feed)
            for j, want in enumerate(expected):
                np.testing.assert_array_equal(padded[f"out{j}"], dense[f"out{j}"])
                np.testing.assert_allclose(padded[f"out{j}"], want, rtol=1e-5, atol=1e-6)


MVCL_EXAMPLES = [e for e in EXAMPLES if e.kind == "MVCL"]


@pytest.mark.parametrize("kind", ["ir", "onnx"])
@pytest.mark.parametrize("example", MVCL_EXAMPLES, ids=[e.name for e in MVCL_EXAMPLES])
def test_mvcl_example_in_a_model_file(registry, example, kind, tmp_path):
    from customlayers.runtime.compile.network import Network
    layer = layer_type_of(registry, example)
    for n, case in enumerate(example.reference.CASES):
        inputs, data = case_arrays(case, seed=5)
        assert not data, "write_ir/write_onnx take no Data blobs"
        params = dict(case.get("params", {}))
        expected = example.reference.reference(inputs, params, data)
        write = write_ir if kind == "ir" else write_onnx
        path = write(tmp_path / f"case{n}.{'xml' if kind == 'ir' else 'onnx'}", layer, inputs,
                     expected, params)
        net = Network(path, registry, registry.engine, profiling=True)
        got = net.infer({f"x{i}": a for i, a in enumerate(inputs)})
        for j, want in enumerate(expected):
            np.testing.assert_allclose(got[f"y{j}"], want, rtol=1e-5, atol=1e-6)
        stages = [s.name for s in net.plan.steps if s.impl == "custom"]
        count = len(registry.spec(layer).select(params))
        assert stages == (["custom"] if count == 1 else
                          [f"custom/stage{k}" for k in range(count)])
