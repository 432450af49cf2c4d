"""ONNX models with custom nodes, run end to end on PoCL against numpy references: binding by
op_type, attribute text into Defines, output shapes (value_info, shape formula, input 0), a
dynamic batch compiled per shape, external data, and the `run` command."""
from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from customlayers.cli import main
from customlayers.errors import ModelError

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ROOT / "examples" / "layers"
MODELS = ROOT / "examples" / "models"
DOMAIN = "com.example"


def _reference(layer: str):
    """The example layer's numpy reference (examples/layers/<layer>/reference.py)."""
    spec = importlib.util.spec_from_file_location(f"ref_{layer}", LAYERS / layer / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.reference


def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _save(path: Path, nodes, inputs, outputs, inits=(), value_info=(), **save_kw) -> Path:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits), value_info=list(value_info))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid(DOMAIN, 1)])
    model.ir_version = 8
    onnx.save(model, str(path), **save_kw)
    return path


def _reorg_model(path: Path, x_shape, out_shape=None, reorg_info=None) -> Path:
    """x -> ReorgYolo (custom, stride 2) -> Sigmoid -> y."""
    nodes = [helper.make_node("ReorgYolo", ["x"], ["r"], name="reorg", domain=DOMAIN, stride=2),
             helper.make_node("Sigmoid", ["r"], ["y"], name="sig")]
    info = [_vi("r", reorg_info)] if reorg_info is not None else []
    return _save(path, nodes, [_vi("x", x_shape)], [_vi("y", out_shape)], value_info=info)


def _reorg_config(folder: Path, shape: str) -> Path:
    """reorg.xml with a shape formula on its output Tensor, written next to a copy of reorg.cl."""
    folder.mkdir(exist_ok=True)
    shutil.copy(LAYERS / "reorg" / "reorg.cl", folder / "reorg.cl")
    text = (LAYERS / "reorg" / "reorg.xml").read_text().replace(
        '<Tensor arg-index="1" type="output" port-index="0" format="ANY"/>',
        f'<Tensor arg-index="1" type="output" port-index="0" format="ANY" shape="{shape}"/>')
    assert f'shape="{shape}"' in text
    (folder / "reorg.xml").write_text(text)
    return folder / "reorg.xml"


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def _conv3x3_pad1(x, w, b):
    """Direct NCHW convolution, stride 1, pad 1 (numpy reference)."""
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))  # N,C,H,W,3,3
    return np.einsum("nchwij,ocij->nohw", win, w) + b[None, :, None, None]


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def _network(model, engine, *configs, **kw):
    from customlayers.runtime.compile.network import Network
    from customlayers.runtime.layers.registry import Registry
    reg = Registry(engine)
    reg.load(*configs)
    return Network(model, reg, engine, **kw)


def _custom_step(plan):
    return next(s for s in plan.steps if s.impl == "custom")


