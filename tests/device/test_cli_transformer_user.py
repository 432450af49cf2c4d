"""A user's first session with a torch-exported transformer encoder (tests/transformer_models.py's
torch_mha_encoder: two inputs, x and a padding mask) through the CLI: `run --verbose` says what
the graph rewrites did, the outputs match ONNX Runtime, an input left out of -i is said to be
random, and a file given by position to the wrong input is named with the order inputs take."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import transformer_models as tm  # noqa: E402

from customlayers.cli import main as cli_main  # noqa: E402

TEST_DEVICE = os.environ.get("CUSTOMLAYERS_TEST_DEVICE", "CPU")   # as conftest.py reads it


@pytest.fixture
def encoder(tmp_path):
    """The model's path and its input files (x.npy, mask_bias.npy) and arrays."""
    model, feeds = tm.torch_mha_encoder(batch=2, seq=8, dim=32, heads=4, layers=2, pad_from=5)
    onnx.save(model, tmp_path / "mha.onnx")
    files = {}
    for name, array in feeds.items():
        files[name] = tmp_path / f"{name}.npy"
        np.save(files[name], array)
    return tmp_path / "mha.onnx", files, feeds


def run(argv, capsys) -> tuple[int, str, str]:
    status = cli_main(argv[:1] + ["-d", TEST_DEVICE] + argv[1:])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return status, captured.out, captured.err


def test_verbose_says_each_graph_rewrite_and_the_outputs_match_onnx_runtime(
        encoder, tmp_path, capsys):
    model, files, feeds = encoder
    out = tmp_path / "out.npz"
    status, _, err = run(["run", "-m", str(model), "-i", f"x={files['x']}",
                          "-i", f"mask_bias={files['mask_bias']}", "-o", str(out), "--verbose"],
                         capsys)
    assert status == 0, err
    rewrites = [line for line in err.splitlines() if line.startswith("rewrite: ")]
    assert "rewrite: merged 1 Broadcast layer(s) that repeat an earlier one's work" in rewrites
    assert sum("into one Gelu layer" in line for line in rewrites) == 2
    reads = [line for line in rewrites if "into the reads of MatMul" in line]
    assert len(reads) == 2 * 4            # per layer: the input projection's, Q, K and V's
    assert all("Transpose" in line for line in reads)
    assert sum("Gather" in line for line in reads) == 2 * 3
    assert sum("Multiply" in line for line in reads) == 2 * 2
    want = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, feeds)
    (got,) = np.load(out).values()
    np.testing.assert_allclose(got, want[0], rtol=1e-4, atol=1e-5)
    # without --verbose, nothing about rewrites
    status, _, err = run(["run", "-m", str(model), "-i", f"x={files['x']}",
                          "-i", f"mask_bias={files['mask_bias']}"], capsys)
    assert status == 0 and "rewrite:" not in err


def test_an_input_left_out_of_i_is_said_to_be_random(encoder, capsys):
    model, files, _ = encoder
    status, _, err = run(["run", "-m", str(model), "-i", f"x={files['x']}"], capsys)
    assert status == 0, err
    assert "note: input 'mask_bias' is not given with -i: it gets a random array (--seed 0); " \
           "give it with -i mask_bias=FILE.npy" in err
    assert "input 'x'" not in err
    # no -i at all: random inputs, as asked, with no note
    status, _, err = run(["run", "-m", str(model)], capsys)
    assert status == 0 and "is not given with -i" not in err


def test_files_by_position_to_the_wrong_inputs_are_named_with_the_order(encoder, capsys):
    model, files, _ = encoder
    status, out, err = run(["run", "-m", str(model), "-i", str(files["mask_bias"]),
                            "-i", str(files["x"])], capsys)
    assert status == 2 and not out
    assert f"input 'x' has shape [2, 1, 1, 8] ({files['mask_bias']}, given with -i without a " \
           "name: such files go to the inputs in the model's order, x, mask_bias); the model " \
           "expects [2, 8, 32]" in err


def test_a_missing_input_file_names_the_input_it_was_for(encoder, tmp_path, capsys):
    model, files, _ = encoder
    gone = tmp_path / "gone" / "mask.npy"
    status, _, err = run(["run", "-m", str(model), "-i", f"x={files['x']}",
                          "-i", f"mask_bias={gone}"], capsys)
    assert status == 2
    assert f"error: input 'mask_bias' {gone}: No such file or directory" in err
