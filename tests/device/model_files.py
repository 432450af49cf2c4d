"""Model files with one custom layer, written by the tests: an OpenVINO IR (v11) and an ONNX
model (a custom-domain node), for real readers to read. Inputs are float32 Parameters x0, x1,
...; outputs y0, y1, ...; the layer node is named "custom"."""
from __future__ import annotations

import pytest


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
