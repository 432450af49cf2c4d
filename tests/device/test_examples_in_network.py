"""Every example custom layer inside a network: the executor may hand kernels padded tensors, and
each example gives the same result on padded inputs as on dense ones (and as its reference).
MVCL kernels take dense tensors (no pitches), so for them the rule is that the padding offered
never reaches a kernel. The MVCL examples also run inside real model files: an OpenVINO IR and an
ONNX model (a custom-domain node) written by the test."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.cli.demo import case_arrays, find_examples, layer_type_of
from customlayers.graph.graph import Graph, Node, Port

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
    from customlayers.runtime.device import Engine
    from customlayers.runtime.registry import Registry
    reg = Registry(Engine(test_device))
    reg.load(*(e.config for e in EXAMPLES))
    return reg


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_example_in_a_network_with_padded_inputs(registry, example):
    from customlayers.runtime.network import Network
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


def _ir_dims(shape) -> str:
    return "".join(f"<dim>{d}</dim>" for d in shape)


def write_ir(path, layer_type: str, inputs, outputs, params: dict):
    """An OpenVINO IR (v11) file: Parameters -> one layer of `layer_type` -> Results."""
    data = " ".join(f'{k}="{v}"' for k, v in params.items())
    n_in = len(inputs)
    layers = [f'<layer id="{i}" name="x{i}" type="Parameter" version="opset1">'
              f'<data shape="{",".join(map(str, a.shape))}" element_type="f32"/>'
              f'<output><port id="0" precision="FP32" names="x{i}">{_ir_dims(a.shape)}</port>'
              f'</output></layer>' for i, a in enumerate(inputs)]
    ins = "".join(f'<port id="{i}" precision="FP32">{_ir_dims(a.shape)}</port>'
                  for i, a in enumerate(inputs))
    outs = "".join(f'<port id="{n_in + j}" precision="FP32" names="y{j}">{_ir_dims(o.shape)}'
                   f'</port>' for j, o in enumerate(outputs))
    layers.append(f'<layer id="{n_in}" name="custom" type="{layer_type}" version="extension">'
                  f'<data {data}/><input>{ins}</input><output>{outs}</output></layer>')
    layers += [f'<layer id="{n_in + 1 + j}" name="y{j}/sink" type="Result" version="opset1">'
               f'<input><port id="0" precision="FP32">{_ir_dims(o.shape)}</port></input>'
               f'</layer>' for j, o in enumerate(outputs)]
    edges = [f'<edge from-layer="{i}" from-port="0" to-layer="{n_in}" to-port="{i}"/>'
             for i in range(n_in)]
    edges += [f'<edge from-layer="{n_in}" from-port="{n_in + j}" to-layer="{n_in + 1 + j}" '
              f'to-port="0"/>' for j in range(len(outputs))]
    path.write_text(f'<?xml version="1.0"?>\n<net name="one" version="11"><layers>'
                    f'{"".join(layers)}</layers><edges>{"".join(edges)}</edges></net>\n')
    return path


def write_onnx(path, layer_type: str, inputs, outputs, params: dict, declare_outputs=True):
    """An ONNX model: one node of `layer_type` in the custom domain com.example; its outputs'
    value_info (the graph outputs) declared, or left without shape."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    node = helper.make_node(layer_type, [f"x{i}" for i in range(len(inputs))],
                            [f"y{j}" for j in range(len(outputs))], name="custom",
                            domain="com.example", **params)
    graph = helper.make_graph(
        [node], "one",
        [helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, a.shape)
         for i, a in enumerate(inputs)],
        [helper.make_tensor_value_info(f"y{j}", TensorProto.FLOAT,
                                       o.shape if declare_outputs else None)
         for j, o in enumerate(outputs)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid("com.example", 1)])
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("kind", ["ir", "onnx"])
@pytest.mark.parametrize("example", MVCL_EXAMPLES, ids=[e.name for e in MVCL_EXAMPLES])
def test_mvcl_example_in_a_model_file(registry, example, kind, tmp_path):
    from customlayers.runtime.network import Network
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
