"""Issue 18, item 3: ONNX models with custom nodes where a new user would give up.

- A custom node with <Data> blobs is shaped at import (its rules are asked with its constants),
  and so is any custom node of a model whose batch is symbolic: the ops after it that need a
  rank (GlobalAveragePool, Softmax(axis=-1), ReduceMean(axes=[-1])) read and run. A shape that
  is truly unknown is said to be unknown, naming the custom node it comes from and why.
- The layers of the model that nothing implements are listed before any shape error.
- <Data> blobs bind to a node's own constant inputs by position or by a per-node name, so two
  nodes of one type can each have their own blobs (ONNX initializer names are global).
Every model runs on PoCL against numpy."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from customlayers.cli import main
from customlayers.errors import ModelError, UnsupportedLayersError

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ROOT / "examples" / "layers"
SCALE_SHIFT = LAYERS / "scale_shift" / "scale_shift.xml"
RELU = LAYERS / "relu" / "relu.xml"
DOMAIN = "com.example"


def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _save(path: Path, nodes, x_shape, inits=()) -> Path:
    graph = helper.make_graph(nodes, "g", [_vi("x", x_shape)], [_vi("y", None)], list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid(DOMAIN, 1)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _init(name, values):
    return numpy_helper.from_array(np.asarray(values, np.float32), name)


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def _infer(model, engine, *configs, python=(), **kw):
    from customlayers.runtime.compile.network import Network
    from customlayers.runtime.layers.registry import Registry
    registry = Registry(engine)
    for config in configs:
        registry.load(str(config))
    for module in python:
        registry.load_python(str(module))
    net = Network(str(model), registry, engine, **kw)
    return net


def _relu(x):
    return np.maximum(x, 0)


# -- 3a: shapes at import ----------------------------------------------------------------------
def test_a_node_with_data_blobs_is_shaped_for_the_node_after_it(tmp_path, engine):
    w, b = np.arange(1, 5, dtype=np.float32), np.full(4, 0.5, np.float32)
    model = _save(tmp_path / "m.onnx", [
        helper.make_node("ScaleShift", ["x", "weights", "biases"], ["s"], name="ss",
                         domain=DOMAIN),
        helper.make_node("GlobalAveragePool", ["s"], ["y"], name="gap")],
        [1, 4, 3, 5], [_init("weights", w), _init("biases", b)])
    x = np.random.default_rng(0).standard_normal((1, 4, 3, 5)).astype(np.float32)
    y = _infer(model, engine, SCALE_SHIFT).infer({"x": x})["y"]
    expected = (x * w.reshape(1, 4, 1, 1) + b.reshape(1, 4, 1, 1)).mean(axis=(2, 3),
                                                                        keepdims=True)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)


AFTER = {
    "GlobalAveragePool": (lambda: helper.make_node("GlobalAveragePool", ["r"], ["y"], name="n"),
                          lambda r: r.mean(axis=(2, 3), keepdims=True)),
    "Softmax": (lambda: helper.make_node("Softmax", ["r"], ["y"], name="n", axis=-1),
                lambda r: np.exp(r) / np.exp(r).sum(axis=-1, keepdims=True)),
    "ReduceMean": (lambda: helper.make_node("ReduceMean", ["r"], ["y"], name="n", axes=[-1]),
                   lambda r: r.mean(axis=-1, keepdims=True)),
}


@pytest.mark.parametrize("op", sorted(AFTER))
def test_a_symbolic_batch_keeps_the_rank_after_a_custom_node(tmp_path, engine, op):
    """Rule 3 (input 0's shape) gives [N, 4, 3, 5]: the op after the custom node has its rank."""
    make, reference = AFTER[op]
    model = _save(tmp_path / "m.onnx", [
        helper.make_node("ReLU", ["x"], ["r"], name="relu", domain=DOMAIN), make()],
        ["N", 4, 3, 5])
    x = np.random.default_rng(1).standard_normal((2, 4, 3, 5)).astype(np.float32)
    net = _infer(model, engine, RELU, input_shapes={"x": x.shape})
    np.testing.assert_allclose(net.infer({"x": x})["y"], reference(_relu(x)), rtol=1e-5,
                               atol=1e-6)


def test_a_shape_formula_with_a_symbolic_batch(tmp_path, engine):
    """ReorgYolo with `shape="B,F*4,Y/2,X/2"` after x of [N, 4, 6, 8]: [N, 16, 3, 4] at import,
    and the pooling after it reads."""
    import shutil
    folder = tmp_path / "reorg"
    folder.mkdir()
    shutil.copy(LAYERS / "reorg" / "reorg.cl", folder / "reorg.cl")
    text = (LAYERS / "reorg" / "reorg.xml").read_text().replace(
        '<Tensor arg-index="1" type="output" port-index="0" format="ANY"/>',
        '<Tensor arg-index="1" type="output" port-index="0" format="ANY" '
        'shape="B,F*4,Y/2,X/2"/>')
    (folder / "reorg.xml").write_text(text)
    model = _save(tmp_path / "m.onnx", [
        helper.make_node("ReorgYolo", ["x"], ["r"], name="reorg", domain=DOMAIN, stride=2),
        helper.make_node("GlobalMaxPool", ["r"], ["y"], name="gmp")], ["N", 4, 6, 8])
    from customlayers.graph.onnx.reader import read_onnx
    from customlayers.runtime.layers.registry import Registry
    from customlayers.runtime.layers.resolver import Resolver
    registry = Registry(engine)
    registry.load(str(folder / "reorg.xml"))
    graph = read_onnx(model, Resolver(registry))
    reorg = next(n for n in graph.nodes.values() if n.name == "reorg")
    assert reorg.outputs[0].shape == (None, 16, 3, 4)
    x = np.random.default_rng(2).standard_normal((3, 4, 6, 8)).astype(np.float32)
    net = _infer(model, engine, folder / "reorg.xml", input_shapes={"x": x.shape})
    y = net.infer({"x": x})["y"]
    assert y.shape == (3, 16, 1, 1)
    # reorg only moves elements: each image's maximum is among its channels' maxima
    np.testing.assert_allclose(y.max(axis=1).reshape(-1), x.reshape(3, -1).max(axis=1))


PYTHON_LAYER = '''import numpy as np
from customlayers.api import cpu_layer


@cpu_layer("Twice")
class Twice:
    def output_shapes(self, input_shapes, attrs):
        b, c, h, w = input_shapes[0]
        return [(b, 2 * c, h, w)]

    def execute(self, inputs, outputs, attrs):
        outputs[0][...] = np.concatenate([inputs[0], inputs[0]], axis=1)
'''


def test_a_python_layer_with_a_symbolic_batch(tmp_path, engine):
    (tmp_path / "twice.py").write_text(PYTHON_LAYER)
    model = _save(tmp_path / "m.onnx", [
        helper.make_node("Twice", ["x"], ["t"], name="twice", domain=DOMAIN),
        helper.make_node("GlobalAveragePool", ["t"], ["y"], name="gap")], ["N", 3, 2, 2])
    x = np.random.default_rng(3).standard_normal((2, 3, 2, 2)).astype(np.float32)
    net = _infer(model, engine, python=[tmp_path / "twice.py"], input_shapes={"x": x.shape})
    expected = np.concatenate([x, x], axis=1).mean(axis=(2, 3), keepdims=True)
    np.testing.assert_allclose(net.infer({"x": x})["y"], expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op, attrs", [("GlobalAveragePool", {}), ("Flatten", {"axis": 2}),
                                       ("Shape", {})])
