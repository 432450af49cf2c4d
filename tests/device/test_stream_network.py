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
