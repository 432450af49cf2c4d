"""The ONNX reader on the detection ops, without a device: what Resize becomes in the IR, and
NonMaxSuppression's refusal, which says why, at one node and in the whole-model list."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from customlayers.errors import ModelError
from customlayers.graph.onnx.reader import read_onnx

F = TensorProto.FLOAT


def _save(tmp_path, nodes, inputs, inits=(), opset=19):
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info(
        n.output[0], F, None) for n in nodes[-1:]], list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "m.onnx"))
    return tmp_path / "m.onnx"


def test_resize_keeps_its_attributes_and_drops_absent_and_unused_operands(tmp_path):
    inits = [numpy_helper.from_array(np.zeros(8, np.float32), "roi"),
             numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")]
    node = helper.make_node("Resize", ["x", "roi", "scales"], ["y"], mode="cubic",
                            cubic_coeff_a=-0.5, coordinate_transformation_mode="align_corners")
    g = read_onnx(_save(tmp_path, [node], [helper.make_tensor_value_info("x", F, [1, 1, 4, 4])],
                        inits))
    resize = next(n for n in g.nodes.values() if n.type == "Resize")
    assert resize.attrs["operands"] == "scales"              # roi: only tf_crop_and_resize
    assert resize.attrs["mode"] == "cubic" and resize.attrs["cubic_coeff_a"] == "-0.5"
    assert resize.attrs["coordinate_transformation_mode"] == "align_corners"
    assert len(resize.inputs) == 2


def test_upsample_maps_to_resize_10_semantics(tmp_path):
    node = helper.make_node("Upsample", ["x", "s"], ["y"], mode="linear")
    inits = [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "s")]
    g = read_onnx(_save(tmp_path, [node], [helper.make_tensor_value_info("x", F, [1, 1, 4, 4])],
                        inits, opset=9))
    resize = next(n for n in g.nodes.values() if n.type == "Resize")
    assert resize.attrs["coordinate_transformation_mode"] == "asymmetric"
    assert resize.attrs["nearest_mode"] == "simple"


def _nms(name):
    return helper.make_node("NonMaxSuppression", ["boxes", "scores"], [name], name=name)


NMS_INPUTS = [helper.make_tensor_value_info("boxes", F, [1, 6, 4]),
              helper.make_tensor_value_info("scores", F, [1, 1, 6])]


def test_non_max_suppression_refusal_says_why(tmp_path):
    with pytest.raises(ModelError, match=r"node 0 'a' \(NonMaxSuppression\): the ONNX op "
                                         r"NonMaxSuppression has no translation to IR ops here "
                                         r"\(the number of boxes it selects"):
        read_onnx(_save(tmp_path, [_nms("a")], NMS_INPUTS))


def test_non_max_suppression_reason_in_the_whole_model_refusal(tmp_path):
    with pytest.raises(ModelError, match=r"NonMaxSuppression has no translation \(nodes 0 'a', "
                                         r"1 'b'; the number of boxes it selects"):
        read_onnx(_save(tmp_path, [_nms("a"), _nms("b")], NMS_INPUTS))
