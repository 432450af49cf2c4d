"""Issue 21 point 7 for IR files with state (ReadValue/Assign): `run -i a.npy -i b.npy ...`
runs the files as a sequence on one request, `--stream -i seq.npy` the steps of the file's
first axis; -o stacks each output's steps. Compared with OpenVINO CPU over the sequence."""
from __future__ import annotations

import os

import numpy as np
import pytest

from customlayers.cli import main as cli_main

ov = pytest.importorskip("openvino")
from stateful_models import CPU_FP32, rnn_cell, running_sum  # noqa: E402

TEST_DEVICE = os.environ.get("CUSTOMLAYERS_TEST_DEVICE", "CPU")
STEPS = 20


def main(argv: list[str]) -> int:
    return cli_main(argv[:1] + ["-d", TEST_DEVICE, "--tuning", "off"] + argv[1:])


def _openvino_steps(path, name, xs) -> np.ndarray:
    req = ov.Core().compile_model(str(path), "CPU", CPU_FP32).create_infer_request()
    return np.stack([req.infer({name: x})[0] for x in xs])


def test_run_takes_the_files_of_a_stateful_model_as_a_sequence(tmp_path, capsys):
    model = rnn_cell(tmp_path / "rnn.xml")
    xs = np.random.default_rng(4).standard_normal((STEPS, 2, 5)).astype(np.float32)
    files = []
    for t, x in enumerate(xs):
        files += ["-i", str(tmp_path / f"x{t}.npy")]
        np.save(files[-1], x)
    out = tmp_path / "steps.npy"
    assert main(["run", "-m", model, *files, "-o", str(out)]) == 0
    printed = capsys.readouterr()
    assert f"step {STEPS - 1}: h_out: shape [2, 6] float32" in printed.out
    assert f"{STEPS} step(s) on one request, its state carried (h)" in printed.err
    np.testing.assert_allclose(np.load(out), _openvino_steps(model, "x", xs), rtol=1e-5,
                               atol=1e-6)


def test_run_stream_takes_the_first_axis_as_the_steps(tmp_path):
    model = running_sum(tmp_path / "sum.xml", "opset6-input")
    xs = np.random.default_rng(6).standard_normal((STEPS, 2, 4)).astype(np.float32)
    np.save(tmp_path / "seq.npy", xs)
    out = tmp_path / "steps.npz"
    assert main(["run", "-m", model, "--stream", "-i", f"x={tmp_path / 'seq.npy'}",
                 "-o", str(out)]) == 0
    np.testing.assert_allclose(np.load(out)["y"], _openvino_steps(model, "x", xs), rtol=1e-5,
                               atol=1e-6)


def test_a_sequence_of_another_shape_is_refused_naming_the_step(tmp_path, capsys):
    model = running_sum(tmp_path / "sum.xml", "opset6")
    np.save(tmp_path / "a.npy", np.zeros((2, 4), np.float32))
    np.save(tmp_path / "b.npy", np.zeros((4, 2), np.float32))
    assert main(["run", "-m", model, "-i", str(tmp_path / "a.npy"),
                 "-i", str(tmp_path / "b.npy")]) != 0
    assert "input 'x' step 1 (" in capsys.readouterr().err


def test_stream_on_a_model_without_state_is_refused(tmp_path, capsys):
    import openvino.opset6 as op6
    x = op6.parameter([2, 4], np.float32, name="x")
    path = tmp_path / "relu.xml"
    ov.save_model(ov.Model([op6.result(op6.relu(x))], [x], "relu"), str(path),
                  compress_to_fp16=False)
    # without state, --stream walks the time axis of a causal model (causal_steps.py): this
    # one has none, and the conversion says so
    np.save(tmp_path / "seq.npy", np.zeros((2, 4), np.float32))
    assert main(["run", "-m", str(path), "--stream", "-i", str(tmp_path / "seq.npy")]) != 0
    err = capsys.readouterr().err
    assert "stream" in err and "Traceback" not in err


@pytest.mark.parametrize("dtype,notes", [("int32", 1), ("float64", 0)])
def test_run_stream_says_a_files_conversion_once(tmp_path, capsys, dtype, notes):
    """--stream -i seq.npy converts the file to the model's type as run without --stream
    converts an input: a note on stderr naming the input and both types, once for the file
    (not per step); float64 to float32 without one, as run's other inputs (README, step 5)."""
    model = running_sum(tmp_path / "sum.xml", "opset6")
    xs = np.arange(STEPS * 8).reshape(STEPS, 2, 4).astype(dtype)
    np.save(tmp_path / "seq.npy", xs)
    np.save(tmp_path / "one.npy", xs[0])
    out = tmp_path / "steps.npy"
    for argv in (["--stream", "-i", str(tmp_path / "seq.npy"), "-o", str(out)],
                 ["-i", str(tmp_path / "one.npy")]):
        assert main(["run", "-m", model, *argv]) == 0
        err = capsys.readouterr().err
        said = [line for line in err.splitlines() if line.startswith("note: input 'x'")]
        assert said == [f"note: input 'x' ({argv[1 + (argv[0] == '--stream')]}) is {dtype}; "
                        f"the model takes float32: converted"] * notes, err
    np.testing.assert_allclose(np.load(out), np.cumsum(xs, axis=0), rtol=1e-6)
