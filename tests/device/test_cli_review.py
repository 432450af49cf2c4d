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
    # an output no OpenCL device allocates in one buffer (256 GiB; its pitches still fit an
    # int): clCreateBuffer failed (INVALID_BUFFER_SIZE on PoCL); since issue 18 the binding
    # refuses it with the figures before any buffer (runtime/device/device_memory.py)
    x = save(tmp_path / "x.npy", rand(1, 1, 2, 2))
    out = tmp_path / "o.npy"
    err = fails(["run-layer", "-c", RELU, "--layer", "ReLU", "-i", x,
                 "--output-shape", "64x1x32768x32768", "-o", str(out)], capsys, code=1)
    assert err.startswith("error: output 0 (64x1x32768x32768 f32 bfyx) needs 262144.0 MiB in "
                          "one buffer, but device "), err
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


# -- 3. writing outputs: checked before any work, created folders, the user's umask ---------
def relu_layer_args(tmp_path: Path) -> list[str]:
    return ["run-layer", "-c", RELU, "--layer", "ReLU",
            "-i", save(tmp_path / "x.npy", rand(1, 2, 3, 4))]


def test_output_to_a_folder_is_refused_before_running(tmp_path, capsys):
    folder = tmp_path / "outdir"
    folder.mkdir()
    for argv in (["run", "-m", DEMO_BUILTIN], relu_layer_args(tmp_path)):
        status = main(argv + ["-o", str(folder)])
        captured = capsys.readouterr()
        assert status == 2, captured.err
        assert f"-o {folder}: is a folder; name a file in it (.npy or .npz)" in captured.err
        assert captured.out == ""                    # nothing ran, no outputs printed
        assert list(folder.iterdir()) == []
        assert sorted(p.name for p in tmp_path.iterdir()) == ["outdir", "x.npy"]  # no temp file


def test_output_suffix_must_be_npy_or_npz(tmp_path, capsys):
    for argv in (["run", "-m", DEMO_BUILTIN], relu_layer_args(tmp_path)):
        err = fails(argv + ["-o", str(tmp_path / "out.txt")], capsys, code=2)
        assert "out.txt: name the file .npy (one array) or .npz" in err
        assert not (tmp_path / "out.txt").exists()


def test_missing_output_folders_are_created_by_run_and_run_layer(tmp_path, capsys):
    out = tmp_path / "new" / "deeper" / "run.npy"
    assert main(["run", "-m", DEMO_BUILTIN, "-o", str(out)]) == 0
    assert np.load(out).shape == (1, 10)
    out = tmp_path / "other" / "layer.npy"
    assert main(relu_layer_args(tmp_path) + ["-o", str(out)]) == 0
    np.testing.assert_array_equal(np.load(out), np.maximum(np.load(tmp_path / "x.npy"), 0))


def test_output_folder_under_a_file_is_refused(tmp_path, capsys):
    (tmp_path / "plain").write_text("a file")
    for argv in (["run", "-m", DEMO_BUILTIN], relu_layer_args(tmp_path)):
        err = fails(argv + ["-o", str(tmp_path / "plain" / "out.npy")], capsys, code=2)
        assert f"{tmp_path / 'plain'} is a file, not a folder" in err


@pytest.fixture
def umask_027():
    old = os.umask(0o027)
    yield
    os.umask(old)


def test_outputs_get_the_mode_a_plain_open_gives(tmp_path, capsys, umask_027):
    run_out, layer_out = tmp_path / "run.npz", tmp_path / "layer.npy"
    assert main(["run", "-m", DEMO_BUILTIN, "-o", str(run_out)]) == 0
    assert main(relu_layer_args(tmp_path) + ["-o", str(layer_out)]) == 0
    assert (run_out.stat().st_mode & 0o777) == 0o640     # 0o666 & ~umask, as open() gives
    assert (layer_out.stat().st_mode & 0o777) == 0o640


def test_write_arrays_atomically_npy_npz_and_failure(tmp_path):
    from customlayers.cli import UsageError
    from customlayers.cli.user_files.output import write_arrays_atomically
    a, b = rand(2, 3), rand(4, seed=1)
    write_arrays_atomically(str(tmp_path / "one.npy"), {"a": a})
    np.testing.assert_array_equal(np.load(tmp_path / "one.npy"), a)
    write_arrays_atomically(str(tmp_path / "two.npz"), {"a": a, "b": b})
    with np.load(tmp_path / "two.npz") as z:
        assert sorted(z.files) == ["a", "b"]
        np.testing.assert_array_equal(z["b"], b)
    (tmp_path / "keep.npy").write_bytes(b"previous")
    with pytest.raises(UsageError, match="2 arrays: a .npy holds one; name the file .npz"):
        write_arrays_atomically(str(tmp_path / "keep.npy"), {"a": a, "b": b})
    assert (tmp_path / "keep.npy").read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.npy", "one.npy", "two.npz"]


