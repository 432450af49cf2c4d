"""Network.streaming on the seed's TCN (bench/gpu_peers.onnx_tcn: 8 blocks of 25 channels,
kernel 7, dilations 1..128, 1x1 downsample, residual, Gemm on the last step, LogSoftmax), shorter:
at every step the stream's output equals the full-window network (ours) run on the input up to
that step, read at its last step; and the numpy stepper of the converted program."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from customlayers.api import Engine, Network
from customlayers.errors import ModelError
from customlayers.ops.stream.reference import ReferenceStream

sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))  # after tests/: both have a models.py
import gpu_peers  # noqa: E402

@pytest.fixture(scope="module")
def engine():
    return Engine()


def tcn_network(engine, tmp_path, batch, length):
    path = gpu_peers.onnx_tcn(tmp_path / f"tcn_{batch}_{length}.onnx", batch, length=length,
                              weight_norm=True)
    return Network(path, engine=engine)


def close(got, want, where):
    scale = float(np.abs(want).max())
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * scale, err_msg=where)


@pytest.mark.parametrize("batch,steps,windows", [(1, 40, (1, 2, 13, 40)), (64, 12, (12,))])
def test_tcn_streams_as_the_full_window(engine, tmp_path, batch, steps, windows):
    x = np.random.default_rng(batch).standard_normal((batch, 1, steps)).astype(np.float32)
    net = tcn_network(engine, tmp_path, batch, steps)
    stream = net.streaming()
    ref = ReferenceStream(stream.program, batch)
    got = []
    for t in range(steps):
        frame = x[:, :, t]                        # a view of the window: strided
        step, want = stream.step(frame), ref.step(frame)
        assert step["y"].shape == (batch, gpu_peers.TCN_CLASSES)
        close(step["y"], want["y"], f"step {t} against the numpy stepper")
        got.append(step["y"])
    # a ring per causal convolution, named by its layer, holding its last (k-1)*d inputs
    states = stream.query_state()
    assert [s.name for s in states] == [f"b{lv}c{j}" for lv in range(8) for j in (1, 2)]
    assert states[0].state.shape == (batch, 1, 6)
    np.testing.assert_array_equal(states[0].state[:, 0, -1], x[:, 0, steps - 1])
    # the full-window model of each length (its Gather reads its last step) on the prefix
    for length in windows:
        window = tcn_network(engine, tmp_path, batch, length)
        full = window.infer({"x": np.ascontiguousarray(x[:, :, :length])})["y"]
        close(got[length - 1], full, f"step {length - 1} against the {length}-step window")


def test_a_model_that_cannot_stream_is_refused(engine, tmp_path):
    from onnx import TensorProto, helper, numpy_helper, save
    w = numpy_helper.from_array(np.ones((2, 1, 3), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1], kernel_shape=[3])], "centred",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 16])], [w])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
         tmp_path / "centred.onnx")
    with pytest.raises(ModelError):
        Network(tmp_path / "centred.onnx", engine=engine).streaming()


def test_the_torch_export_streams_to_torchs_output(engine):
    """The seed's TCN as torch exports it (weight norm kept, N and T dynamic), 784 steps of two
    streams: the last step is torch's own output; steps on the way are our full-window
    network on the prefix."""
    models = Path(__file__).resolve().parents[1] / "data" / "models"
    x = np.load(models / "tcn_torch_x.npy")
    net = Network(models / "tcn_torch_wn.onnx", engine=engine)
    stream = net.streaming()
    got = [stream.step(np.ascontiguousarray(x[:, :, t]))["y"] for t in range(x.shape[2])]
    np.testing.assert_allclose(got[-1], np.load(models / "tcn_torch_y.npy"), rtol=1e-5,
                               atol=1e-5)
    for length in (1, 300, 784):
        full = net.infer({"x": np.ascontiguousarray(x[:, :, :length])})["y"]
        close(got[length - 1], full, f"step {length - 1} against the {length}-step window")


def test_a_frame_by_name_and_a_package_that_cannot_stream(engine, tmp_path):
    """step({input name: frame}) as a stateful model's stream takes it; another name refused;
    a compiled package (plans, no graph) refuses streaming with what to do instead."""
    from customlayers.api import TensorError
    from customlayers.runtime.compile.packaged import save_package
    net = tcn_network(engine, tmp_path, 1, 8)
    stream = net.streaming()
    frame = np.ones((1, 1), np.float32)
    by_name, plain = stream.step({"x": frame}), None
    stream.reset()
    plain = stream.step(frame)
    np.testing.assert_array_equal(by_name["y"], plain["y"])
    with pytest.raises(TensorError, match=r"inputs \['z'\]; the model streams one input, 'x'"):
        stream.step({"z": frame})
    net.infer({"x": np.ones((1, 1, 8), np.float32)})
    save_package(net, tmp_path / "tcn.clpkg")
    with pytest.raises(ModelError, match=r"a compiled package holds the compiled plans.*stream "
                                         r"the model file itself"):
        Network(tmp_path / "tcn.clpkg", engine=engine).streaming()


def _length_read_tcn(path: Path, scale_by_length: bool = False) -> Path:
    """Two causal convolutions (kernel 3, dilations 1 and 2) whose chomp is written as the
    input's length, Slice(ends=Shape(h)[2]) with N and T open, a residual, a last-step head;
    scale_by_length: the sequence multiplied by T (Cast(Shape(x)[2])), a step that depends
    on the length."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(11)
    inits, nodes, h = [], [], "x"

    def const(value, name, dtype=np.float32):
        inits.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name
    for j, d in enumerate((1, 2)):
        pad = 2 * d
        nodes += [helper.make_node("Conv", [h, const(rng.standard_normal((4, 4 if j else 2, 3))
                                                     * 0.4, f"w{j}"),
                                            const(rng.standard_normal(4) * 0.1, f"b{j}")],
                                   [f"c{j}"], pads=[pad, pad], dilations=[d], kernel_shape=[3]),
                  helper.make_node("Shape", [h], [f"s{j}"]),
                  helper.make_node("Gather", [f"s{j}", const([2], f"i{j}", np.int64)],
                                   [f"len{j}"], axis=0),
                  helper.make_node("Slice", [f"c{j}", const([0], f"z{j}", np.int64), f"len{j}",
                                             const([2], f"a{j}", np.int64)], [f"sl{j}"]),
                  helper.make_node("Relu", [f"sl{j}"], [f"r{j}"])]
        h = f"r{j}"
    if scale_by_length:
        nodes += [helper.make_node("Cast", ["len1"], ["lenf"], to=TensorProto.FLOAT),
                  helper.make_node("Mul", [h, "lenf"], ["scaled"])]
        h = "scaled"
    nodes += [helper.make_node("Gather", [h, const(-1, "last", np.int64)], ["lastv"], axis=2),
              helper.make_node("MatMul", ["lastv", const(rng.standard_normal((4, 3)), "fc")],
                               ["y"])]
    graph = helper.make_graph(nodes, "tcn", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, ["N", 2, "T"])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, ["N", 3])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_a_chomp_written_as_the_inputs_length_streams(engine, tmp_path):
    """Slice(ends=Shape(h)[2]) with the length open (a new user's export: refused as 'FoldOnly
    is not a layer a step runs'): folded at two lengths, which give the same step, and every
    step equals the full window; a model whose step does depend on the length is refused."""
    net = Network(_length_read_tcn(tmp_path / "len.onnx"), engine=engine)
    stream = net.streaming()
    x = np.random.default_rng(4).standard_normal((2, 2, 15)).astype(np.float32)
    for t in range(15):
        close(stream.step(x[:, :, t])["y"], net.infer({"x": x[:, :, :t + 1]})["y"], f"step {t}")
    scaled = Network(_length_read_tcn(tmp_path / "scaled.onnx", True), engine=engine)
    with pytest.raises(ModelError, match=r"cannot stream the model 'tcn': its shape arithmetic "
                                         r"reads the length of its input, and its step at "
                                         r"length 4099 is not its step at length 8209"):
        scaled.streaming()


def test_a_gate_split_on_channels_streams_through_the_network(engine, tmp_path):
    """Network.streaming() of a gated unit written with a Split of the channel axis (refused
    before: "a stream slices the last step of the time axis only"), each step against ONNX
    Runtime on the window up to it."""
    pytest.importorskip("onnxruntime")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from causal_models import CausalModel
    import onnxruntime as ort
    c = 5
    m = CausalModel(c)
    h = m.causal_conv("x", c, 2 * c, 3, 2)
    a = m.add("Split", [h, m.const([c, c], np.int64)], outputs=2, axis=1)
    y = m.add("Mul", [m.add("Tanh", [a]), m.add("Sigmoid", [f"{a}_1"])])
    path = m.save(tmp_path / "gate.onnx", [y])
    x = np.random.default_rng(3).standard_normal((2, c, 9)).astype(np.float32)
    stream = Network(str(path), engine=engine).streaming()
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for t in range(x.shape[2]):
        got = stream.step(x[:, :, t])[y]
        want = session.run(None, {"x": x[:, :, :t + 1]})[0][..., -1]
        close(got, want, f"step {t}")
