"""Small ONNX models of a few nodes fed by graph inputs, and the one comparison the op tests make
with them: our output `y` and ONNX Runtime's (a test oracle only)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

# numpy type -> ONNX element type of the graph inputs
ELEM = {np.float32: 1, np.float64: 11, np.int8: 3, np.uint8: 2, np.int32: 6, np.int64: 7,
        np.bool_: 9}


def model_file(path: Path, nodes, feeds: dict, inits=(), opset: int = 17) -> Path:
    """`nodes` over graph inputs named and typed as `feeds`, output `y` (its type from shape
    inference, which ONNX Runtime needs), at IR version 8 (older ONNX Runtime builds read it)."""
    import onnx
    from onnx import TensorProto, helper
    inputs = [helper.make_tensor_value_info(k, ELEM[v.dtype.type], list(v.shape))
              for k, v in feeds.items()]
    out = helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)
    graph = helper.make_graph(list(nodes), "g", inputs, [out], list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(onnx.shape_inference.infer_shapes(model), str(path))
    return path


def ours_and_onnxruntime(engine, path: Path, feeds: dict) -> tuple[np.ndarray, np.ndarray]:
    """(ours, ONNX Runtime's) output y."""
    import onnxruntime as ort
    from customlayers.api import Network
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        ["y"], feeds)[0]
    got = Network(path, engine=engine).infer(feeds)["y"]
    return got, want