# -- 4. every command exists: a missing one is an error, not silently left out ---------------
def test_every_command_is_in_the_help(capsys):
    import customlayers.cli as cli
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for name in ("validate", "jit", "layers", "run-layer", "devices", "run", "benchmark", "demo"):
        assert name in cli.COMMANDS and name in out


def test_a_missing_command_module_fails_loudly(monkeypatch):
    import customlayers.cli as cli
    monkeypatch.setitem(cli.COMMANDS, "gone", "gone")
    with pytest.raises(ModuleNotFoundError, match="customlayers.cli.gone"):
        cli.build_parser()


# -- 5. --output-shape against the descriptor's shape formula --------------------------------
TILE_CL = """
__kernel void tile_f(const __global float* x, __global float* y)
{
    // the output holds the input twice along F: with B = 1 that is y[i] = x[i % n]
    const uint n = INPUT0_DIMS[0] * INPUT0_DIMS[1] * INPUT0_DIMS[2] * INPUT0_DIMS[3];
    const uint i = get_global_id(0);
    y[i] = x[i % n];
}
"""
TILE_XML = """<CustomLayer name="TileF" type="SimpleGPU" version="1">
  <Kernel entry="tile_f"><Source filename="tile.cl"/></Kernel>
  <Buffers>
    <Tensor arg-index="0" type="input" port-index="0"/>
    <Tensor arg-index="1" type="output" port-index="0" shape="B,F*2,Y,X"/>
  </Buffers>
</CustomLayer>
"""


def tile_layer_args(tmp_path: Path, x: np.ndarray) -> list[str]:
    (tmp_path / "tile.xml").write_text(TILE_XML)
    (tmp_path / "tile.cl").write_text(TILE_CL)
    return ["run-layer", "-c", str(tmp_path / "tile.xml"), "--layer", "TileF",
            "-i", save(tmp_path / "x.npy", x)]


def test_output_shape_that_disagrees_with_the_formula_is_refused(tmp_path, capsys):
    x = rand(1, 2, 3, 4)
    args = tile_layer_args(tmp_path, x)
    out = tmp_path / "o.npy"
    # 1x2x3x4 would make the kernel write 1x4x3x4 into half the room
    err = fails(args + ["--output-shape", "1x2x3x4", "-o", str(out)], capsys, code=2)
    assert ("--output-shape 1x2x3x4 for output 0 disagrees with the shape formula "
            "'B,F*2,Y,X' of layer 'TileF' (") in err
    assert "tile.xml:5:" in err and "which gives 1x4x3x4 for these inputs" in err
    assert not out.exists()

    expected = np.concatenate([x, x], axis=1)
    for given in ([], ["--output-shape", "1x4x3x4"]):     # the formula's own shape, or none
        assert main(args + given + ["-o", str(out)]) == 0, capsys.readouterr().err
        np.testing.assert_array_equal(np.load(out), expected)


# -- 6. inputs that are not real numbers -----------------------------------------------------
@pytest.mark.parametrize("array,dtype", [
    (np.zeros((1, 3, 32, 32), np.complex64), "complex64"),
    (np.full((1, 3, 32, 32), "a"), "<U1"),
    (np.zeros((1, 3, 32, 32), "datetime64[s]"), "datetime64[s]"),
], ids=["complex", "string", "datetime"])
def test_inputs_that_are_not_real_numbers_are_refused(tmp_path, capsys, array, dtype):
    path = save(tmp_path / "bad.npy", array)
    out = tmp_path / "o.npy"
    err = fails(["run", "-m", DEMO_BUILTIN, "-i", path, "-o", str(out)], capsys, code=2)
    assert (f"input 'data' {path}: a {dtype} array; inputs must be real numbers "
            f"(float, int, uint or bool)") in err
    err = fails(["run-layer", "-c", RELU, "--layer", "ReLU", "-i", path, "-o", str(out)],
                capsys, code=2)
    assert f"input 0 {path}: a {dtype} array" in err
    assert not out.exists()


def test_object_array_input_is_named_as_such(tmp_path, capsys):
    path = tmp_path / "obj.npy"
    np.save(path, np.array([1, "a"], dtype=object), allow_pickle=True)
    err = fails(["run", "-m", DEMO_BUILTIN, "-i", str(path)], capsys, code=2)
    assert f"input 'data' {path}: an array of Python objects (it needs pickle, which is not " \
           "loaded); save numbers" in err


def test_data_blob_that_is_complex_is_refused(tmp_path, capsys, examples_dir):
    x = save(tmp_path / "x.npy", rand(1, 8, 2, 2))
    w = save(tmp_path / "w.npy", np.ones(8, np.complex128))
    b = save(tmp_path / "b.npy", rand(8))
    err = fails(["run-layer", "-c", str(examples_dir / "scale_shift" / "scale_shift.xml"),
                 "--layer", "ScaleShift", "-i", x, "--data", f"weights={w}",
                 "--data", f"biases={b}", "-o", str(tmp_path / "o.npy")], capsys, code=2)
    assert f"data 'weights' {w}: a complex128 array" in err