def test_an_unknown_shape_names_the_custom_node_and_why(tmp_path, engine, op, attrs):
    """A custom node whose shape formula gives no shape for its input (Y-9 of 3): the op after
    it that needs its shape says the shape is unknown, from which node and why, not "found
    shape []"."""
    folder = tmp_path / "relu"
    folder.mkdir()
    (folder / "relu.cl").write_text((RELU.parent / "relu.cl").read_text())
    (folder / "relu.xml").write_text(RELU.read_text().replace(
        '<Tensor arg-index="1" type="output" port-index="0" format="ANY"/>',
        '<Tensor arg-index="1" type="output" port-index="0" format="ANY" shape="B,F,Y-9,X"/>'))
    model = _save(tmp_path / "m.onnx", [
        helper.make_node("ReLU", ["x"], ["s"], name="ss", domain=DOMAIN),
        helper.make_node("Relu", ["s"], ["r"], name="relu"),
        helper.make_node(op, ["r"], ["y"], name="next", **attrs)], [1, 4, 3, 5])
    with pytest.raises(ModelError) as info:
        _infer(model, engine, folder / "relu.xml")
    text = str(info.value)
    assert f"node 2 'next' ({op})" in text
    assert "found an unknown shape" in text and "[]" not in text and "none" not in text
    assert "the shape of input 'r' is unknown: it comes from custom node 'ss' (ReLU, " \
           "domain com.example)" in text
    assert "output shape formula 'B,F,Y-9,X' gives [1, 4, -6, 5]" in text