def test_example_model_binds_grn_and_matches_numpy(engine):
    """examples/models/custom_node.onnx: Conv + bias -> Relu -> GRN (custom) -> MaxPool."""
    model = onnx.load(str(MODELS / "custom_node.onnx"))
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    net = _network(MODELS / "custom_node.onnx", engine, LAYERS / "grn" / "grn.xml")
    step = _custom_step(net.plan)
    assert (step.name, step.type) == ("grn", "GRN")
    # the ONNX float attribute reaches the Define as its shortest float32 text
    assert "#define BIAS 1e-06\n" in step.launches[0].source
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    got = net.infer({"x": x})["y"]
    act = np.maximum(_conv3x3_pad1(x, weights["w"], weights["b"]), 0).astype(np.float32)
    grn = _reference("grn")([act], {"bias": "1e-06"}, {})[0]
    want = grn.reshape(1, 4, 8, 2, 8, 2).max(axis=(3, 5))
    assert got.shape == (1, 4, 8, 8)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_value_info_gives_the_custom_output_shape(tmp_path, engine):
    # reorg.xml has no shape formula: without the value_info the output would be input 0's shape
    model = _reorg_model(tmp_path / "m.onnx", [1, 4, 6, 8], None, reorg_info=[1, 16, 3, 4])
    net = _network(model, engine, LAYERS / "reorg" / "reorg.xml")
    x = np.random.default_rng(1).standard_normal((1, 4, 6, 8)).astype(np.float32)
    got = net.infer({"x": x})["y"]
    want = _sigmoid(_reference("reorg")([x], {"stride": "2"}, {})[0])
    assert got.shape == (1, 16, 3, 4)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_shape_formula_gives_the_output_shape_without_value_info(tmp_path, engine):
    model = _reorg_model(tmp_path / "m.onnx", [2, 8, 6, 6], None)
    config = _reorg_config(tmp_path / "cfg", "B,F*4,Y/2,X/2")
    net = _network(model, engine, config)
    x = np.random.default_rng(2).standard_normal((2, 8, 6, 6)).astype(np.float32)
    got = net.infer({"x": x})["y"]
    want = _sigmoid(_reference("reorg")([x], {"stride": "2"}, {})[0])
    assert got.shape == (2, 32, 3, 3)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_output_shaped_like_input0_and_unknown_shapes_downstream(tmp_path, engine):
    """Nothing says GRN's output shape: it is input 0's, and the Add and Mul after it (whose
    shapes inference could not know) are shaped by the network."""
    c = numpy_helper.from_array(np.array([0.5, -1.0, 2.0], np.float32).reshape(1, 3, 1, 1), "c")
    nodes = [helper.make_node("GRN", ["x"], ["g"], name="grn", domain=DOMAIN, bias=3e-08),
             helper.make_node("Add", ["g", "c"], ["a"], name="add"),
             helper.make_node("Mul", ["a", "a"], ["y"], name="square")]
    model = _save(tmp_path / "m.onnx", nodes, [_vi("x", [2, 3, 5, 4])], [_vi("y", None)], [c])
    net = _network(model, engine, LAYERS / "grn" / "grn.xml")
    assert "#define BIAS 3e-08\n" in _custom_step(net.plan).launches[0].source
    x = np.random.default_rng(3).standard_normal((2, 3, 5, 4)).astype(np.float32)
    got = net.infer({"x": x})["y"]
    a = _reference("grn")([x], {"bias": "3e-08"}, {})[0] + numpy_helper.to_array(c)
    np.testing.assert_allclose(got, a * a, rtol=1e-5, atol=1e-6)


def test_value_info_that_contradicts_the_shape_formula_is_refused(tmp_path, engine):
    model = _reorg_model(tmp_path / "m.onnx", [1, 4, 6, 8], None, reorg_info=[1, 4, 6, 8])
    config = _reorg_config(tmp_path / "cfg", "B,F*4,Y/2,X/2")
    with pytest.raises(ModelError) as info:
        _network(model, engine, config, input_shapes={"x": (1, 4, 6, 8)})
    text = str(info.value)
    assert "layer 'reorg' (type ReorgYolo)" in text
    assert "declared as [1, 4, 6, 8] in the model, but the descriptor's shape formula " \
           "'B,F*4,Y/2,X/2' (" in text
    assert ") gives [1, 16, 3, 4]; correct the formula or the shape the model declares" in text


