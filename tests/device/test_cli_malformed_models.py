"""Malformed models and input files through the CLI (`run -m ...`, in-process and as
`python -m customlayers`): a message naming the file and the node, exit 1 for a model and 2 for
an input file, never a traceback and never a silent run; Ctrl-C while the CLI still imports is a
one-line message and exit 130."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from customlayers.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "models" / "tiny.xml"
TEST_DEVICE = os.environ.get("CUSTOMLAYERS_TEST_DEVICE", "CPU")


def run_fails(argv, capsys, code: int) -> str:
    status = cli_main(["run", "-d", TEST_DEVICE] + argv)
    captured = capsys.readouterr()
    assert status == code, captured.err
    assert "Traceback" not in captured.err + captured.out
    assert captured.out == ""                      # nothing ran, nothing was printed as output
    return captured.err


def relu_onnx(path: Path) -> Path:
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path


def test_empty_onnx_file_is_an_error_not_an_empty_run(tmp_path, capsys):
    model = tmp_path / "empty.onnx"
    model.write_bytes(b"")
    err = run_fails(["-m", str(model)], capsys, 1)
    assert f"error: {model}: empty file (0 bytes), not an ONNX model" in err


def test_truncated_onnx_file(tmp_path, capsys):
    model = relu_onnx(tmp_path / "m.onnx")
    model.write_bytes(model.read_bytes()[:-9])
    err = run_fails(["-m", str(model)], capsys, 1)
    assert f"{model}: not an ONNX model" in err


def test_onnx_node_with_too_few_inputs(tmp_path, capsys):
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x"], ["y"], name="conv1")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = tmp_path / "conv.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(model))
    err = run_fails(["-m", str(model)], capsys, 1)
    assert f"{model}: node 0 'conv1' (Conv): has 1 input(s); Conv-11 takes 2 to 3" in err


def test_onnx_initializer_shorter_than_its_dims(tmp_path, capsys):
    w = numpy_helper.from_array(np.ones(3, np.float32), "w")
    w.raw_data = w.raw_data[:4]
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], [w])
    model = tmp_path / "w.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(model))
    err = run_fails(["-m", str(model)], capsys, 1)
    assert "initializer 'w': holds 4 bytes of raw_data; dims [3] of FLOAT need 12" in err


@pytest.mark.parametrize("dim", ["x", "9" * 5000, "-4"])
def test_ir_dim_that_is_not_a_size(tmp_path, capsys, dim):
    text = TINY.read_text().replace("<dim>3</dim>", f"<dim>{dim}</dim>", 1)
    model = tmp_path / "tiny.xml"
    model.write_text(text)
    (tmp_path / "tiny.bin").write_bytes(TINY.with_suffix(".bin").read_bytes())
    line = next(n for n, t in enumerate(text.splitlines(), 1) if f"<dim>{dim}</dim>" in t)
    err = run_fails(["-m", str(model)], capsys, 1)
    assert f"{model}:{line}: layer 'x' (Parameter) port 0: dim '" in err
    assert "is not a size (expected an integer from 0 to 2147483647" in err


@pytest.mark.parametrize("content,expected", [
    (b"", "empty file (0 bytes), not a .npy array"),
    (b"\x93NUMPY\x01\x00", "a corrupt .npy header"),
    (None, "truncated .npy file: the header declares float32 [1, 3] (12 bytes of data), "
           "the file holds 4"),
])
def test_empty_or_corrupt_npy_input(tmp_path, capsys, content, expected):
    model = relu_onnx(tmp_path / "m.onnx")
    npy = tmp_path / "x.npy"
    if content is None:
        np.save(npy, np.ones((1, 3), np.float32))
        content = npy.read_bytes()[:-8]
    npy.write_bytes(content)
    err = run_fails(["-m", str(model), "-i", str(npy)], capsys, 2)
    assert f"input 'x' {npy}: {expected}" in err


def test_ctrl_c_while_the_commands_are_imported(monkeypatch, capsys):
    """build_parser imports every command's module (numpy with them): Ctrl-C there is exit 130."""
    import importlib

    def interrupted(name, *args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(importlib, "import_module", interrupted)
    assert cli_main(["devices"]) == 130
    captured = capsys.readouterr()
    assert captured.err == "interrupted\n" and captured.out == ""


def test_ctrl_c_while_python_m_imports_the_cli():
    """`python -m customlayers`: Ctrl-C while customlayers.cli itself is being imported."""
    hook = ("import sys\n"
            "class Interrupt:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'customlayers.cli':\n"
            "            raise KeyboardInterrupt\n"
            "sys.meta_path.insert(0, Interrupt())\n"
            "import runpy\n"
            "sys.argv = ['customlayers', 'devices']\n"
            "runpy.run_module('customlayers', run_name='__main__', alter_sys=True)\n")
    proc = subprocess.run([sys.executable, "-c", hook], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr == "interrupted\n" and "Traceback" not in proc.stderr
