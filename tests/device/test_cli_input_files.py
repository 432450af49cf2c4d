"""One rule for input files the commands cannot read: missing, a folder, no permission. Each
exits 2 with one line naming the file (README: exit status), whatever kind of file it is: a
model (IR or ONNX), its weights, a config, a Python layer file, a .npy, a .cl given to
validate. (Models and Python files exited 1, configs and arrays 2.)"""
from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path

import pytest

from customlayers.cli import main as cli_main
from customlayers.api import InputFileError, ModelError, PythonLayerError
from customlayers.errors import ModelFileError

ROOT = Path(__file__).resolve().parents[2]
RELU = str(ROOT / "examples" / "layers" / "relu" / "relu.xml")
MODEL = ROOT / "examples" / "models" / "demo_cnn_builtin.xml"
TEST_DEVICE = os.environ.get("CUSTOMLAYERS_TEST_DEVICE", "CPU")


def _fails_with_2(argv, capsys, names: str) -> str:
    status = cli_main(argv)
    out, err = capsys.readouterr()
    said = out + err                  # validate lists its diagnostics on stdout
    assert status == 2, said
    assert names in said and "Traceback" not in said
    return said


@pytest.mark.parametrize("argv, missing", [
    (["run", "-m", "{gone}/model.xml"], "{gone}/model.xml: no such model file"),
    (["run", "-m", "{gone}/model.onnx"], "{gone}/model.onnx: no such model file"),
    (["benchmark", "-m", "{gone}/model.xml", "-niter", "1"], "{gone}/model.xml"),
    (["run", "-m", str(MODEL), "-l", "{gone}/layers.py"], "{gone}/layers.py: no such Python"),
    (["run", "-m", str(MODEL), "--check-with", "{gone}/ref.py"], "{gone}/ref.py"),
    (["run", "-m", str(MODEL), "-c", "{gone}/layer.xml"], "cannot read the config {gone}"),
    (["run", "-m", str(MODEL), "-i", "{gone}/x.npy"], "{gone}/x.npy"),
    (["run-layer", "-c", RELU, "-i", "{gone}/x.npy", "-o", "{gone}/y.npy"], "{gone}/x.npy"),
    (["check", "-c", RELU, "-l", "{gone}/ref.py", "--layer", "ReLU"], "{gone}/ref.py"),
    (["layers", "-c", "{gone}/layer.xml"], "{gone}/layer.xml"),
    (["validate", "{gone}/layer.xml"], "{gone}/layer.xml"),
    (["validate", "{gone}/kernel.cl"], "{gone}/kernel.cl: error[CL000]: cannot read the "
                                       "source: No such file or directory"),
])
def test_a_missing_input_file_exits_2_and_is_named(tmp_path, capsys, argv, missing):
    gone = tmp_path / "gone"
    argv = [a.format(gone=gone) for a in argv]
    if argv[0] in ("run", "benchmark", "run-layer", "check"):
        argv[1:1] = ["-d", TEST_DEVICE]
    _fails_with_2(argv, capsys, missing.format(gone=gone))


def test_a_folder_or_missing_weights_given_as_a_model_exit_2(tmp_path, capsys):
    _fails_with_2(["run", "-d", TEST_DEVICE, "-m", str(tmp_path)], capsys,
                  f"{tmp_path}: a folder, not a model file")
    alone = tmp_path / "model.xml"
    shutil.copy(MODEL, alone)              # without its .bin
    _fails_with_2(["run", "-d", TEST_DEVICE, "-m", str(alone)], capsys,
                  f"needs the weights file {tmp_path / 'model.bin'}, which does not exist")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files without read permission")
def test_an_unreadable_model_exits_2(tmp_path, capsys):
    locked = tmp_path / "model.onnx"
    locked.write_bytes(b"x")
    locked.chmod(0)
    _fails_with_2(["run", "-d", TEST_DEVICE, "-m", str(locked)], capsys, str(locked))


def test_a_malformed_model_is_not_a_file_error(tmp_path, capsys):
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"not protobuf at all")
    assert cli_main(["run", "-d", TEST_DEVICE, "-m", str(bad)]) == 1
    assert "not an ONNX model" in capsys.readouterr().err


def test_the_api_errors_keep_their_kinds_and_survive_pickling(tmp_path):
    from customlayers.api import Network
    from customlayers.runtime.layers.python_loader import load_python_layers
    with pytest.raises(ModelError) as caught:
        Network(tmp_path / "model.onnx")
    assert isinstance(caught.value, (InputFileError, OSError, ModelFileError))
    assert caught.value.filename == str(tmp_path / "model.onnx")
    with pytest.raises(PythonLayerError) as caught_py:
        load_python_layers(tmp_path / "layers.py")
    assert isinstance(caught_py.value, InputFileError)
    # a Ray actor's error comes back pickled
    again = pickle.loads(pickle.dumps(caught.value))
    assert type(again) is ModelFileError and str(again) == str(caught.value)
