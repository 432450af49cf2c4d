"""Issue 21 point 7 for whole-window causal models: `run -m tcn.onnx --stream -i seq.npy -o
steps.npy` walks the input's time axis one step at a time (Network.streaming) and writes every
step's outputs; `benchmark --stream` reports the per-step latency against the window. Each
step's output is checked against the full-window model on the input up to that step."""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from customlayers.api import Engine, Network
from customlayers.cli import main as cli_main

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "streaming_tcn"))
import stream_tcn  # noqa: E402

TEST_DEVICE = os.environ.get("CUSTOMLAYERS_TEST_DEVICE", "CPU")


def main(argv: list[str]) -> int:
    return cli_main(argv[:1] + ["-d", TEST_DEVICE, "--tuning", "off"] + argv[1:])


@pytest.fixture(scope="module")
def tcn(tmp_path_factory) -> Path:
    return stream_tcn.build_tcn(tmp_path_factory.mktemp("tcn") / "tcn.onnx")


def test_run_stream_writes_every_step_equal_to_the_window_up_to_it(tcn, tmp_path, capsys):
    seq = np.random.default_rng(3).random((2, 1, 40)).astype(np.float32)
    np.save(tmp_path / "seq.npy", seq)
    out = tmp_path / "steps.npy"
    assert main(["run", "-m", str(tcn), "--stream", "-i", str(tmp_path / "seq.npy"),
                 "-o", str(out)]) == 0
    printed = capsys.readouterr()
    assert "step 39: y: shape [2, 10] float32" in printed.out
    assert "40 step(s) of 2 stream(s), one kernel launch each" in printed.err
    steps = np.load(out)
    assert steps.shape == (40, 2, 10)
    net = Network(tcn, engine=Engine(TEST_DEVICE), tuning="off")
    for t in (1, 17, 40):
        full = net.infer({"x": seq[:, :, :t]})["y"]
        np.testing.assert_allclose(steps[t - 1], full, rtol=1e-5, atol=1e-6)


def test_benchmark_stream_reports_steps_against_the_window(tcn, tmp_path, capsys):
    np.save(tmp_path / "seq.npy", np.ones((1, 1, 30), np.float32))
    assert main(["benchmark", "-m", str(tcn), "--stream", "-i", str(tmp_path / "seq.npy"),
                 "-niter", "50"]) == 0
    out = capsys.readouterr().out
    took = re.search(r"steps:            50 in ([\d.]+) (m?s)\n", out)
    assert took and float(took.group(1)) > 0, out      # was "0.00 s" for 50 short steps
    assert "per step:         median" in out
    assert "whole window:" in out and "x a step" in out


def test_stream_of_an_input_without_a_time_axis_is_a_usage_error(tcn, tmp_path, capsys):
    np.save(tmp_path / "flat.npy", np.ones((2, 1), np.float32))
    assert main(["run", "-m", str(tcn), "--stream", "-i", str(tmp_path / "flat.npy")]) != 0
    err = capsys.readouterr().err
    assert "input 'x' has shape [2, 1]" in err or "has shape [2, 1]" in err
    assert "Traceback" not in err


def test_stream_of_a_model_that_is_not_causal_names_the_layer(tmp_path, capsys):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.ones((4, 1, 3), np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1], kernel_shape=[3],
                            name="centred")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 1, 16])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 4, 16])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "centred.onnx")
    np.save(tmp_path / "seq.npy", np.ones((1, 1, 16), np.float32))
    assert main(["run", "-m", str(tmp_path / "centred.onnx"), "--stream", "-i",
                 str(tmp_path / "seq.npy")]) != 0
    err = capsys.readouterr().err
    assert "centred" in err and "Traceback" not in err


def test_stream_of_a_compiled_package_says_to_stream_the_model_file(tcn, tmp_path, capsys):
    """A package holds plans, not the graph a stream is made from: `run --stream` on one says
    so (as Network.streaming does), not that the model has no state."""
    package = tmp_path / "tcn.clpkg"
    assert cli_main(["compile", "-m", str(tcn), "-d", TEST_DEVICE, "--tuning", "off",
                     "--shape", "x=1x1x30", "-o", str(package)]) == 0
    np.save(tmp_path / "seq.npy", np.ones((1, 1, 30), np.float32))
    assert main(["run", "-m", str(package), "--stream", "-i", str(tmp_path / "seq.npy")]) == 2
    err = capsys.readouterr().err
    assert "is a compiled package" in err and "stream the model file itself" in err
    assert "Traceback" not in err


def test_stream_of_a_sequence_without_steps_and_nireq_say_so(tcn, tmp_path, capsys):
    """A sequence whose time axis is 0 is named as such (not as a window that does not fit a
    convolution); -nireq or a throughput -hint with --stream gets a note that one stream runs
    one step at a time;
    the per-step line gives the median once when the percentile asked is the median."""
    np.save(tmp_path / "empty.npy", np.ones((1, 1, 0), np.float32))
    assert main(["run", "-m", str(tcn), "--stream", "-i", str(tmp_path / "empty.npy")]) == 2
    err = capsys.readouterr().err
    assert "input 'x' has no steps (shape [1, 1, 0]" in err and "Traceback" not in err
    np.save(tmp_path / "seq.npy", np.ones((1, 1, 12), np.float32))
    assert main(["benchmark", "-m", str(tcn), "--stream", "-i", str(tmp_path / "seq.npy"),
                 "-niter", "20", "-nireq", "4"]) == 0
    printed = capsys.readouterr()
    assert "note: -nireq 4: a stream runs one step at a time" in printed.err
    assert "p50" not in printed.out and "per step:         median" in printed.out
    assert main(["benchmark", "-m", str(tcn), "--stream", "-i", str(tmp_path / "seq.npy"),
                 "-niter", "20", "-latency_percentile", "90", "-hint", "throughput"]) == 0
    printed = capsys.readouterr()
    assert "p90" in printed.out
    assert "note: -hint throughput: a stream runs one step at a time" in printed.err
