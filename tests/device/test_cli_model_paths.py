"""Issue 18, item 3d: the paths a new user gives `run` and `run-layer`.

- A model given with -c is named as a model (as `validate` does), not read as XML.
- --trace and --report are checked before anything runs (as -o), a missing folder is made, and a
  failure names the user's path, never a temporary file's.
- The cache folder is checked before anything runs: one that cannot be written is one warning
  line naming it, not one per program with a Python source line."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from customlayers.cli import main

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "examples" / "models" / "custom_node.onnx"
IR_MODEL = ROOT / "examples" / "models" / "demo_cnn.xml"
GRN = ROOT / "examples" / "layers" / "grn" / "grn.xml"
RELU = ROOT / "examples" / "layers" / "relu" / "relu.xml"


def _fails(argv, capsys) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and "device:" not in err     # refused before anything ran
    return err


@pytest.mark.parametrize("model", [MODEL, IR_MODEL], ids=["onnx", "ir"])
def test_run_names_a_model_given_as_a_config(capsys, model):
    err = _fails(["run", "-m", str(MODEL), "-c", str(model), "-d", "CPU"], capsys)
    assert f"-c {model}: this is a model, not a layer config; give a model with -m" in err


def test_run_layer_names_a_model_given_as_a_config(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.ones((1, 2, 3, 4), np.float32))
    err = _fails(["run-layer", "-c", str(IR_MODEL), "--layer", "ReLU", "-i",
                  str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy"), "-d", "CPU"], capsys)
    assert f"-c {IR_MODEL}: this is a model, not a layer config" in err


@pytest.mark.parametrize("option", ["--trace", "--report"])
def test_a_profile_file_under_a_file_is_refused_before_running(tmp_path, capsys, option):
    blocker = tmp_path / "file"
    blocker.write_text("")
    err = _fails(["run", "-m", str(MODEL), "-c", str(GRN), "-d", "CPU", "-pc", option,
                  str(blocker / "t.json")], capsys)
    assert f"{option} {blocker / 't.json'}: {blocker} is a file, not a folder" in err


def test_a_profile_file_that_is_a_folder_is_refused_before_running(tmp_path, capsys):
    (tmp_path / "r.json").mkdir()
    err = _fails(["run", "-m", str(MODEL), "-c", str(GRN), "-d", "CPU", "-pc", "--report",
                  str(tmp_path / "r.json")], capsys)
    assert f"--report {tmp_path / 'r.json'}: is a folder" in err


@pytest.mark.parametrize("option", ["-o", "--trace"])
def test_an_empty_or_unwritable_output_is_refused_before_running(tmp_path, capsys, option):
    """An empty path (a script's empty variable) is not "no -o"; a folder where no file can
    be made is found by making one, not by os.access (root may write nowhere in /proc), both
    before the model runs (a new user's trial: the model ran, then 'Permission denied')."""
    np.save(tmp_path / "x.npy", np.ones((1, 3, 4, 4), np.float32))
    base = ["run", "-m", str(MODEL), "-c", str(GRN), "-d", "CPU", "-i", str(tmp_path / "x.npy")]
    extra = ["-pc"] if option == "--trace" else []
    suffix = ".json" if option == "--trace" else ".npy"
    err = _fails(base + extra + [option, ""], capsys)
    assert f"{option} '': an empty path; name a file" in err
    err = _fails(base + extra + [option, f"/proc/customlayers-test/out{suffix}"], capsys)
    assert f"{option} /proc/customlayers-test/out{suffix}: " in err
    assert not list(Path("/proc").glob(".customlayers-probe-*"))


@pytest.mark.parametrize("kind", ["character device", "FIFO"])
def test_a_model_that_is_no_regular_file_is_refused_as_unreadable(tmp_path, capsys, kind):
    """-m /dev/zero (no suffix) or a FIFO named .onnx: the file's kind, exit 2, as -i and -c
    say it, not an unknown format."""
    import os
    if kind == "FIFO":
        path = tmp_path / "m.onnx"
        os.mkfifo(path)
    else:
        path = Path("/dev/zero")
    err = _fails(["run", "-m", str(path), "-d", "CPU"], capsys)
    assert f"cannot read {path}: not a regular file (a {kind})" in err


def test_profile_files_in_a_missing_folder_are_written(tmp_path, capsys):
    trace, report = tmp_path / "new" / "a" / "t.json", tmp_path / "new" / "r.json"
    assert main(["run", "-m", str(MODEL), "-c", str(GRN), "-d", "CPU", "-pc", "--trace",
                 str(trace), "--report", str(report)]) == 0
    assert trace.is_file() and report.is_file()
    assert ".tmp" not in capsys.readouterr().err


def test_a_failed_write_names_the_users_file(tmp_path):
    from customlayers.files import atomic_writer
    target = tmp_path / "missing" / "t.json"
    with pytest.raises(FileNotFoundError) as info:
        with atomic_writer(target) as f:
            f.write(b"{}")
    assert info.value.filename == str(target)
    assert ".tmp" not in str(info.value)


@pytest.mark.parametrize("where", ["a file", "under a file"])
def test_an_unwritable_cache_folder_is_one_warning(tmp_path, capsys, where):
    blocker = tmp_path / "file"
    blocker.write_text("")
    cache = blocker if where == "a file" else blocker / "cache"
    assert main(["run", "-m", str(MODEL), "-c", str(GRN), "-d", "CPU", "--cache-dir",
                 str(cache)]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "cache" in line]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"warning: the program cache folder {cache} cannot be written")
    assert "self._store" not in err and "cache.py" not in err
    assert err.index("warning:") < err.index("device:")      # said before anything ran


def test_the_api_warns_once_for_every_program(tmp_path, test_device):
    """Through the API, the folder is found unwritable at the first program's write: one
    CacheWarning, however many programs follow."""
    from customlayers.jit.tensor import TensorDesc
    from customlayers.runtime.device.cache import CacheWarning, ProgramCache
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.layers.registry import Registry
    blocker = tmp_path / "file"
    blocker.write_text("")
    registry = Registry(Engine(test_device, cache=ProgramCache(directory=blocker / "cache")))
    registry.load(str(RELU))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for shape in [(1, 2, 3, 4), (1, 2, 3, 5), (1, 2, 3, 6)]:
            registry.bind("ReLU", [TensorDesc(shape)])
    cache_warnings = [w for w in caught if issubclass(w.category, CacheWarning)]
    assert len(cache_warnings) == 1, [str(w.message) for w in caught]
    assert str(blocker / "cache") in str(cache_warnings[0].message)
