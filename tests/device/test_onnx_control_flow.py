"""Issue 20, control flow and sequences at load (graph/onnx/control.py): If inlined (a constant
condition: its branch; a fed one: both branches and a Where), Loop with a constant trip count
and Scan (axes, directions) unrolled, sequences and optionals of known length held as lists;
on small onnx.helper models against ONNX Runtime; what cannot be rewritten refused naming the
node."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from customlayers.api import Network  # noqa: E402
from customlayers.errors import ModelError  # noqa: E402
from customlayers.graph.onnx.reader import read_onnx  # noqa: E402

RNG = np.random.default_rng(20)
F = TensorProto.FLOAT


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def _save(path: Path, nodes, inputs, outputs, inits=(), opset=17) -> Path:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _check(path, feeds, engine, atol=1e-5):
    ours = Network(read_onnx(path), engine=engine).infer(feeds)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    for name, want in zip(names, session.run(None, feeds)):
        np.testing.assert_allclose(np.asarray(ours[name]), want, rtol=1e-5, atol=atol)


def _vi(name, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def _branches():
    then = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["t"])], "then", [],
                             [_vi("t", [2, 3])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                              [_vi("e", [2, 3])])
    return then, other


@pytest.mark.parametrize("cond", [True, False])
def test_if_with_a_constant_condition_runs_its_branch(tmp_path, engine, cond):
    then, other = _branches()
    inits = [numpy_helper.from_array(np.array(cond), "c"),
             numpy_helper.from_array(np.float32(2.0), "two")]
    path = _save(tmp_path / "if.onnx",
                 [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other),
                  helper.make_node("Relu", ["y"], ["z"])],
                 [_vi("x", [2, 3])], [_vi("z", [2, 3])], inits)
    _check(path, {"x": RNG.standard_normal((2, 3)).astype(np.float32)}, engine)


@pytest.mark.parametrize("cond", [True, False])
def test_if_with_a_fed_condition_selects_per_run(tmp_path, engine, cond):
    then, other = _branches()
    path = _save(tmp_path / "if_fed.onnx",
                 [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                 [_vi("c", [], TensorProto.BOOL), _vi("x", [2, 3])], [_vi("y", [2, 3])],
                 [numpy_helper.from_array(np.float32(2.0), "two")])
    _check(path, {"c": np.array(cond), "x": RNG.standard_normal((2, 3)).astype(np.float32)},
           engine)


def test_if_whose_branches_differ_in_shape_is_refused_naming_the_node(tmp_path):
    then = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [],
                             [_vi("t", [2, 3])])
    other = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["e"], keepdims=0)],
                              "else", [], [_vi("e", [])])
    path = _save(tmp_path / "if_bad.onnx",
                 [helper.make_node("If", ["c"], ["y"], name="choose", then_branch=then,
                                   else_branch=other)],
                 [_vi("c", [], TensorProto.BOOL), _vi("x", [2, 3])], [_vi("y", None)])
    with pytest.raises(ModelError, match=r"node 0 'choose' \(If\).*shapes"):
        read_onnx(path)


@pytest.mark.parametrize("axis,direction,out_axis,out_direction",
                         [(0, 0, 0, 0), (1, 1, 0, 0), (0, 1, 1, 1)])
def test_scan_is_unrolled_with_its_axes_and_directions(tmp_path, engine, axis, direction,
                                                        out_axis, out_direction):
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
         helper.make_node("Mul", ["s_out", "x_t"], ["y_t"])], "body",
        [_vi("s_in", [2]), _vi("x_t", [2])], [_vi("s_out", [2]), _vi("y_t", [2])])
    shape = [4, 2] if axis == 0 else [2, 4]
    path = _save(tmp_path / "scan.onnx",
                 [helper.make_node("Scan", ["s0", "x"], ["s", "y"], body=body,
                                   num_scan_inputs=1, scan_input_axes=[axis],
                                   scan_input_directions=[direction],
                                   scan_output_axes=[out_axis],
                                   scan_output_directions=[out_direction])],
                 [_vi("s0", [2]), _vi("x", shape)], [_vi("s", [2]), _vi("y", None)])
    _check(path, {"s0": RNG.standard_normal(2).astype(np.float32),
                  "x": RNG.standard_normal(shape).astype(np.float32)}, engine)


def test_loop_with_a_constant_trip_count_is_unrolled(tmp_path, engine):
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Cast", ["i"], ["i_f"], to=F),
         helper.make_node("Add", ["v_in", "i_f"], ["v_out"]),
         helper.make_node("Mul", ["v_out", "x"], ["scan"])], "body",
        [_vi("i", [], TensorProto.INT64), _vi("c_in", [], TensorProto.BOOL), _vi("v_in", [3])],
        [_vi("c_out", [], TensorProto.BOOL), _vi("v_out", [3]), _vi("scan", [3])])
    inits = [numpy_helper.from_array(np.array(5, np.int64), "m"),
             numpy_helper.from_array(np.array(True), "c")]
    path = _save(tmp_path / "loop.onnx",
                 [helper.make_node("Loop", ["m", "c", "v0"], ["v", "ys"], body=body)],
                 [_vi("v0", [3]), _vi("x", [3])], [_vi("v", [3]), _vi("ys", None)], inits)
    _check(path, {"v0": RNG.standard_normal(3).astype(np.float32),
                  "x": RNG.standard_normal(3).astype(np.float32)}, engine)


def test_loop_whose_trip_count_is_fed_is_refused_naming_the_node(tmp_path):
    body = helper.make_graph([helper.make_node("Identity", ["c_in"], ["c_out"]),
                              helper.make_node("Identity", ["v_in"], ["v_out"])], "body",
                             [_vi("i", [], TensorProto.INT64),
                              _vi("c_in", [], TensorProto.BOOL), _vi("v_in", [3])],
                             [_vi("c_out", [], TensorProto.BOOL), _vi("v_out", [3])])
    path = _save(tmp_path / "loop_fed.onnx",
                 [helper.make_node("Loop", ["m", "", "v0"], ["v"], name="repeat", body=body)],
                 [_vi("m", [], TensorProto.INT64), _vi("v0", [3])], [_vi("v", [3])])
    with pytest.raises(ModelError, match=r"node 0 'repeat' \(Loop\).*trip count"):
        read_onnx(path)


def test_sequences_of_known_length_are_held_as_lists(tmp_path, engine):
    inits = [numpy_helper.from_array(np.array(1, np.int64), "one"),
             numpy_helper.from_array(np.array([1, 3], np.int64), "split")]
    nodes = [helper.make_node("SplitToSequence", ["x", "split"], ["parts"], axis=1),
             helper.make_node("SequenceConstruct", ["a", "a"], ["pair"]),
             helper.make_node("SequenceInsert", ["parts", "a", "one"], ["more"]),
             helper.make_node("SequenceErase", ["more"], ["fewer"]),
             helper.make_node("ConcatFromSequence", ["fewer"], ["cat"], axis=1),
             helper.make_node("ConcatFromSequence", ["pair"], ["stacked"], axis=0, new_axis=1),
             helper.make_node("SequenceAt", ["more", "one"], ["at"]),
             helper.make_node("SequenceLength", ["more"], ["n"]),
             helper.make_node("Optional", ["a"], ["opt"]),
             helper.make_node("OptionalGetElement", ["opt"], ["got"]),
             helper.make_node("OptionalHasElement", ["opt"], ["has"])]
    path = _save(tmp_path / "seq.onnx", nodes, [_vi("x", [2, 4]), _vi("a", [2, 1])],
                 [_vi("cat", None), _vi("stacked", None), _vi("at", None),
                  _vi("n", None, TensorProto.INT64), _vi("got", None),
                  _vi("has", None, TensorProto.BOOL)], inits, opset=18)
    _check(path, {"x": RNG.standard_normal((2, 4)).astype(np.float32),
                  "a": RNG.standard_normal((2, 1)).astype(np.float32)}, engine)


def test_sequence_map_is_unrolled_per_element(tmp_path, engine):
    body = helper.make_graph([helper.make_node("Add", ["e", "b"], ["r"])], "body",
                             [_vi("e", [2]), _vi("b", [2])], [_vi("r", [2])])
    nodes = [helper.make_node("SequenceConstruct", ["x", "y"], ["s"]),
             helper.make_node("SequenceMap", ["s", "x"], ["m"], body=body),
             helper.make_node("ConcatFromSequence", ["m"], ["out"], axis=0)]
    path = _save(tmp_path / "map.onnx", nodes, [_vi("x", [2]), _vi("y", [2])],
                 [_vi("out", None)], opset=18)
    _check(path, {"x": RNG.standard_normal(2).astype(np.float32),
                  "y": RNG.standard_normal(2).astype(np.float32)}, engine)


def test_a_sequence_graph_output_is_refused(tmp_path):
    path = _save(tmp_path / "seq_out.onnx",
                 [helper.make_node("SequenceConstruct", ["x"], ["s"])], [_vi("x", [2])],
                 [helper.make_tensor_sequence_value_info("s", F, [2])])
    with pytest.raises(ModelError, match="graph output 's' is a sequence"):
        read_onnx(path)


def test_an_if_in_a_loop_body_whose_condition_folds_per_iteration(tmp_path, engine):
    """The condition Equal(iteration, 0) is known per unrolled copy: each takes one branch
    (a Where would compute both; here the branches even differ in shape from the state)."""
    then = helper.make_graph([helper.make_node("Identity", ["v_in"], ["t"])], "then", [],
                             [_vi("t", [3])])
    other = helper.make_graph([helper.make_node("Mul", ["v_in", "x"], ["e"])], "else", [],
                              [_vi("e", [3])])
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Equal", ["i", "zero"], ["first"]),
         helper.make_node("If", ["first"], ["v_out"], then_branch=then, else_branch=other)],
        "body",
        [_vi("i", [], TensorProto.INT64), _vi("c_in", [], TensorProto.BOOL), _vi("v_in", [3])],
        [_vi("c_out", [], TensorProto.BOOL), _vi("v_out", [3])])
    inits = [numpy_helper.from_array(np.array(3, np.int64), "m"),
             numpy_helper.from_array(np.array(0, np.int64), "zero")]
    path = _save(tmp_path / "loop_if.onnx",
                 [helper.make_node("Loop", ["m", "", "v0"], ["v"], body=body)],
                 [_vi("v0", [3]), _vi("x", [3])], [_vi("v", [3])], inits)
    _check(path, {"v0": RNG.standard_normal(3).astype(np.float32),
                  "x": RNG.standard_normal(3).astype(np.float32)}, engine)
    graph = read_onnx(path)
    assert not any(n.type == "Select" for n in graph.nodes.values())


def test_a_loop_past_the_bound_is_refused_naming_the_node(tmp_path):
    body = helper.make_graph([helper.make_node("Identity", ["c_in"], ["c_out"]),
                              helper.make_node("Identity", ["v_in"], ["v_out"])], "body",
                             [_vi("i", [], TensorProto.INT64),
                              _vi("c_in", [], TensorProto.BOOL), _vi("v_in", [3])],
                             [_vi("c_out", [], TensorProto.BOOL), _vi("v_out", [3])])
    path = _save(tmp_path / "loop_long.onnx",
                 [helper.make_node("Loop", ["m", "", "v0"], ["v"], name="long", body=body)],
                 [_vi("v0", [3])], [_vi("v", [3])],
                 [numpy_helper.from_array(np.array(5000, np.int64), "m")])
    with pytest.raises(ModelError,
                       match=r"node 0 'long' \(Loop\): 5000 iterations; at most 1024"):
        read_onnx(path)


def test_an_if_on_shape_arithmetic_takes_its_branch_at_load(tmp_path, engine):
    """Greater(Size(x), 4) folds from x's static shape: the branch whose output shape differs
    from the other's is inlined alone (no Where)."""
    then = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["t"], keepdims=0)],
                             "then", [], [_vi("t", [])])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [],
                              [_vi("e", [2, 3])])
    path = _save(tmp_path / "if_shape.onnx",
                 [helper.make_node("Size", ["x"], ["n"]),
                  helper.make_node("Greater", ["n", "four"], ["big"]),
                  helper.make_node("If", ["big"], ["y"], then_branch=then, else_branch=other)],
                 [_vi("x", [2, 3])], [_vi("y", None)],
                 [numpy_helper.from_array(np.array(4, np.int64), "four")], opset=13)
    _check(path, {"x": RNG.standard_normal((2, 3)).astype(np.float32)}, engine, atol=1e-5)
    assert not any(n.type == "Select" for n in read_onnx(path).nodes.values())


@pytest.mark.parametrize("direction", [0, 1])
def test_scan_of_opset_8_scans_each_batch_item(tmp_path, engine, direction):
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
         helper.make_node("Identity", ["s_out"], ["y_t"])], "body",
        [_vi("s_in", [2]), _vi("x_t", [2])], [_vi("s_out", [2]), _vi("y_t", [2])])
    path = _save(tmp_path / "scan8.onnx",
                 [helper.make_node("Scan", ["", "s0", "x"], ["s", "y"], body=body,
                                   num_scan_inputs=1, directions=[direction])],
                 [_vi("s0", [3, 2]), _vi("x", [3, 4, 2])], [_vi("s", [3, 2]), _vi("y", None)],
                 opset=8)
    _check(path, {"s0": RNG.standard_normal((3, 2)).astype(np.float32),
                  "x": RNG.standard_normal((3, 4, 2)).astype(np.float32)}, engine)
