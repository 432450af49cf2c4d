"""Issue 20 item 1: shape arithmetic folded before the network runs. Small ONNX models built
with onnx.helper, in the patterns exporters emit (a ViT-style reshape from Shape, a
ShuffleNet-style chunk, an Expand of a class token from ConstantOfShape/Equal/Where, positions
from Range), with a symbolic batch: each runs at two batch sizes (a new shape re-plans) and
matches ONNX Runtime. Shape arithmetic on a value computed at run time is refused at load,
naming the node and its op, except comparisons, logic and Where, which then run on the data."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from customlayers.api import Network  # noqa: E402
from customlayers.errors import ModelError  # noqa: E402

F, I64 = TensorProto.FLOAT, TensorProto.INT64


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def _ints(name: str, values) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _save(path: Path, nodes, x_shape, inits, opset: int = 17) -> Path:
    x = helper.make_tensor_value_info("x", F, x_shape)
    y = helper.make_tensor_value_info("y", F, None)
    graph = helper.make_graph(nodes, "g", [x], [y], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _check(engine, path: Path, shapes) -> Network:
    net = Network(path, engine=engine)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    for shape in shapes:                      # each batch size compiles a plan of its own
        x = rng.standard_normal(shape).astype(np.float32)
        want = session.run(["y"], {"x": x})[0]
        got = net.infer({"x": x})["y"]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    return net


def _batch_of(x: str, out: str) -> list:
    """Shape(x)[0] as a 1-element vector: what torch.onnx emits for x.size(0)."""
    return [helper.make_node("Shape", [x], [f"{out}/shape"]),
            helper.make_node("Gather", [f"{out}/shape", "zero"], [f"{out}/n"], axis=0),
            helper.make_node("Unsqueeze", [f"{out}/n", "axes0"], [out])]


def test_a_vit_style_reshape_from_shape_runs_at_every_batch(tmp_path, engine):
    w = np.random.default_rng(1).standard_normal((4, 3, 4, 4)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["p"], kernel_shape=[4, 4], strides=[4, 4]),
             *_batch_of("p", "n"),
             helper.make_node("Concat", ["n", "four", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["p", "target"], ["flat"]),
             helper.make_node("Transpose", ["flat"], ["y"], perm=[0, 2, 1])]
    inits = [numpy_helper.from_array(w, "w"), _ints("zero", 0), _ints("axes0", [0]),
             _ints("four", [4]), _ints("minus1", [-1])]
    _check(engine, _save(tmp_path / "vit.onnx", nodes, ["N", 3, 8, 8], inits),
           [(1, 3, 8, 8), (3, 3, 8, 8)])


def test_a_shufflenet_style_chunk_runs(tmp_path, engine):
    """x.chunk(2, dim=1): Slice ends computed from Shape, and a Split with computed sizes."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "one"], ["c"], axis=0),
             helper.make_node("Add", ["c", "one"], ["c1"]),
             helper.make_node("Div", ["c1", "two"], ["half"]),
             helper.make_node("Unsqueeze", ["half", "axes0"], ["half1"]),
             helper.make_node("Slice", ["x", "zero1", "half1", "axes1"], ["a"]),
             helper.make_node("Slice", ["x", "half1", "big", "axes1"], ["b"]),
             helper.make_node("Sub", ["c", "half"], ["rest"]),
             helper.make_node("Unsqueeze", ["rest", "axes0"], ["rest1"]),
             helper.make_node("Concat", ["half1", "rest1"], ["sizes"], axis=0),
             helper.make_node("Split", ["x", "sizes"], ["p", "q"], axis=1),
             helper.make_node("Mul", ["a", "q"], ["aq"]),
             helper.make_node("Add", ["aq", "b"], ["ab"]),
             helper.make_node("Sub", ["ab", "p"], ["y"])]
    inits = [_ints("one", 1), _ints("two", 2), _ints("axes0", [0]), _ints("zero1", [0]),
             _ints("axes1", [1]), _ints("big", [2**62])]
    _check(engine, _save(tmp_path / "chunk.onnx", nodes, ["N", 4, 3, 3], inits),
           [(1, 4, 3, 3), (2, 4, 3, 3)])


