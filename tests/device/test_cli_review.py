"""Review findings on the CLI (run, run-layer, benchmark, demo, the dispatcher), each reproduced
through customlayers.cli.main as a user runs it: a clear message and the right exit status, never
a traceback, a hang or a runaway allocation. Real kernels on the test device, no mocks."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from customlayers.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ROOT / "examples" / "layers"
RELU = str(LAYERS / "relu" / "relu.xml")
DEMO_BUILTIN = str(ROOT / "examples" / "models" / "demo_cnn_builtin.xml")
TEST_DEVICE = os.environ.get("CUSTOMLAYERS_TEST_DEVICE", "CPU")   # as conftest.py reads it


def main(argv: list[str]) -> int:
    """The CLI on the test device (unless the test names one)."""
    if "-d" not in argv and argv[0] != "validate":
        argv = argv[:1] + ["-d", TEST_DEVICE] + argv[1:]
    return cli_main(argv)


def fails(argv, capsys, code: int) -> str:
    """Run the CLI, expect exit `code` and no traceback; the stderr text."""
    status = main(argv)
    err = capsys.readouterr().err
    assert status == code, err
    assert "Traceback" not in err
    return err


def usage_fails(argv, capsys) -> str:
    """An argparse refusal: SystemExit(2) with the message on stderr."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert "Traceback" not in err
    return err


def save(path: Path, array: np.ndarray) -> str:
    np.save(path, array)
    return str(path)


def rand(*shape, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# -- 1. tracebacks that reached the user -----------------------------------------------------
def test_negative_seed_is_refused_by_the_parser(capsys):
    for command in ("run", "benchmark"):
        err = usage_fails([command, "-m", DEMO_BUILTIN, "--seed", "-1"], capsys)
        assert "--seed: must be a non-negative integer, found '-1'" in err


def test_npz_input_is_refused_by_run_as_by_run_layer(tmp_path, capsys):
    z = tmp_path / "z.npz"
    np.savez(z, a=rand(1, 3, 32, 32))
    err = fails(["run", "-m", DEMO_BUILTIN, "-i", str(z)], capsys, code=2)
    assert f"input 'data' {z}: an .npz archive; give one array as .npy" in err
    err = fails(["run-layer", "-c", RELU, "--layer", "ReLU", "-i", str(z),
                 "-o", str(tmp_path / "o.npy")], capsys, code=2)
    assert f"input 0 {z}: an .npz archive; give one array as .npy" in err


def test_opencl_error_is_a_message(tmp_path, capsys):
    # an output no OpenCL device can allocate (4 TB): pyopencl raises INVALID_BUFFER_SIZE
    x = save(tmp_path / "x.npy", rand(1, 1, 2, 2))
    out = tmp_path / "o.npy"
    err = fails(["run-layer", "-c", RELU, "--layer", "ReLU", "-i", x,
                 "--output-shape", "1x1x1000000x1000000", "-o", str(out)], capsys, code=1)
    assert "error: OpenCL: " in err and "INVALID_BUFFER_SIZE" in err
    assert not out.exists()


# -- 2. commands that hung or allocated without bound ----------------------------------------
@pytest.mark.parametrize("seconds", ["inf", "nan", "-1", "0"])
def test_benchmark_time_must_be_finite_and_positive(capsys, seconds):
    err = fails(["benchmark", "-m", DEMO_BUILTIN, "-t", seconds], capsys, code=2)
    assert f"-t must be a finite, positive number of seconds, not {float(seconds)}" in err


def test_benchmark_requests_are_capped(capsys):
    err = fails(["benchmark", "-m", DEMO_BUILTIN, "-nireq", "100000"], capsys, code=2)
    assert "-nireq must be at most 64, found 100000" in err
    # more requests than inferences: the ones that would never run are not created
    assert main(["benchmark", "-m", DEMO_BUILTIN, "-nireq", "8", "-niter", "2"]) == 0
    captured = capsys.readouterr()
    assert "2 request(s) in flight (-nireq 8 capped at -niter 2)" in captured.err
    assert "count:      2 inferences" in captured.out


def test_demo_runs_are_capped(capsys):
    err = fails(["demo", "--runs", "1000000000"], capsys, code=2)
    assert "--runs must be at most 10000, found 1000000000" in err
