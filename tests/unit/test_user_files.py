"""Files the user names are read only when they are regular files, up to a size bound, and their
names need not be UTF-8 (files.py: one reader for configs, sources, models, weights, external
data, input arrays and Python layers).

A FIFO used to block the reader forever: here each FIFO has a watchdog that opens its other end
after a while, so that a reader that does block (the code before the fix) ends, with the wrong
answer and too late, instead of hanging the test run. A link to /dev/zero used to be read until
memory ran out: those cases run in a child process with its address space limited."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from customlayers.cli import main
from customlayers.errors import ModelError, PythonLayerError
from customlayers.graph.load import read_model

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLES = ROOT / "examples" / "layers"
TINY = ROOT / "tests" / "data" / "models"
WATCHDOG_S = 8.0
FAST_S = 4.0            # a refusal takes well under this; a blocked read takes WATCHDOG_S


@contextmanager
def fifo(path: Path):
    """A FIFO at `path`; after WATCHDOG_S its write end is opened and closed, which ends a
    reader blocked on it (it reads nothing)."""
    os.mkfifo(path)
    stop = threading.Event()

    def watchdog():
        deadline = time.monotonic() + WATCHDOG_S
        while not stop.wait(0.05):
            if time.monotonic() < deadline:
                continue
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:             # no reader yet (ENXIO): try again
                continue

    thread = threading.Thread(target=watchdog, daemon=True)
    thread.start()
    try:
        yield path
    finally:
        stop.set()
        thread.join()


@contextmanager
def quick():
    start = time.monotonic()
    yield
    elapsed = time.monotonic() - start
    assert elapsed < FAST_S, f"took {elapsed:.1f} s: the reader waited on the FIFO"


def validate(capsys, *argv):
    code = main(["validate", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out + err


def relu_in(folder: Path) -> Path:
    for name in ("relu.xml", "relu.cl"):
        (folder / name).write_bytes((EXAMPLES / "relu" / name).read_bytes())
    return folder / "relu.xml"


def test_a_fifo_as_config_is_refused_at_once(tmp_path, capsys):
    with fifo(tmp_path / "pipe.xml") as path, quick():
        code, out = validate(capsys, path)
    assert code == 2
    assert f"{path}: error[CL000]: cannot read the config: not a regular file (a FIFO); " \
           f"only regular files are read" in out


def test_a_fifo_as_source_is_a_diagnostic(tmp_path, capsys):
    config = relu_in(tmp_path)
    (tmp_path / "relu.cl").unlink()
    with fifo(tmp_path / "relu.cl"), quick():
        code, out = validate(capsys, config)
    assert code == 1
    assert "error[CL041]: source file 'relu.cl' cannot be read: not a regular file (a FIFO)" \
        in out


def test_a_fifo_named_xml_in_a_folder_is_skipped(tmp_path, capsys):
    relu_in(tmp_path)
    with fifo(tmp_path / "zz_pipe.xml"), quick():
        code, out = validate(capsys, tmp_path)
    assert code == 0 and out.endswith("1 file, 1 layer: 0 errors, 0 warnings\n")


def test_fifo_weights_and_models_are_model_errors(tmp_path):
    xml = tmp_path / "m.xml"
    xml.write_bytes((TINY / "tiny.xml").read_bytes())
    with fifo(tmp_path / "m.bin"), quick(), pytest.raises(ModelError) as e:
        read_model(xml)
    assert str(e.value) == f"cannot read the weights file {tmp_path / 'm.bin'}: not a regular " \
                           f"file (a FIFO); only regular files are read"
    with fifo(tmp_path / "p.onnx") as path, quick(), pytest.raises(ModelError) as e:
        read_model(path)
    assert str(e.value) == f"cannot read {path}: not a regular file (a FIFO); only regular " \
                           f"files are read"


def test_fifo_external_data_is_a_model_error(tmp_path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.ones((1, 4), np.float32), "w")
    w.data_location = TensorProto.EXTERNAL
    entry = w.external_data.add()
    entry.key, entry.value = "location", "w.bin"
    w.ClearField("raw_data")
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
                              [w])
    path = tmp_path / "ext.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    with fifo(tmp_path / "w.bin"), quick(), pytest.raises(ModelError) as e:
        read_model(path)
    assert f"cannot read {tmp_path / 'w.bin'}: not a regular file (a FIFO); only regular files " \
           f"are read (external data of {path}, initializer 'w')" == str(e.value)


def test_a_fifo_as_input_array_is_refused(tmp_path):
    from customlayers.cli.user_files.input_arrays import read_array
    from customlayers.cli import UsageError
    with fifo(tmp_path / "in.npy") as path, quick(), pytest.raises(UsageError) as e:
        read_array(str(path), "input 'x'")
    assert str(e.value) == f"input 'x' {path}: not a regular file (a FIFO); only regular " \
                           f"files are read"


def test_a_fifo_as_python_layer_file_is_refused(tmp_path):
    from customlayers.runtime.layers.python_loader import load_python_layers
    with fifo(tmp_path / "layers.py") as path, quick(), pytest.raises(PythonLayerError) as e:
        load_python_layers(path)
    assert str(e.value) == f"{path}: cannot read the Python layer file: not a regular file " \
                           f"(a FIFO); only regular files are read"


def test_a_config_over_the_size_bound_is_refused_unread(tmp_path, capsys):
    path = tmp_path / "huge.xml"
    with open(path, "wb") as f:              # sparse: 32 MiB that take no disk
        f.truncate(32 << 20)
    code, out = validate(capsys, path)
    assert code == 2
    assert "cannot read the config: 32 MiB, over the bound of 16 MiB for this kind of file" \
        in out


LIMITED = "import resource\nresource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"


def run_limited(code: str, cwd: Path) -> subprocess.CompletedProcess:
    """`code` in a child process of at most 1 GiB of address space (a reader of /dev/zero
    would take all the machine's memory)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", LIMITED + code], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_links_to_dev_zero_are_refused(tmp_path):
    (tmp_path / "zero.xml").symlink_to("/dev/zero")
    proc = run_limited("import sys\nfrom customlayers.cli import main\n"
                       "sys.exit(main(['validate', 'zero.xml']))", tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "cannot read the config: not a regular file (a character device)" in proc.stdout
    (tmp_path / "m.xml").write_bytes((TINY / "tiny.xml").read_bytes())
    (tmp_path / "m.bin").symlink_to("/dev/zero")
    proc = run_limited("from customlayers.errors import ModelError\n"
                       "from customlayers.graph.load import read_model\n"
                       "try:\n    read_model('m.xml')\n"
                       "except ModelError as e:\n    print(e)", tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == "cannot read the weights file m.bin: not a regular file (a character " \
                          "device); only regular files are read\n"


def test_a_config_name_that_is_not_utf8(tmp_path, capsys):
    """A file name is bytes: one that is not UTF-8 is validated, and shown with its byte
    escaped (lxml took the name as UTF-8 and raised UnicodeEncodeError)."""
    config = relu_in(tmp_path)
    odd = Path(os.fsdecode(bytes(tmp_path) + b"/r\xffelu.xml"))
    config.rename(odd)
    code, out = validate(capsys, odd)
    assert code == 0 and out == "1 file, 1 layer: 0 errors, 0 warnings\n"
    odd.write_text("<CustomLayer")
    code, out = validate(capsys, odd)
    assert code == 1 and f"{tmp_path}/r\\xffelu.xml:1:13: error[CL001]" in out


def test_a_python_layer_file_name_that_is_not_utf8(tmp_path):
    from customlayers.runtime.layers.python_loader import load_python_layers
    path = Path(os.fsdecode(bytes(tmp_path) + b"/lay\xffers.py"))
    path.write_bytes((EXAMPLES / "relu" / "relu_reference.py").read_bytes())
    assert [d.type for d in load_python_layers(path)] == ["ReLU"]


def test_a_short_write_without_an_errno_keeps_its_words(tmp_path):
    """numpy's np.save on a full disk raises OSError("12288 requested and 992 written"), which
    has no errno: the error about the user's file said "[Errno None] None" (a new user's trial
    on a 4 KiB tmpfs)."""
    from customlayers.files import _naming
    error = _naming(OSError("12288 requested and 992 written"), tmp_path / "y.npy")
    assert error.strerror == "12288 requested and 992 written (is the disk full?)"
    assert error.filename == str(tmp_path / "y.npy") and error.errno is not None
    # an error with an errno is only renamed
    other = _naming(PermissionError(13, "Permission denied", "/x/.y.tmp"), tmp_path / "y.npy")
    assert isinstance(other, PermissionError) and other.strerror == "Permission denied"
    assert other.filename == str(tmp_path / "y.npy")