def test_a_class_token_expanded_from_constant_of_shape_runs(tmp_path, engine):
    """cls.expand(N, -1, -1) as torch.onnx emits it: ConstantOfShape, Mul, Equal, Where."""
    cls = np.arange(4, dtype=np.float32).reshape(1, 1, 4)
    one = numpy_helper.from_array(np.array([1], np.int64), "one_value")
    nodes = [*_batch_of("x", "n"),
             helper.make_node("Concat", ["n", "minus1", "minus1"], ["target"], axis=0),
             helper.make_node("ConstantOfShape", ["three"], ["ones"], value=one),
             helper.make_node("Mul", ["ones", "minus1"], ["negs"]),
             helper.make_node("Equal", ["target", "negs"], ["is_neg"]),
             helper.make_node("Where", ["is_neg", "ones", "target"], ["shape"]),
             helper.make_node("Expand", ["cls", "shape"], ["tokens"]),
             helper.make_node("Concat", ["tokens", "x"], ["y"], axis=1)]
    inits = [numpy_helper.from_array(cls, "cls"), _ints("zero", 0), _ints("axes0", [0]),
             _ints("minus1", [-1]), _ints("three", [3])]
    _check(engine, _save(tmp_path / "cls.onnx", nodes, ["N", 5, 4], inits),
           [(1, 5, 4), (4, 5, 4)])


def test_positions_from_range_over_a_symbolic_length_run(tmp_path, engine):
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=1, end=2),
             helper.make_node("Squeeze", ["s", "axes0"], ["length"]),
             helper.make_node("Range", ["zero", "length", "one"], ["pos"]),
             helper.make_node("Cast", ["pos"], ["posf"], to=F),
             helper.make_node("Size", ["x"], ["size"]),
             helper.make_node("CastLike", ["size", "x"], ["sizef"]),
             helper.make_node("Div", ["posf", "sizef"], ["scaled"]),
             helper.make_node("Unsqueeze", ["scaled", "axes1"], ["col"]),
             helper.make_node("Add", ["x", "col"], ["y"])]
    inits = [_ints("zero", 0), _ints("one", 1), _ints("axes0", [0]), _ints("axes1", [1])]
    _check(engine, _save(tmp_path / "range.onnx", nodes, [1, "L", 3], inits),
           [(1, 5, 3), (1, 2, 3)])


def test_a_reshape_from_the_shape_of_a_slice_to_a_computed_end_runs(tmp_path, engine):
    """Shape inference names no dim past a Slice to a computed end (ShuffleNetV2 as torch
    exports it): the pass runs inference again per input shape, with the end it folded."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=1, end=2),
             helper.make_node("Div", ["s", "two"], ["half"]),
             helper.make_node("Slice", ["x", "zero1", "half", "one1"], ["a"]),
             helper.make_node("Shape", ["a"], ["sa"]),
             helper.make_node("Gather", ["sa", "perm"], ["target"], axis=0),
             helper.make_node("Reshape", ["a", "target"], ["y"])]
    inits = [_ints("two", [2]), _ints("zero1", [0]), _ints("one1", [1]), _ints("perm", [1, 0])]
    _check(engine, _save(tmp_path / "sliced.onnx", nodes, ["N", 8], inits), [(3, 8), (5, 8)])


def test_a_static_model_folds_at_load(tmp_path, engine):
    """With static shapes nothing waits for a request: the chain folds before the layers."""
    nodes = [*_batch_of("x", "n"),
             helper.make_node("Concat", ["n", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]
    inits = [_ints("zero", 0), _ints("axes0", [0]), _ints("minus1", [-1])]
    net = _check(engine, _save(tmp_path / "static.onnx", nodes, [2, 3, 4], inits),
                 [(2, 3, 4)])
    assert all(n.type != "FoldOnly" for n in net.graph)


def test_a_mask_computed_at_run_time_runs_as_ops_on_data(tmp_path, engine):
    """Equal and Where on a layer's output are not shape arithmetic: they run as the IR's
    Equal and Select on tensors, at every batch size."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Equal", ["r", "x"], ["mask"], name="the_mask"),
             helper.make_node("Where", ["mask", "x", "r"], ["y"])]
    net = _check(engine, _save(tmp_path / "mask.onnx", nodes, ["N", 3], []), [(2, 3), (5, 3)])
    assert {"Equal", "Select"} <= {n.type for n in net.graph}