def test_dynamic_batch_compiles_one_plan_per_shape(engine):
    """examples/models/reorg_dynamic.onnx: x [N,4,6,8], value_info of the custom output
    [N,16,3,4]; N comes from the input at run time."""
    net = _network(MODELS / "reorg_dynamic.onnx", engine, LAYERS / "reorg" / "reorg.xml")
    reference = _reference("reorg")
    cache = engine.cache

    def counters():
        return cache.hits, cache.disk_hits, cache.misses

    rng = np.random.default_rng(4)
    results = {}
    for batch in (1, 3):
        x = rng.standard_normal((batch, 4, 6, 8)).astype(np.float32)
        got = net.infer({"x": x})["y"]
        assert got.shape == (batch, 16, 3, 4)
        np.testing.assert_allclose(got, _sigmoid(reference([x], {"stride": "2"}, {})[0]),
                                   rtol=1e-5, atol=1e-6)
        before = counters()
        again = net.infer({"x": x})["y"]          # same shape: the plan exists, nothing is built
        assert counters() == before
        np.testing.assert_array_equal(again, got)
        results[batch] = net.plan_for({"x": (batch, 4, 6, 8)})
    one, three = results[1], results[3]
    assert one is not three
    # built-in defines and work sizes were recomputed for each shape
    src1, src3 = _custom_step(one).launches[0].source, _custom_step(three).launches[0].source
    assert "#define INPUT0_DIMS (int []){ 1,4,6,8, }" in src1
    assert "#define OUTPUT0_DIMS (int []){ 3,16,3,4, }" in src3
    assert _custom_step(one).launches[0].global_size == (8, 6, 4)
    assert _custom_step(three).launches[0].global_size == (8, 6, 12)


def test_external_data_is_followed_and_a_missing_file_named(tmp_path, engine):
    rng = np.random.default_rng(5)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("GRN", ["c"], ["y"], name="grn", domain=DOMAIN, bias=1.0)]
    (tmp_path / "sub").mkdir()
    model = _save(tmp_path / "sub" / "ext.onnx", nodes, [_vi("x", [1, 3, 6, 6])],
                  [_vi("y", [1, 4, 6, 6])],
                  [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
                  save_as_external_data=True, location="weights.bin", size_threshold=0)
    assert (tmp_path / "sub" / "weights.bin").stat().st_size == (w.size + b.size) * 4
    net = _network(model, engine, LAYERS / "grn" / "grn.xml")
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    want = _reference("grn")([_conv3x3_pad1(x, w, b).astype(np.float32)], {"bias": "1.0"}, {})[0]
    np.testing.assert_allclose(net.infer({"x": x})["y"], want, rtol=1e-4, atol=1e-5)

    (tmp_path / "sub" / "weights.bin").unlink()
    with pytest.raises(ModelError, match=r"weights\.bin"):
        _network(model, engine, LAYERS / "grn" / "grn.xml")


def test_every_unimplemented_custom_node_is_listed_with_its_domain(tmp_path, engine):
    nodes = [helper.make_node("GRN", ["x"], ["g"], name="grn", domain=DOMAIN),
             helper.make_node("Swirl", ["g"], ["s"], name="swirl1", domain="org.acme"),
             helper.make_node("Twist", ["s"], ["y"], name="twist", domain=DOMAIN, k=3)]
    graph = helper.make_graph(nodes, "g", [_vi("x", [1, 2, 3, 4])], [_vi("y", None)])
    model = helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 13), helper.make_opsetid(DOMAIN, 1),
        helper.make_opsetid("org.acme", 2)])
    onnx.save(model, str(tmp_path / "m.onnx"))
    with pytest.raises(ModelError) as info:
        _network(tmp_path / "m.onnx", engine, LAYERS / "grn" / "grn.xml")
    text = str(info.value)
    assert text.startswith("2 layer(s) of the model have no implementation:\n")
    assert "  swirl1 (type Swirl, domain org.acme)\n" in text
    assert "  twist (type Twist, domain com.example)\n" in text
    assert "custom layers loaded: GRN" in text and "grn (type GRN" not in text


