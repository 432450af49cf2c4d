"""The ONNX reader: op translation to IR spelling and attribute text (numerical checks come with
the executor)."""
from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from customlayers.errors import ModelError
from customlayers.graph.onnx.reader import read_onnx


def save(tmp_path, nodes, inputs, outputs, inits=(), opset=13, name="m.onnx", extra_opsets=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 7
    path = tmp_path / name
    onnx.save(model, str(path))
    return path


def vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def by_type(g, op_type):
    return [n for n in g if n.type == op_type]


def test_light_resnet50_op_types():
    models = pytest.importorskip("models")
    g = read_onnx(models.light_onnx("resnet50"))
    counts = Counter(n.type for n in g)
    # BatchNorm folds into Multiply + Add; Conv has no bias here; Sum -> Add; Gemm -> MatMul+Add
    assert counts["Convolution"] == 53 and counts["Multiply"] == 53
    assert counts["Add"] == 53 + 16 + 1 and counts["ReLU"] == 49
    assert counts["MatMul"] == 1 and counts["SoftMax"] == 1 and counts["AvgPool"] == 1
    assert not {"BatchNormalization", "Gemm", "Sum", "Conv", "Relu"} & set(counts)
    conv = by_type(g, "Convolution")[0]
    assert conv.attrs == {"strides": "2, 2", "dilations": "1, 1", "pads_begin": "3, 3",
                          "pads_end": "3, 3", "auto_pad": "explicit"}
    assert g.results[0].inputs[0].shape == (1, 1000)
    assert len(g.topological_order()) == len(g)


def test_light_squeezenet_op_types():
    models = pytest.importorskip("models")
    g = read_onnx(models.light_onnx("squeezenet"))
    counts = Counter(n.type for n in g)
    assert counts["Convolution"] == 26 and counts["Add"] == 26 and counts["Concat"] == 8
    assert counts["ReduceMean"] == 1 and "Dropout" not in counts
    # opset-9 Softmax on [1,1000,1,1] at axis 1: flatten to 2-D, SoftMax, restore the shape
    assert counts["SoftMax"] == 1 and counts["Reshape"] == 2
    softmax = by_type(g, "SoftMax")[0]
    assert softmax.attrs == {"axis": "1"} and softmax.inputs[0].shape == (1, 1000)
    assert g.results[0].inputs[0].shape == (1, 1000, 1, 1)
    reduce = by_type(g, "ReduceMean")[0]
    assert reduce.attrs == {"keep_dims": "true"}
    axes_node = g.nodes[g.producer(reduce.id, 1)[0]]
    assert axes_node.value.tolist() == [2, 3]


def test_custom_domain_node_keeps_attributes_as_text(tmp_path):
    node = helper.make_node("MyNorm", ["x"], ["y"], domain="com.example", eps=3e-08, k=3,
                            sizes=[1, 2, 3], scales=[0.5, 0.25], mode="fast")
    path = save(tmp_path, [node], [vi("x", [1, 4])], [vi("y", [1, 4])],
                extra_opsets=[("com.example", 2)])
    g = read_onnx(path)
    custom = by_type(g, "MyNorm")[0]
    assert custom.domain == "com.example" and custom.version == "com.example:2"
    assert custom.attrs == {"eps": "3e-08", "k": "3", "sizes": "1,2,3", "scales": "0.5,0.25",
                            "mode": "fast"}


def test_gemm_alpha_beta_and_transposes(tmp_path):
    c = numpy_helper.from_array(np.arange(3, dtype=np.float32), "c")
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], alpha=2.0, beta=0.5, transB=1)
    g = read_onnx(save(tmp_path, [node], [vi("a", [2, 4]), vi("b", [3, 4])], [vi("y", [2, 3])],
                       [c]))
    matmul = by_type(g, "MatMul")[0]
    assert matmul.attrs == {"transpose_a": "false", "transpose_b": "true"}
    assert matmul.outputs[0].shape == (2, 3)
    mul = by_type(g, "Multiply")[0]
    assert float(g.nodes[g.producer(mul.id, 1)[0]].value) == 2.0
    add = by_type(g, "Add")[0]
    np.testing.assert_array_equal(g.nodes[g.producer(add.id, 1)[0]].value, [0, 0.5, 1])
    assert add.outputs[0].shape == (2, 3)


