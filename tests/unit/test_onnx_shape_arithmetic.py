"""The ONNX reader and shape arithmetic (issue 20 item 1), without a device: folded at load
where the inputs are constants, kept as fold-only nodes where a symbolic dim decides it (the
Parameter and the Shape carry the symbol names the pass binds), refused where a layer computes
an input at run time (comparisons, logic and Where then become the IR ops on data)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from customlayers.errors import ModelError  # noqa: E402
from customlayers.graph.fold_eval import FOLD_TYPE  # noqa: E402
from customlayers.graph.onnx.reader import read_onnx  # noqa: E402
from customlayers.passes.shape_folding import fold_for_shapes  # noqa: E402


def _ints(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _read(tmp_path, nodes, x_shape, inits=()):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], list(inits)),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    return read_onnx(path)


FLATTEN = [helper.make_node("Shape", ["x"], ["s"]),
           helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
           helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"]),
           helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
           helper.make_node("Reshape", ["x", "target"], ["y"])]
INITS = [_ints("zero", 0), _ints("axes0", [0]), _ints("minus1", [-1])]


def _reshape_target(graph):
    reshape = next(n for n in graph if n.type == "Reshape")
    src = graph.nodes[graph.producer(reshape.id, 1)[0]]
    return src


def test_static_shapes_fold_at_load(tmp_path):
    g = _read(tmp_path, FLATTEN, [2, 3, 4], INITS)
    assert [n.type for n in g] == ["Parameter", "Const", "Reshape", "Result"]
    assert _reshape_target(g).value.tolist() == [2, -1]


def test_a_symbolic_batch_keeps_fold_only_nodes_named_after_its_symbol(tmp_path):
    g = _read(tmp_path, FLATTEN, ["batch", 3, 4], INITS)
    x = g.nodes[next(n.id for n in g if n.type == "Parameter")]
    assert x.attrs["dim_names"] == "batch,3,4"
    folds = [n for n in g if n.type == FOLD_TYPE]
    assert [n.attrs["op"] for n in folds] == ["Shape", "Gather", "Unsqueeze", "Concat"]
    assert folds[0].attrs["dims"] == "batch,3,4"
    assert _reshape_target(fold_for_shapes(g, {"x": (5, 3, 4)})).value.tolist() == [5, -1]


def test_integer_constants_fold_at_load_and_float_ones_stay_layers(tmp_path):
    nodes = [helper.make_node("Add", ["two", "three"], ["five"]),
             helper.make_node("Concat", ["five", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["r"]),
             helper.make_node("Add", ["r", "half"], ["y"])]
    inits = [_ints("two", [2]), _ints("three", [3]), _ints("minus1", [-1]),
             numpy_helper.from_array(np.float32(0.5), "half")]
    g = _read(tmp_path, nodes, [5, 2], inits)
    assert _reshape_target(g).value.tolist() == [5, -1]
    assert [n.type for n in g].count("Add") == 1                 # the float Add runs


def test_slice_ends_from_a_symbolic_shape_make_bounds_for_an_ir_slice(tmp_path):
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=1, end=2),
             helper.make_node("Div", ["s", "two"], ["half"]),
             helper.make_node("Slice", ["x", "zero1", "half", "one1"], ["y"])]
    inits = [_ints("two", [2]), _ints("zero1", [0]), _ints("one1", [1])]
    g = _read(tmp_path, nodes, [1, "C"], inits)
    assert [n.attrs.get("op") for n in g if n.type == FOLD_TYPE] == ["Shape", "Div",
                                                                     "SliceBounds"]
    folded = fold_for_shapes(g, {"x": (1, 8)})
    sl = next(n for n in folded if n.type == "Slice")
    bounds = [folded.nodes[folded.producer(sl.id, k)[0]].value.tolist() for k in range(1, 5)]
    assert bounds == [[0], [4], [1], [1]]


@pytest.mark.parametrize("op, ir_op", [("Equal", "Equal"), ("Less", "Less"),
                                        ("Greater", "Greater"), ("And", "LogicalAnd")])
def test_shape_arithmetic_ops_on_a_value_a_layer_computes_become_ops_on_data(tmp_path, op,
                                                                              ir_op):
    """A comparison or logic op reading a layer's output is the IR op on tensors (a mask),
    its result held as u8; not a fold-only node."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node(op, ["r", "x"], ["m"], name="the_op"),
             helper.make_node("Cast", ["m"], ["y"], to=TensorProto.FLOAT)]
    g = _read(tmp_path, nodes, [2, 3])
    assert not [n for n in g if n.type == FOLD_TYPE]
    node = next(n for n in g if n.name == "the_op")
    assert node.type == ir_op and node.outputs[0].dtype == "u8"