def test_run_command_on_the_example_onnx_models(tmp_path, capsys, engine):
    out = tmp_path / "out.npz"
    x = np.random.default_rng(6).standard_normal((1, 3, 16, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    dev = ["-d", engine.device.name]              # the CLI on the same device as `engine`
    rc = main(["run", *dev, "-m", str(MODELS / "custom_node.onnx"), "-c",
               str(LAYERS / "grn" / "grn.xml"), "-i", str(tmp_path / "x.npy"), "-o", str(out)])
    assert rc == 0
    assert "y: shape [1, 4, 8, 8] float32" in capsys.readouterr().out
    net = _network(MODELS / "custom_node.onnx", engine, LAYERS / "grn" / "grn.xml")
    np.testing.assert_array_equal(np.load(out)["y"], net.infer({"x": x})["y"])

    # a dynamic batch: the size comes from --shape
    rc = main(["run", *dev, "-m", str(MODELS / "reorg_dynamic.onnx"), "-c",
               str(LAYERS / "reorg" / "reorg.xml"), "--shape", "x=2x4x6x8", "-o", str(out)])
    assert rc == 0
    assert np.load(out)["y"].shape == (2, 16, 3, 4)

    # without the config: the error names the node, its type and its domain
    rc = main(["run", *dev, "-m", str(MODELS / "reorg_dynamic.onnx"), "--shape", "x=1x4x6x8"])
    assert rc == 1
    assert "reorg (type ReorgYolo, domain com.example)" in capsys.readouterr().err


def test_validate_checks_the_shape_extension(tmp_path, capsys):
    good = _reorg_config(tmp_path / "good", "B,F*4,Y/2,X/2")
    assert main(["validate", str(good)]) == 0
    bad = _reorg_config(tmp_path / "bad", "B,F*4,Y/2,X/2,1")
    text = bad.read_text().replace('port-index="0" format="ANY"/>',
                                   'port-index="0" format="ANY" shape="B,Q"/>', 1)
    bad.write_text(text)
    assert main(["validate", str(bad)]) == 1
    out = capsys.readouterr()
    report = out.out + out.err
    assert "warning[CL064]: shape 'B,Q' on an input Tensor is ignored" in report
    assert ("error[CL063]: shape 'B,F*4,Y/2,X/2,1' has 5 entries; a custom layer's tensor has "
            "at most 4 dims (B,F,Y,X) (layer ReorgYolo)") in report
    line = text.splitlines().index(next(l for l in text.splitlines() if "X/2,1" in l)) + 1
    assert f"reorg.xml:{line}:" in report
    bad.write_text(text.replace("X/2,1", "Z"))
    assert main(["validate", str(bad)]) == 1
    assert "error[CL060]: shape 'B,F*4,Y/2,Z' does not parse: unknown token 'Z'" in \
        capsys.readouterr().out


def _grn_ref(x, bias=1.0):
    return x / np.sqrt((x.astype(np.float64) ** 2).sum(axis=1, keepdims=True) + bias)


def test_custom_output_shapes_are_known_when_the_model_is_read(tmp_path, engine, capsys):
    """Issue 8, class 7: ONNX inference stops at a custom node; the loaded layer's shape rule
    (here GRN's: input 0's shape) is asked at import, so a GlobalAveragePool after it translates
    and a convolution's bias after it is fused."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((6, 4, 3, 3)).astype(np.float32) * 0.2
    b = rng.standard_normal(6).astype(np.float32)
    nodes = [helper.make_node("GRN", ["x"], ["g"], domain="com.example", bias=1.0),
             helper.make_node("Conv", ["g", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["c"], ["y"])]
    model = _save(tmp_path / "m.onnx", nodes, [_vi("x", [1, 4, 5, 5])], [_vi("y", None)],
                  [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    net = _network(model, engine, LAYERS / "grn" / "grn.xml")
    assert ("Convolution+bias", "built-in") in [(s.type, s.impl) for s in net.plan.steps]
    x = rng.standard_normal((1, 4, 5, 5)).astype(np.float32)
    want = _conv3x3_pad1(_grn_ref(x), w, b).mean(axis=(2, 3), keepdims=True)
    np.testing.assert_allclose(net.infer({"x": x})["y"], want, rtol=1e-4, atol=1e-5)
    # and through the CLI
    from customlayers.cli import main
    code = main(["run", "-m", str(model), "-c", str(LAYERS / "grn" / "grn.xml"), "-d", "CPU"])
    assert code == 0, capsys.readouterr().err


def test_a_convolution_with_a_bias_is_named_after_its_node(tmp_path, engine):
    """Profiles and traces name layers by the model's nodes: the Conv's bias Add (fused into
    it) must not take the node's name from the convolution."""
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    b = numpy_helper.from_array(np.ones(4, np.float32), "b")
    node = helper.make_node("Conv", ["x", "w", "b"], ["c"], name="myconv", pads=[1, 1, 1, 1])
    model = _save(tmp_path / "m.onnx", [node], [_vi("x", [1, 3, 8, 8])], [_vi("c", [1, 4, 8, 8])],
                  [w, b])
    assert [s.name for s in _network(model, engine).plan.steps] == ["myconv"]
    from customlayers.runtime.compile.network import Network
    unfused = Network(str(model), engine=engine, fuse=False)
    assert [s.name for s in unfused.plan.steps] == ["myconv", "myconv/add_bias"]


def test_overriding_a_builtin_that_takes_attributes_as_inputs_says_so(tmp_path, engine):
    """ONNX's HardSigmoid reads as OpenVINO's (x, alpha, beta): a descriptor that overrides it
    with one input port is refused with the reason and what to bind, not a bare count."""
    from customlayers.errors import BindingError
    shutil.copy(LAYERS / "relu" / "relu.cl", tmp_path / "relu.cl")
    text = (LAYERS / "relu" / "relu.xml").read_text().replace('name="ReLU"', 'name="HardSigmoid"')
    (tmp_path / "hsig.xml").write_text(text)
    graph = helper.make_graph(
        [helper.make_node("HardSigmoid", ["x"], ["y"], alpha=0.3, beta=0.4)], "hs",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "hs.onnx")
    with pytest.raises(BindingError) as err:
        _network(tmp_path / "hs.onnx", engine, tmp_path / "hsig.xml")
    msg = str(err.value)
    assert "gives this layer 3 inputs" in msg and "binds 1 input port(s)" in msg
    assert "input(s) 1, 2 are constants" in msg and "alpha, beta" in msg
    assert "hsig.xml" in msg


def test_a_model_made_in_memory_runs_as_its_file_does(tmp_path, engine):
    """onnx.helper's ModelProto goes to Network as it is (no onnx.save first), is read as its
    file would be (errors name it by its graph), and is left as the caller made it."""
    ort = pytest.importorskip("onnxruntime")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("Softmax", ["h"], ["y"], axis=-1)]
    w = numpy_helper.from_array(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), "w")
    graph = helper.make_graph(nodes, "head", [_vi("x", [2, 4])], [_vi("y", [2, 3])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    before = model.SerializeToString()
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 8
    want = ort.InferenceSession(before, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = _network(model, engine).infer({"x": x})["y"]
    np.testing.assert_allclose(got, want[0], rtol=1e-5, atol=1e-6)
    assert model.SerializeToString() == before
    bad = helper.make_model(helper.make_graph(nodes, "head", [_vi("x", [2, 4])], [], [w]))
    with pytest.raises(ModelError, match=r"^<ModelProto 'head'>: the model's graph has no "
                                         r"outputs"):
        _network(bad, engine)


def test_inputs_that_disagree_on_a_named_dim_are_both_named(engine):
    """BERT's input_ids and attention_mask share the dim 'sequence': a mask of another length
    is refused naming the dim, both inputs and both sizes."""
    import sys
    sys.path.insert(0, str(ROOT / "tests"))
    import transformer_models as tm
    model, feeds = tm.bert(dynamic=True)
    net = _network(model, engine)
    feeds["attention_mask"] = feeds["attention_mask"][:, :12]
    with pytest.raises(ModelError, match=r"^the model names dim 'sequence' of several inputs "
                                         r"alike: input 'attention_mask' gives it 12, input "
                                         r"'input_ids' 16$"):
        net.infer(feeds)
