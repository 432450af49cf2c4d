"""Make the ONNX demo models: standard ops around custom nodes, built with onnx.helper.

    .venv/bin/python examples/models/make_onnx_models.py [--out DIR]

custom_node.onnx   x 1x3x16x16 -> Conv 4x3x3x3 (pad 1) + bias -> Relu -> GRN (domain
                   com.example, bias=1e-06) -> MaxPool 2x2/2 -> y 1x4x8x8.
                   GRN keeps its input's shape, so the output needs no shape information.
                   Runs with examples/layers/grn/grn.xml.
reorg_dynamic.onnx x Nx4x6x8 (a dynamic batch "N") -> ReorgYolo (domain com.example,
                   stride=2) -> Sigmoid -> y Nx16x3x4. The custom node's output shape is in
                   the model's value_info as ["N",16,3,4]: ONNX shape inference cannot know it,
                   and reorg.xml gives no shape formula; the batch comes from the run's input.
                   Runs with examples/layers/reorg/reorg.xml and e.g. --shape x=2x4x6x8.

The custom nodes' op_types are the CustomLayer names of examples/layers/; their attributes
feed the Define params as text (bias -> BIAS, stride -> STRIDE). Weights are seeded: rerunning
the script gives the same files.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SEED = 11
CUSTOM_DOMAIN = "com.example"
OPSET = 13
GRN_BIAS = 1e-06


def _model(nodes, inputs, outputs, initializers=(), value_info=(), name="model"):
    from onnx import checker, helper
    graph = helper.make_graph(nodes, name, inputs, outputs, list(initializers),
                              value_info=list(value_info))
    model = helper.make_model(graph, producer_name="customlayers examples",
                              opset_imports=[helper.make_opsetid("", OPSET),
                                             helper.make_opsetid(CUSTOM_DOMAIN, 1)])
    model.ir_version = 8            # readable by older onnx/onnxruntime releases too
    checker.check_model(model)      # the checker skips nodes of domains it does not know
    return model


def custom_node_model():
    """Conv + bias -> Relu -> GRN (custom) -> MaxPool, input 1x3x16x16."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(SEED)
    w = (rng.standard_normal((4, 3, 3, 3)) * np.sqrt(2.0 / 27)).astype(np.float32)
    b = (rng.standard_normal(4) * 0.1).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["conv"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["relu"], name="relu"),
        helper.make_node("GRN", ["relu"], ["grn"], name="grn", domain=CUSTOM_DOMAIN,
                         bias=GRN_BIAS),
        helper.make_node("MaxPool", ["grn"], ["y"], name="pool", kernel_shape=[2, 2],
                         strides=[2, 2]),
    ]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
                  [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
                  name="custom_node")


def reorg_dynamic_model():
    """ReorgYolo (custom) -> Sigmoid with a dynamic batch; the custom output's value_info."""
    from onnx import TensorProto, helper
    nodes = [
        helper.make_node("ReorgYolo", ["x"], ["reorg"], name="reorg", domain=CUSTOM_DOMAIN,
                         stride=2),
        helper.make_node("Sigmoid", ["reorg"], ["y"], name="sigmoid"),
    ]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 6, 8])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16, 3, 4])],
                  value_info=[helper.make_tensor_value_info("reorg", TensorProto.FLOAT,
                                                            ["N", 16, 3, 4])],
                  name="reorg_dynamic")


MODELS = {"custom_node.onnx": custom_node_model, "reorg_dynamic.onnx": reorg_dynamic_model}


def main(argv=None) -> int:
    import onnx
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write the models to")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for file_name, make in MODELS.items():
        path = args.out / file_name
        onnx.save(make(), str(path))
        print(f"wrote {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
