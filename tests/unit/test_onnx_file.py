"""Reading an .onnx file with its large initializers left in the file's bytes
(graph/onnx/file.py), and shape inference on a skeleton without their data
(graph/onnx/shapes.py): the same model, the same values and the same inferred shapes as
protobuf's full parse and ONNX's full inference."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from customlayers.graph.onnx import file as onnx_file
from customlayers.graph.onnx.checks import tensor_array
from customlayers.graph.onnx.file import CUT_BYTES, load_model_file
from customlayers.graph.onnx.reader import read_onnx
from customlayers.graph.onnx.shapes import MAX_VALUE_ELEMENTS, infer_shapes, skeleton


def conv_model(weights: np.ndarray, extra_inits=(), nodes=()) -> onnx.ModelProto:
    """x -> Conv(W) -> Reshape(to a shape held in an initializer) -> y, plus `nodes`."""
    o, c, kh, kw = weights.shape
    inits = [numpy_helper.from_array(weights, "W"),
             numpy_helper.from_array(np.array([1, -1], np.int64), "shape"), *extra_inits]
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Reshape", ["c", "shape"], ["y"]), *nodes], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    return model


def saved(tmp_path, model, name="m.onnx"):
    path = tmp_path / name
    path.write_bytes(model.SerializeToString())
    return path


def test_large_raw_data_is_cut_and_handed_on_as_views_of_the_file(tmp_path):
    w = np.random.default_rng(0).standard_normal((32, 16, 3, 3)).astype(np.float32)
    small = numpy_helper.from_array(np.arange(8, dtype=np.float32), "small")
    path = saved(tmp_path, conv_model(w, [small]))
    model, raw = load_model_file(onnx, path)
    full = onnx.load(str(path))
    assert set(raw) == {0}                       # W only: "shape" and "small" stay in place
    assert isinstance(raw[0], memoryview) and bytes(raw[0]) == full.graph.initializer[0].raw_data
    expected = onnx.ModelProto()
    expected.CopyFrom(full)
    expected.graph.initializer[0].ClearField("raw_data")
    assert model.SerializeToString() == expected.SerializeToString()
    value = tensor_array(onnx, model.graph.initializer[0], "W", raw[0])
    assert value.dtype == np.float32 and np.array_equal(value, w)
    assert not value.flags.writeable             # a view of the file's bytes


def test_the_reader_gives_the_same_constants_as_the_full_parse(tmp_path, monkeypatch):
    w = np.random.default_rng(1).standard_normal((64, 8, 3, 3)).astype(np.float32)
    path = saved(tmp_path, conv_model(w))
    cut = read_onnx(path)
    monkeypatch.setattr(onnx_file, "CUT_BYTES", 1 << 62)     # nothing cut: protobuf's copies
    whole = read_onnx(path)
    values = {n.name: n.value for n in cut if n.type == "Const"}
    assert values.keys() == {n.name for n in whole if n.type == "Const"}
    for n in whole:
        if n.type == "Const":
            assert np.array_equal(values[n.name], n.value) and \
                values[n.name].dtype == n.value.dtype
    assert [(n.type, [p.shape for p in n.outputs]) for n in cut] == \
        [(n.type, [p.shape for p in n.outputs]) for n in whole]


def test_external_data_and_typed_fields_are_left_to_protobuf(tmp_path):
    w = np.ones((64, 8, 3, 3), np.float32)
    typed = helper.make_tensor("typed", TensorProto.FLOAT, [4096], [1.0] * 4096)   # float_data
    model = conv_model(w, [typed])
    external = model.graph.initializer[0]
    external.data_location = TensorProto.EXTERNAL      # as a model saved with external data
    path = saved(tmp_path, model)
    cut_model, raw = load_model_file(onnx, path)
    assert raw == {}
    assert cut_model.SerializeToString() == model.SerializeToString()


def _outcome(load):
    try:
        return load().SerializeToString()
    except Exception as e:  # noqa: BLE001 - which exception is what is compared
        return type(e)


@pytest.mark.parametrize("data", [b"\x0a\x05abc", b"\x3a\xff\xff\xff\xff\x0f", b"\x0b\x0c",
                                  b"\x3a\x02\x2a\x05", b"\x08"])
def test_unusual_bytes_get_protobuf_s_own_answer(tmp_path, data):
    path = tmp_path / "odd.onnx"
    path.write_bytes(data)
    assert _outcome(lambda: load_model_file(onnx, path)[0]) == \
        _outcome(lambda: onnx.load(str(path)))


def test_a_graph_field_given_twice_is_parsed_whole(tmp_path):
    # protobuf merges a message field that appears twice; the cut leaves that to protobuf
    w = np.ones((64, 8, 3, 3), np.float32)
    model = conv_model(w)
    graph = model.graph.SerializeToString()
    data = model.SerializeToString() + b"\x3a" + onnx_file._varint(len(graph)) + graph
    path = tmp_path / "twice.onnx"
    path.write_bytes(data)
    parsed, raw = load_model_file(onnx, path)
    assert raw == {} and parsed.SerializeToString() == onnx.load(str(path)).SerializeToString()


def test_cut_bytes_keep_every_value_inference_may_read():
    assert CUT_BYTES >= MAX_VALUE_ELEMENTS * 8     # 8 bytes: the widest element (int64, double)


def test_inference_on_the_skeleton_infers_what_the_full_model_does():
    w = np.random.default_rng(2).standard_normal((64, 8, 3, 3)).astype(np.float32)
    model = conv_model(w)
    full = onnx.shape_inference.infer_shapes(model, data_prop=True)
    ours = infer_shapes(onnx, model)
    for field in ("value_info", "output", "node"):
        assert [x.SerializeToString() for x in getattr(ours.graph, field)] == \
            [x.SerializeToString() for x in getattr(full.graph, field)]
    stub = ours.graph.initializer[0]
    assert list(stub.dims) == [64, 8, 3, 3] and not stub.HasField("raw_data")
    assert ours.graph.initializer[1].SerializeToString() == \
        model.graph.initializer[1].SerializeToString()          # the Reshape target, whole
    assert model.graph.initializer[0].HasField("raw_data")      # the model is not changed


def test_skeleton_keeps_small_and_malformed_initializers_whole():
    bad = TensorProto(name="bad", data_type=TensorProto.FLOAT, dims=[-1, 4096])
    model = conv_model(np.ones((64, 8, 3, 3), np.float32), [bad])
    copy = skeleton(onnx, model)
    assert [t.HasField("raw_data") for t in copy.graph.initializer] == [False, True, False]
    assert copy.graph.initializer[2].SerializeToString() == bad.SerializeToString()
    assert copy.opset_import == model.opset_import and copy.ir_version == model.ir_version