def test_batchnorm_folds_into_scale_and_shift(tmp_path):
    rng = np.random.default_rng(0)
    scale, bias, mean = (rng.standard_normal(3).astype(np.float32) for _ in range(3))
    var = rng.uniform(0.5, 1.5, 3).astype(np.float32)
    inits = [numpy_helper.from_array(v, n) for v, n in
             ((scale, "s"), (bias, "b"), (mean, "m"), (var, "v"))]
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)
    g = read_onnx(save(tmp_path, [node], [vi("x", [1, 3, 2, 2])], [vi("y", [1, 3, 2, 2])],
                       inits))
    mul, add = by_type(g, "Multiply")[0], by_type(g, "Add")[0]
    a = g.nodes[g.producer(mul.id, 1)[0]].value
    shift = g.nodes[g.producer(add.id, 1)[0]].value
    assert a.shape == (1, 3, 1, 1) and shift.shape == (1, 3, 1, 1)
    x = rng.standard_normal((1, 3, 2, 2)).astype(np.float32)
    expected = (scale[:, None, None] * (x - mean[:, None, None])
                / np.sqrt(var[:, None, None] + 1e-3) + bias[:, None, None])
    np.testing.assert_allclose(x * a + shift, expected, rtol=1e-5, atol=1e-6)
    assert not by_type(g, "Const") or all(n.name not in ("s", "b", "m", "v")
                                          for n in by_type(g, "Const"))


def test_grouped_conv_with_bias_lrn_pool_and_dropout(tmp_path):
    w = numpy_helper.from_array(np.ones((4, 1, 3, 3), np.float32), "w")
    b = numpy_helper.from_array(np.arange(4, dtype=np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], group=4, pads=[1, 1, 1, 1]),
             helper.make_node("LRN", ["c"], ["l"], size=3, alpha=2e-4),
             helper.make_node("Dropout", ["l"], ["d"]),
             helper.make_node("AveragePool", ["d"], ["y"], kernel_shape=[2, 2], strides=[2, 2])]
    g = read_onnx(save(tmp_path, nodes, [vi("x", [1, 4, 4, 4])], [vi("y", [1, 4, 2, 2])], [w, b],
                       opset=9))
    conv = by_type(g, "GroupConvolution")[0]
    assert g.nodes[g.producer(conv.id, 1)[0]].value.shape == (4, 1, 1, 3, 3)
    bias = g.nodes[g.producer(by_type(g, "Add")[0].id, 1)[0]].value
    assert bias.shape == (1, 4, 1, 1)
    lrn = by_type(g, "LRN")[0]
    assert lrn.attrs == {"alpha": "0.0002", "beta": "0.75", "bias": "1.0", "size": "3"}
    assert g.nodes[g.producer(lrn.id, 1)[0]].value.tolist() == [1]
    pool = by_type(g, "AvgPool")[0]
    assert pool.attrs["exclude-pad"] == "true" and pool.attrs["kernel"] == "2, 2"
    assert g.producer(pool.id, 0)[0] == lrn.id            # Dropout is gone


def test_unsupported_standard_op_is_refused(tmp_path):
    node = helper.make_node("NonMaxSuppression", ["boxes", "scores"], ["sel"])
    path = save(tmp_path, [node], [vi("boxes", [1, 4, 4]), vi("scores", [1, 1, 4])],
                [vi("sel", [None, 3], TensorProto.INT64)])
    with pytest.raises(ModelError, match=r"node 0 'sel' \(NonMaxSuppression\): the ONNX op "
                                         r"NonMaxSuppression has no translation.*Conv, "):
        read_onnx(path)