def test_range_on_a_value_computed_at_run_time_is_refused(tmp_path, engine):
    nodes = [helper.make_node("ReduceMax", ["x"], ["top"], keepdims=0),
             helper.make_node("Range", ["zero", "top", "one"], ["y"], name="the_range")]
    inits = [numpy_helper.from_array(np.float32(0), "zero"),
             numpy_helper.from_array(np.float32(1), "one")]
    path = _save(tmp_path / "range.onnx", nodes, [2, 3], inits)
    with pytest.raises(ModelError, match=r"the_range' \(Range\).*input 1 \('top'\) is "
                                         r"computed at run time"):
        Network(path, engine=engine)


def test_a_shape_no_input_decides_is_refused_when_compiling(tmp_path, engine):
    """A dim that no graph input names (a custom op's, an unnamed one) cannot be folded: the
    refusal names the Shape node and the dim."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="the_shape"),
             helper.make_node("Reshape", ["x", "s"], ["y"])]
    x = helper.make_tensor_value_info("x", F, [None, 3])
    y = helper.make_tensor_value_info("y", F, None)
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "unnamed.onnx"))
    net = Network(tmp_path / "unnamed.onnx", engine=engine)
    with pytest.raises(ModelError, match=r"the_shape' \(Shape, shape arithmetic\).*is not "
                                         r"known"):
        net.infer({"x": np.zeros((2, 3), np.float32)})


@pytest.mark.parametrize("x_shape", [["batch", 5, 10], [1, 5, 10]], ids=["dynamic", "static"])
def test_torch_pad_pads_reversed_through_a_transpose_run(tmp_path, engine, x_shape):
    # F.pad as torch's TorchScript exporter writes it (Swin-T's window padding): the pads from
    # the input's width (Shape, Gather, Mod), Concat'ed, Reshape'd to [-1, 2], reversed by a
    # Slice of step -1, Transpose'd, flattened and Cast: all shape arithmetic, folded. Then a
    # Shape of the padded tensor (whose dims ONNX's inference could not give) sizes a Reshape:
    # inference run again with the folded pads gives them, static input or not
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "two"], ["w"], axis=0),
             helper.make_node("Mod", ["w", "seven"], ["m"]),
             helper.make_node("Sub", ["seven", "m"], ["r"]),
             helper.make_node("Mod", ["r", "seven"], ["padr"]),
             helper.make_node("Unsqueeze", ["padr", "zero"], ["pu"]),
             helper.make_node("Concat", ["z2", "pu", "z3"], ["c"], axis=0),
             helper.make_node("Reshape", ["c", "pairs"], ["c2"]),
             helper.make_node("Slice", ["c2", "start", "end", "axis0", "back"], ["c3"]),
             helper.make_node("Transpose", ["c3"], ["c4"], perm=[1, 0]),
             helper.make_node("Reshape", ["c4", "flat"], ["c5"]),
             helper.make_node("Cast", ["c5"], ["pads"], to=TensorProto.INT64),
             helper.make_node("Pad", ["x", "pads"], ["p"]),
             helper.make_node("Shape", ["p"], ["ps"]),
             helper.make_node("Gather", ["ps", "one"], ["h"], axis=0),
             helper.make_node("Unsqueeze", ["h", "zero"], ["hu"]),
             helper.make_node("Concat", ["flat", "hu"], ["rows"], axis=0),
             helper.make_node("Reshape", ["p", "rows"], ["y"])]
    inits = [_ints("two", 2), _ints("seven", 7), _ints("zero", [0]), _ints("z2", [0, 0]),
             _ints("z3", [0, 0, 0]), _ints("pairs", [-1, 2]), _ints("start", [-1]),
             _ints("end", [-(2 ** 62)]), _ints("axis0", [0]), _ints("back", [-1]),
             _ints("flat", [-1]), _ints("one", 1)]
    path = _save(tmp_path / "pad.onnx", nodes, x_shape, inits)
    _check(engine, path, [(1, 5, 10), (3, 5, 10)] if x_shape[0] == "batch" else [(1, 5, 10)])