def test_range_on_a_value_a_layer_computes_is_refused(tmp_path):
    nodes = [helper.make_node("ReduceMax", ["x"], ["top"], keepdims=0, name="the_max"),
             helper.make_node("Range", ["zero", "top", "one"], ["y"], name="the_range")]
    with pytest.raises(ModelError, match=r"node 1 'the_range' \(Range\): input 1 \('top'\) is "
                                         r"computed at run time by a layer, and Range's output "
                                         r"size depends on its value"):
        _read(tmp_path, nodes, [2, 3], [numpy_helper.from_array(np.float32(0), "zero"),
                                        numpy_helper.from_array(np.float32(1), "one")])


def test_an_evaluation_error_at_load_names_the_node(tmp_path):
    nodes = [helper.make_node("Div", ["one", "zero"], ["bad"], name="the_div"),
             helper.make_node("Reshape", ["x", "bad"], ["y"])]
    with pytest.raises(ModelError, match=r"'the_div' \(Div\): integer division by zero"):
        _read(tmp_path, nodes, [2, 3], [_ints("one", [1]), _ints("zero", [0])])


def test_dims_inference_left_unnamed_come_from_inference_again_per_input_shape(tmp_path):
    """x[:, :C // 2] then a reshape from its Shape: the reader's inference cannot name the
    sliced dim (a Slice to a computed end), so the pass runs inference again for the concrete
    input shape, with the Slice's end it folded (InferredShapes)."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=1, end=2),
             helper.make_node("Div", ["s", "two"], ["half"]),
             helper.make_node("Slice", ["x", "zero1", "half", "one1"], ["a"]),
             helper.make_node("Shape", ["a"], ["sa"], name="shape_of_a"),
             helper.make_node("Gather", ["sa", "perm"], ["target"], axis=0),
             helper.make_node("Reshape", ["a", "target"], ["y"])]
    inits = [_ints("two", [2]), _ints("zero1", [0]), _ints("one1", [1]), _ints("perm", [1, 0])]
    g = _read(tmp_path, nodes, ["N", 8], inits)
    shape_of_a = next(n for n in g if n.name == "shape_of_a")
    assert shape_of_a.attrs["dims"].split(",")[1].startswith("unk")   # no name to bind
    for batch in (3, 5):
        assert _reshape_target(fold_for_shapes(g, {"x": (batch, 8)})).value.tolist() == \
            [4, batch]
    g.value_shapes = None                   # without it, the refusal names the Shape node
    with pytest.raises(ModelError, match=r"'shape_of_a' \(Shape, shape arithmetic\).*is not "
                                         r"known"):
        fold_for_shapes(g, {"x": (3, 8)})


def test_a_small_float_constant_subgraph_folds_at_load(tmp_path):
    # torch's attention scale, 1 / sqrt(sqrt(head size)), written as layers on constants: folded
    # exactly (correctly rounded float ops), no layer left for it
    nodes = [helper.make_node("Sqrt", ["d"], ["s1"]),
             helper.make_node("Div", ["one", "s1"], ["inv"]),
             helper.make_node("Sqrt", ["inv"], ["scale"]),
             helper.make_node("Mul", ["x", "scale"], ["y"])]
    inits = [numpy_helper.from_array(np.float32(64.0), "d"),
             numpy_helper.from_array(np.float32(1.0), "one")]
    g = _read(tmp_path, nodes, [2, 3], inits)
    assert [n.type for n in g if n.type not in ("Parameter", "Const", "Result")] == ["Multiply"]
    const = next(n for n in g if n.type == "Const" and np.asarray(n.value).size == 1)
    assert np.asarray(const.value).dtype == np.float32
    assert np.asarray(const.value) == np.sqrt(np.float32(1) / np.sqrt(np.float32(64)))


def test_float_layers_on_a_large_constant_stay_layers(tmp_path):
    big = numpy_helper.from_array(np.full(5000, 4.0, np.float32), "big")
    nodes = [helper.make_node("Sqrt", ["big"], ["s"]),
             helper.make_node("Add", ["x", "s"], ["y"])]
    g = _read(tmp_path, nodes, [5000], [big])
    assert "Sqrt" in [n.type for n in g]