@pytest.mark.parametrize("batch", [1, "N"])
def test_a_descriptor_that_does_not_fit_its_node_is_that_nodes_error(tmp_path, engine, batch):
    """ScaleShift given no constants cannot bind its Data blobs, and a descriptor that binds
    an input port the node does not have: the model's reading stops at that node, naming the
    descriptor's file and line (a new user's model had the error at the LayerNormalization
    after it, "needs the rank", with the binding's reason at its end)."""
    from customlayers.errors import BindingError

    def then_pool(path, op, name):            # x -> the custom op alone -> GlobalAveragePool
        return _save(path, [helper.make_node(op, ["x"], ["s"], name=name, domain=DOMAIN),
                            helper.make_node("GlobalAveragePool", ["s"], ["y"])],
                     [batch, 4, 3, 5])
    with pytest.raises(BindingError, match=r"m\.onnx: node 'ss' \(ScaleShift\): layer type "
                                           r"'ScaleShift' \(.*scale_shift\.xml:\d+:\d+\) "
                                           r"binds Data weights, biases"):
        _infer(then_pool(tmp_path / "m.onnx", "ScaleShift", "ss"), engine, SCALE_SHIFT)
    folder = tmp_path / "two"
    folder.mkdir()
    (folder / "relu.cl").write_text((RELU.parent / "relu.cl").read_text())
    lines = RELU.read_text().splitlines()
    at = next(n for n, line in enumerate(lines) if 'type="input"' in line)
    lines.insert(at + 1, '        <Tensor arg-index="2" type="input" port-index="1" '
                         'format="ANY"/>')
    (folder / "relu.xml").write_text("\n".join(lines) + "\n")
    with pytest.raises(BindingError, match=rf"r\.onnx: node 'rr' \(ReLU\): layer type 'ReLU' "
                                           rf"\(.*relu\.xml:{at + 2}:\d+\) binds input port 1, "
                                           r"but the node has 1 input\(s\)"):
        _infer(then_pool(tmp_path / "r.onnx", "ReLU", "rr"), engine, folder / "relu.xml")


# -- 3b: what nothing implements comes first ---------------------------------------------------
def _blob_model(tmp_path) -> Path:
    return _save(tmp_path / "m.onnx", [
        helper.make_node("ScaleShift", ["x", "weights", "biases"], ["s"], name="ss",
                         domain=DOMAIN),
        helper.make_node("GlobalAveragePool", ["s"], ["y"], name="gap")],
        [1, 4, 3, 5], [_init("weights", np.ones(4)), _init("biases", np.zeros(4))])