def test_external_data_is_followed_and_its_absence_reported(tmp_path):
    w = numpy_helper.from_array(np.full((64, 64), 0.5, np.float32), "w")
    node = helper.make_node("MatMul", ["x", "w"], ["y"])
    graph = helper.make_graph([node], "g", [vi("x", [1, 64])], [vi("y", [1, 64])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / "ext.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, location="ext.data",
                    size_threshold=0)
    g = read_onnx(path)
    assert float(by_type(g, "Const")[0].value[3, 5]) == 0.5
    (tmp_path / "sub" / "ext.data").unlink()
    with pytest.raises(ModelError, match="ext.data"):
        read_onnx(path)


def test_not_an_onnx_file(tmp_path):
    path = tmp_path / "bad.onnx"
    path.write_bytes(b"\x00\xffnot protobuf at all")
    with pytest.raises(ModelError, match="bad.onnx"):
        read_onnx(path)


# -- custom nodes: attribute text (it feeds Define params exactly as an IR attribute would) ---

def _custom_attrs(tmp_path, **attrs) -> dict[str, str]:
    node = helper.make_node("MyOp", ["x"], ["y"], domain="com.example", **attrs)
    path = save(tmp_path, [node], [vi("x", [1, 4])], [vi("y", [1, 4])],
                extra_opsets=[("com.example", 1)])
    return by_type(read_onnx(path), "MyOp")[0].attrs


@pytest.mark.parametrize("value, text", [
    (3, "3"), (-7, "-7"), (0, "0"), (2**40, "1099511627776"),
])
def test_int_attribute_text(tmp_path, value, text):
    assert _custom_attrs(tmp_path, a=value) == {"a": text}


@pytest.mark.parametrize("value, text", [
    (3e-08, "3e-08"),        # OpenVINO's six-decimal rounding would make this 0
    (1e-7, "1e-07"),
    (0.1, "0.1"),            # the float32 nearest 0.1, written as the text that reads back to it
    (1.0, "1.0"), (-2.5, "-2.5"), (1e20, "1e+20"),
    (3.4028235e38, "3.4028235e+38"),
    (16777217.0, "1.6777216e+07"),   # not a float32: the value the model holds is 16777216
])
def test_float_attribute_text_is_the_shortest_that_round_trips_float32(tmp_path, value, text):
    got = _custom_attrs(tmp_path, a=value)["a"]
    assert got == text
    assert np.float32(got) == np.float32(value)


def test_list_and_string_attribute_text(tmp_path):
    attrs = _custom_attrs(tmp_path, ints=[1, 2, 3], neg=[-1, 0], floats=[0.5, 1e-9],
                          one=[4], mode="fast mode", names=["a", "b c"], utf="grün")
    assert attrs == {"ints": "1,2,3", "neg": "-1,0", "floats": "0.5,1e-09", "one": "4",
                     "mode": "fast mode", "names": "a,b c", "utf": "grün"}


def test_graph_attribute_on_a_custom_node_is_refused(tmp_path):
    body = helper.make_graph([], "body", [], [])
    node = helper.make_node("MyLoop", ["x"], ["y"], name="loop", domain="com.example", body=body)
    path = save(tmp_path, [node], [vi("x", [1])], [vi("y", [1])], extra_opsets=[("com.example", 1)])
    with pytest.raises(ModelError, match=r"node 0 'loop' \(MyLoop\): attribute 'body' holds a "
                                         r"graph or tensor"):
        read_onnx(path)


def test_unknown_op_in_the_default_domain_is_a_custom_node(tmp_path):
    node = helper.make_node("ReorgYolo", ["x"], ["y"], stride=2)
    g = read_onnx(save(tmp_path, [node], [vi("x", [1, 4, 2, 2])], [vi("y", None)]))
    reorg = by_type(g, "ReorgYolo")[0]
    assert (reorg.domain, reorg.attrs, reorg.version) == ("", {"stride": "2"}, "ai.onnx:13")


# -- shapes past custom nodes ------------------------------------------------------------------

def test_shapes_past_a_custom_node_are_unknown_not_scalar(tmp_path):
    c = numpy_helper.from_array(np.ones((1, 4, 1, 1), np.float32), "c")
    nodes = [helper.make_node("MyOp", ["x"], ["m"], name="custom", domain="com.example"),
             helper.make_node("Relu", ["m"], ["r"], name="relu"),
             helper.make_node("Sum", ["r", "c", "r"], ["y"], name="sum")]
    g = read_onnx(save(tmp_path, nodes, [vi("x", ["N", 4, 6, 8])], [vi("y", None)], [c],
                       extra_opsets=[("com.example", 1)]))
    param = g.parameters[0]
    assert param.outputs[0].shape == (None, 4, 6, 8) and param.attrs["shape"] == "?,4,6,8"
    custom = by_type(g, "MyOp")[0]
    assert custom.inputs[0].shape == (None, 4, 6, 8)
    assert custom.outputs[0].shape is None
    assert by_type(g, "ReLU")[0].outputs[0].shape is None
    # the first Add of the three-input Sum had its shape computed by the reader: unknown too
    assert [a.outputs[0].shape for a in by_type(g, "Add")] == [None, None]
    assert g.results[0].inputs[0].shape is None


def test_value_info_of_a_custom_output_is_kept_and_propagates(tmp_path):
    nodes = [helper.make_node("MyOp", ["x"], ["m"], name="custom", domain="com.example"),
             helper.make_node("Sigmoid", ["m"], ["y"], name="sig")]
    graph = helper.make_graph(nodes, "g", [vi("x", ["N", 4, 6, 8])], [vi("y", None)],
                              value_info=[vi("m", ["N", 16, 3, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid("com.example", 1)])
    onnx.save(model, str(tmp_path / "m.onnx"))
    g = read_onnx(tmp_path / "m.onnx")
    assert by_type(g, "MyOp")[0].outputs[0].shape == (None, 16, 3, 4)
    # ONNX shape inference carries the value_info on through the standard op
    assert by_type(g, "Sigmoid")[0].outputs[0].shape == (None, 16, 3, 4)


def test_a_declared_scalar_stays_a_scalar(tmp_path):
    node = helper.make_node("Squeeze", ["x"], ["y"])
    g = read_onnx(save(tmp_path, [node], [vi("x", [1])], [vi("y", [])]))
    assert g.results[0].inputs[0].shape == ()


def test_graph_input_of_an_unsupported_type_is_named(tmp_path):
    node = helper.make_node("Relu", ["x"], ["y"])
    path = save(tmp_path, [node], [vi("x", [2], TensorProto.BFLOAT16)],
                [vi("y", [2], TensorProto.BFLOAT16)])
    with pytest.raises(ModelError, match=r"m\.onnx: graph input 'x' has element type BFLOAT16, "
                                         r"which is not supported; supported: FLOAT"):
        read_onnx(path)


def test_every_untranslated_op_is_named_with_its_nodes_in_one_refusal(tmp_path):
    # a model that needs several ops we lack is told all of them at once, not one per attempt
    nodes = [helper.make_node("Det", ["x"], ["a"], name="det1"),
             helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Det", ["b"], ["c"], name="det2"),
             helper.make_node("Bernoulli", ["c"], ["y"], name="hm")]
    path = save(tmp_path, nodes, [vi("x", [1, 4, 4])], [vi("y", [1, 4, 4])])
    with pytest.raises(ModelError) as info:
        read_onnx(path)
    text = str(info.value)
    assert "2 ONNX op type(s) of the model have no translation" in text
    assert "the ONNX op Bernoulli has no translation (node 3 'hm')" in text
    assert "the ONNX op Det has no translation (nodes 0 'det1', 2 'det2')" in text

def test_every_refused_node_is_named_in_one_refusal(tmp_path):
    # an op we lack, a Dropout in training with a ratio, Reduce axes computed by a layer: all
    # three in one message, and the nodes after a refused one are not told as refused too
    true = numpy_helper.from_array(np.array(True), "train")
    nodes = [helper.make_node("Det", ["x"], ["d"], name="det"),
             helper.make_node("Relu", ["d"], ["d2"], name="after_det"),
             helper.make_node("Dropout", ["x", "", "train"], ["dr"], name="drop"),
             helper.make_node("Relu", ["dr"], ["dr2"], name="after_drop"),
             helper.make_node("Relu", ["k"], ["kr"], name="relu_k"),
             helper.make_node("Cast", ["kr"], ["axes"], name="cast", to=TensorProto.INT64),
             helper.make_node("ReduceSum", ["x", "axes"], ["s"], name="reduce")]
    path = save(tmp_path, nodes, [vi("x", [3, 3]), vi("k", [1])],
                [vi("d2", []), vi("dr2", [3, 3]), vi("s", None)], [true])
    with pytest.raises(ModelError) as info:
        read_onnx(path)
    text = str(info.value)
    assert "3 node(s) of the model cannot be run here" in text
    assert "node 2 'drop' (Dropout): training_mode (input 2, 'train') is true" in text
    assert "node 6 'reduce' (ReduceSum): the axes (input 1, 'axes') must be a constant" in text
    assert "Ops with no translation to IR ops here: Det (nodes 0 'det' (Det))" not in text
    assert "node 0 'det' (Det): the ONNX op Det has no translation" in text
    assert "after_det" not in text and "after_drop" not in text


def test_several_untranslated_ops_and_a_form_are_told_together(tmp_path):
    nodes = [helper.make_node("Det", ["x"], ["d"], name="det1"),
             helper.make_node("Det", ["x"], ["e"], name="det2"),
             helper.make_node("Transpose", ["x"], ["t"], name="tr", perm=[0, 0])]
    path = save(tmp_path, nodes, [vi("x", [3, 3])], [vi("d", []), vi("e", []), vi("t", None)])
    with pytest.raises(ModelError) as info:
        read_onnx(path)
    text = str(info.value)
    assert "3 node(s) of the model cannot be run here: node 2 'tr' (Transpose): perm" in text
    assert "Ops with no translation to IR ops here: Det (nodes 0 'det1' (Det), 1 'det2' (Det))" \
        in text


def test_an_op_we_lack_after_a_refused_node_is_told_too(tmp_path):
    # the layers after a refused node are not told (their cause is); an op we lack is, whatever
    # feeds it: the user learns of it before fixing the first problem
    true = numpy_helper.from_array(np.array(True), "train")
    ratio = numpy_helper.from_array(np.array(0.5, np.float32), "ratio")
    nodes = [helper.make_node("Dropout", ["x", "ratio", "train"], ["dr"], name="drop"),
             helper.make_node("Det", ["dr"], ["y"], name="det")]
    path = save(tmp_path, nodes, [vi("x", [3, 3])], [vi("y", [])], [true, ratio])
    with pytest.raises(ModelError) as info:
        read_onnx(path)
    text = str(info.value)
    assert "'drop' (Dropout)" in text and "'det' (Det)" in text


@pytest.mark.parametrize("model,what", [(42, "int"), ({"x": 1}, "dict"), (None, "NoneType")])
def test_a_model_that_is_neither_a_path_nor_a_modelproto_is_refused_naming_its_type(model,
                                                                                    what):
    from customlayers.graph.load import read_model
    with pytest.raises(ModelError, match=rf"^the model is a {what}; expected the path of an "
                                         r"OpenVINO IR \.xml or an \.onnx file, or an "
                                         r"onnx\.ModelProto"):
        read_model(model)


def test_a_modelproto_with_external_data_is_refused_naming_it():
    """Its data files would be looked up relative to no file: it is saved, or loaded with
    its data, first."""
    w = numpy_helper.from_array(np.zeros((4, 4), np.float32), "w")
    w.data_location = TensorProto.EXTERNAL
    w.external_data.add(key="location", value="w.bin")
    w.ClearField("raw_data")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [vi("x", [1, 4])], [vi("y", [1, 4])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(ModelError, match=r"^<ModelProto 'g'>: initializer 'w' is kept in an "
                                         r"external file \(w\.bin\)"):
        read_onnx(model)


@pytest.mark.parametrize("op,extra", [("Add", {}), ("Mul", {}), ("MatMul", {}),
                                      ("Concat", {"axis": 0})])
@pytest.mark.parametrize("elem,name", [(TensorProto.FLOAT16, "float16"),
                                       (TensorProto.INT64, "int64"), (TensorProto.BOOL, "bool")])
def test_inputs_of_one_type_variable_with_two_element_types_are_refused_at_the_node(
        tmp_path, op, extra, elem, name):
    """An attention mask of another type than the scores (float32 + float16): ONNX's type rule
    (Add's A and B are both T) fails, ONNX Runtime refuses the model; here an Add or Mul ran it
    as float32, and a mask Add folded into a MatMul was refused as that MatMul's input 3."""
    node = helper.make_node(op, ["scores", "mask"], ["y"], name="mask_add", **extra)
    path = save(tmp_path, [node], [vi("scores", [3, 3]), vi("mask", [3, 3], elem)],
                [vi("y", None)], opset=17)
    with pytest.raises(ModelError, match=rf"node 0 'mask_add' \({op}\): input 1 'mask' is "
                                         rf"{name}, input 0 'scores' float32; {op}-\d+'s "
                                         rf"inputs of type T take one element type: cast one"):
        read_onnx(path)


def test_inputs_of_different_type_variables_may_differ():
    """Where's condition (B: bool) and its values (T: float); Gather's data (T) and indices
    (Tind): each variable alone must agree."""
    nodes = [helper.make_node("Where", ["c", "a", "b"], ["w"]),
             helper.make_node("Gather", ["w", "i"], ["y"], axis=0)]
    graph = helper.make_graph(nodes, "g", [vi("c", [2, 3], TensorProto.BOOL), vi("a", [2, 3]),
                                           vi("b", [2, 3]), vi("i", [1], TensorProto.INT64)],
                              [vi("y", None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert by_type(read_onnx(model), "Gather")


def test_a_custom_nodes_guessed_output_type_is_not_held_against_the_next_node(tmp_path):
    """A custom node's output type is a guess (its input 0's, for shape inference past it): an
    int64 Add after a custom node of float input is not refused on it."""
    nodes = [helper.make_node("Indices", ["x"], ["i"], domain="com.example"),
             helper.make_node("Add", ["i", "one"], ["y"], name="after")]
    one = numpy_helper.from_array(np.ones((2, 3), np.int64), "one")
    path = save(tmp_path, nodes, [vi("x", [2, 3])], [vi("y", None, TensorProto.INT64)],
                inits=[one], opset=17, extra_opsets=[("com.example", 1)])
    graph = read_onnx(path, custom_shapes=lambda op, domain, attrs, shapes: [shapes[0]])
    assert by_type(graph, "Add")