@pytest.mark.parametrize("configs", [[RELU], []], ids=["wrong config", "no config"])
def test_the_unimplemented_list_comes_before_a_shape_error(tmp_path, capsys, configs):
    model = _blob_model(tmp_path)
    argv = ["run", "-m", str(model), "-d", "CPU"]
    for config in configs:
        argv += ["-c", str(config)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "1 layer(s) of the model have no implementation:\n  ss (type ScaleShift, domain " \
           "com.example)" in err
    assert "GlobalAveragePool" not in err


def test_the_api_lists_it_too(tmp_path, engine):
    from customlayers.runtime.compile.network import Network
    with pytest.raises(UnsupportedLayersError) as info:
        Network(str(_blob_model(tmp_path)), None, engine)
    assert info.value.layers == [("ss", "ScaleShift", DOMAIN)]


# -- 3c: each node its own blobs ---------------------------------------------------------------
@pytest.mark.parametrize("naming", ["position", "node path"])
def test_two_nodes_of_one_type_each_with_their_own_blobs(tmp_path, engine, naming):
    """ONNX initializer names are global: two ScaleShift nodes cannot both have a 'weights'.
    Their blobs bind by position (any names, after the real input) or by a per-node name
    ('ss1/weights')."""
    rng = np.random.default_rng(4)
    w1, b1, w2, b2 = (rng.standard_normal(4).astype(np.float32) for _ in range(4))
    if naming == "position":
        names = ["scale_a", "shift_a", "scale_b", "shift_b"]
    else:
        names = ["ss1/weights", "ss1/biases", "ss2/weights", "ss2/biases"]
    # the second node's blobs are given in its path-named order reversed, to show names win
    second = [names[2], names[3]] if naming == "position" else [names[3], names[2]]
    model = _save(tmp_path / "m.onnx", [
        helper.make_node("ScaleShift", ["x", names[0], names[1]], ["s"], name="ss1",
                         domain=DOMAIN),
        helper.make_node("ScaleShift", ["s"] + second, ["y"], name="ss2", domain=DOMAIN)],
        [1, 4, 3, 5], [_init(n, v) for n, v in zip(names, (w1, b1, w2, b2))])
    x = rng.standard_normal((1, 4, 3, 5)).astype(np.float32)
    y = _infer(model, engine, SCALE_SHIFT).infer({"x": x})["y"]

    def scale_shift(v, w, b):
        return v * w.reshape(1, 4, 1, 1) + b.reshape(1, 4, 1, 1)
    np.testing.assert_allclose(y, scale_shift(scale_shift(x, w1, b1), w2, b2), rtol=1e-5,
                               atol=1e-6)


def test_names_bind_first_then_position(tmp_path, engine):
    """A node whose 'biases' is named and whose other constant is not: the named one binds by
    name, the other takes the blob left (weights) by position."""
    w, b = np.array([1, 2, 3, 4], np.float32), np.array([10, 20, 30, 40], np.float32)
    model = _save(tmp_path / "m.onnx", [
        helper.make_node("ScaleShift", ["x", "biases", "my_scale"], ["y"], name="ss",
                         domain=DOMAIN)],
        [1, 4, 1, 1], [_init("biases", b), _init("my_scale", w)])
    x = np.ones((1, 4, 1, 1), np.float32)
    y = _infer(model, engine, SCALE_SHIFT).infer({"x": x})["y"]
    np.testing.assert_allclose(y.reshape(-1), w + b)


DET_PY = '''
import numpy as np
from customlayers.api import cpu_layer


@cpu_layer("Det")
class Det:
    """ONNX Det: the determinant of each square matrix of the last two axes."""

    def output_shapes(self, input_shapes, attrs):
        return [input_shapes[0][:-2]]

    def execute(self, inputs, outputs, attrs):
        outputs[0][...] = np.linalg.det(inputs[0])
'''


def test_a_standard_op_we_lack_runs_as_the_users_layer(tmp_path, engine):
    """A model using a standard ONNX op with no translation here (Det) runs when a loaded
    layer of that type is given; without one the refusal says how to give it."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Det", ["r"], ["y"], name="det")]
    path = _save(tmp_path / "det.onnx", nodes, [2, 3, 3])
    x = np.random.default_rng(3).standard_normal((2, 3, 3)).astype(np.float32)
    (tmp_path / "layers.py").write_text(DET_PY)
    got = _infer(path, engine, python=[tmp_path / "layers.py"]).infer({"x": x})["y"]
    np.testing.assert_allclose(got, np.linalg.det(np.maximum(x, 0)), rtol=1e-5, atol=1e-6)
    with pytest.raises(ModelError, match=r"Det has no translation.*a CustomLayer of type "
                                         r"Det \(-c config.xml\) or a Python layer"):
        _infer(path, engine)


@pytest.mark.parametrize("shape,formula,rank", [
    ([2, 4, 6], "B,F,Y,X", 3), ([3, 5], "B,F,Y,X", 2), ([2, 4, 6], "B,F,Y", 3),
    ([2, 4, 6], "B,F,Y,1", 4), ([1, 3, 2, 5], "B,F,Y,X", 4)],
    ids=["3-D BFYX", "2-D BFYX", "3-D BFY", "3-D BFY1", "4-D"])
def test_a_shape_formula_names_dims_a_lower_rank_input_pads(tmp_path, engine, shape, formula,
                                                            rank):
    """An elementwise layer's "B,F,Y,X" (README's advice) on a 3-D input: the X of [B, F, Y]
    is its padding to B,F,Y,X (1), not a dim of the output, which keeps the input's rank; a
    Softmax over the last axis after it then gives what it gives after a ReLU (it gave ones:
    the output was [2, 4, 6, 1], a new user's trial). A literal 1 is a dim of the output."""
    text = RELU.read_text().replace('<Tensor arg-index="1" type="output" port-index="0"',
                                    f'<Tensor arg-index="1" type="output" port-index="0" '
                                    f'shape="{formula}"')
    assert f'shape="{formula}"' in text
    (tmp_path / "relu.xml").write_text(text)
    (tmp_path / "relu.cl").write_text((RELU.parent / "relu.cl").read_text())
    nodes = [helper.make_node("ReLU", ["x"], ["r"], domain=DOMAIN),
             helper.make_node("Softmax", ["r"], ["y"], axis=-1)]
    path = _save(tmp_path / "m.onnx", nodes, shape)
    x = np.random.default_rng(6).standard_normal(shape).astype(np.float32)
    got = _infer(path, engine, tmp_path / "relu.xml").infer({"x": x})["y"]
    r = np.maximum(x, 0).reshape(tuple(shape) + (1,) * (rank - len(shape)))
    want = np.exp(r - r.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_model_that_declares_the_padding_dim_keeps_it(tmp_path, engine):
    """The same "B,F,Y,X" on a 3-D input where the model declares the output [2, 4, 6, 1] (an
    OpenVINO IR's port, here a value_info): the declared rank holds, as before the padding
    rule (a reviewer found it refused: OpenVINO configs must load unchanged)."""
    text = RELU.read_text().replace('<Tensor arg-index="1" type="output" port-index="0"',
                                    '<Tensor arg-index="1" type="output" port-index="0" '
                                    'shape="B,F,Y,X"')
    (tmp_path / "relu.xml").write_text(text)
    (tmp_path / "relu.cl").write_text((RELU.parent / "relu.cl").read_text())
    graph = helper.make_graph([helper.make_node("ReLU", ["x"], ["y"], domain=DOMAIN)], "g",
                              [_vi("x", [2, 4, 6])], [_vi("y", [2, 4, 6, 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid(DOMAIN, 1)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "m.onnx"))
    x = np.random.default_rng(7).standard_normal((2, 4, 6)).astype(np.float32)
    got = _infer(tmp_path / "m.onnx", engine, tmp_path / "relu.xml").infer({"x": x})["y"]
    np.testing.assert_array_equal(got, np.maximum(x, 0)[..., None])


def test_a_misspelled_attribute_is_said_at_the_define_that_reads_the_right_one(tmp_path,
                                                                               engine):
    """The node gives 'negative_slop', the layer reads 'negative_slope' (not given: its default
    runs): the warning names the <Define>'s line (it named the <CustomLayer>'s)."""
    path = _save(tmp_path / "m.onnx", [helper.make_node("ReLU", ["x"], ["y"], domain=DOMAIN,
                                                        negative_slop=0.5)], [1, 2, 3, 4])
    said = []
    _infer(path, engine, RELU, messages=said.append).infer({"x": np.ones((1, 2, 3, 4),
                                                                          np.float32)})
    line = next(i for i, text in enumerate(RELU.read_text().splitlines(), 1)
                if "<Define" in text and 'param="negative_slope"' in text)
    assert any(f"attribute 'negative_slop' is not read by layer 'ReLU', whose <Define> at "
               f"{RELU}:{line}:" in m and "did you mean 'negative_slope'?" in m
               for m in said), said


def test_a_layer_named_after_the_onnx_op_not_the_layer_type_is_said(tmp_path, engine):
    """A loaded layer named 'Relu' (the ONNX op's name) replaces nothing: the model's Relu
    nodes read as ReLU layers, which run the built-in. That was silent (a new user's trial);
    a warning now names the layer and the type to name it. (Taking ONNX's name as an override
    broke OpenVINO configs for ops whose ONNX and IR forms differ, and shape arithmetic.) A
    layer whose name matches none of the model's types but by case is not said."""
    text = RELU.read_text().replace('name="ReLU"', 'name="Relu"')
    (tmp_path / "relu.xml").write_text(text)
    (tmp_path / "relu.cl").write_text((RELU.parent / "relu.cl").read_text())
    path = _save(tmp_path / "m.onnx", [helper.make_node("Relu", ["x"], ["y"], name="r")],
                 [1, 2, 3, 4])
    x = np.random.default_rng(5).standard_normal((1, 2, 3, 4)).astype(np.float32)
    said = []
    net = _infer(path, engine, tmp_path / "relu.xml", SCALE_SHIFT, messages=said.append)
    np.testing.assert_array_equal(net.infer({"x": x})["y"], np.maximum(x, 0))
    warned = [m for m in said if m.startswith("warning: custom layer")]
    assert len(warned) == 1, said
    assert f"custom layer 'Relu' ({tmp_path / 'relu.xml'}:" in warned[0]
    assert "replaces no layer of this model, whose ReLU layers run the built-in" in warned[0]
    assert "name it 'ReLU' to replace them" in warned[0]
    # different ops a letter apart are not said (HSigmoid against a model's Sigmoid)
    (tmp_path / "hsig.xml").write_text(RELU.read_text().replace('name="ReLU"',
                                                                'name="HSigmoid"'))
    sig = _save(tmp_path / "s.onnx", [helper.make_node("Sigmoid", ["x"], ["y"])], [1, 2, 3, 4])
    said.clear()
    _infer(sig, engine, tmp_path / "hsig.xml", messages=said.append)
    assert not [m for m in said if m.startswith("warning")], said


@pytest.mark.parametrize("config", [RELU, LAYERS / "reorg_nhwc" / "reorg_nhwc.xml"],
                         ids=["SimpleGPU", "MVCL"])
def test_a_custom_node_with_more_outputs_than_its_layer_is_named(tmp_path, capsys, config):
    """The model's node has two outputs, the descriptor one output port: a KeyError traceback
    from the compiler, whether the second output was used or not (found by a new-user trial)."""
    op = "ReLU" if config == RELU else "ReorgYoloNHWC"
    used = _save(tmp_path / "used.onnx",
                 [helper.make_node(op, ["x"], ["a", "b"], domain=DOMAIN, stride=2),
                  helper.make_node("Add", ["a", "b"], ["y"])], [1, 4, 6, 8])
    unused = _save(tmp_path / "unused.onnx",
                   [helper.make_node(op, ["x"], ["y", "b"], domain=DOMAIN, stride=2)],
                   [1, 4, 6, 8])
    for model in (used, unused):
        assert main(["run", "-m", str(model), "-c", str(config), "-d", "CPU"]) == 1
        err = capsys.readouterr().err
        assert "Traceback" not in err and "KeyError" not in err
        assert (f"the model gives the node 2 outputs, but layer type '{op}' ({config}:"
                in err), err
        assert "has 1 output port (<Tensor type=\"output\">); give the node 1 output, or the " \
               "descriptor a port for each" in err
