"""Ctrl-C ends a command whose kernel never finishes (cli/interrupt.py): `run-layer` and `run`
waited on the device until SIGTERM (a new-user trial: SIGINT did nothing after 5 s). Each
command runs in a process of its own, with SIGINT at its default whatever this one inherited."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

HANG_CL = """__kernel void hang(__global const float* src, __global float* dst)
{
    const int i = get_global_id(0);
    float v = src[i] + 2.0f;
    while (v < 1e30f) v = v * 1.0f;     /* the data never reaches the exit */
    dst[i] = v;
}
"""
HANG_XML = """<CustomLayer name="Hang" type="SimpleGPU" version="1">
  <Kernel entry="hang"><Source filename="hang.cl"/></Kernel>
  <Buffers>
    <Tensor arg-index="0" type="input" port-index="0" format="BFYX"/>
    <Tensor arg-index="1" type="output" port-index="0" format="BFYX"/>
  </Buffers>
  <WorkSizes global="B*F*Y*X"/>
</CustomLayer>
"""
ROOT = Path(__file__).resolve().parents[2]


def _interrupted(argv: list[str], cwd: Path, started: str) -> tuple[int, str]:
    """Run the CLI until `started` is in its output and 5 s more (past the build, into the
    kernel's wait), send SIGINT; (exit status, output). Without the watch the process never
    ended: the wait's limit fails the test."""
    proc = subprocess.Popen([sys.executable, "-m", "customlayers", *argv], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and started not in "".join(lines) and \
                proc.poll() is None:
            time.sleep(0.1)
        time.sleep(5.0)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(10)
    return proc.returncode, "".join(lines)


@pytest.fixture
def hang(tmp_path):
    (tmp_path / "hang.cl").write_text(HANG_CL)
    (tmp_path / "hang.xml").write_text(HANG_XML)
    np.save(tmp_path / "x.npy", np.ones((1, 1, 2, 2), np.float32))
    return tmp_path


def test_ctrl_c_ends_run_layer_on_a_kernel_that_never_finishes(hang, test_device):
    code, err = _interrupted(["run-layer", "-c", "hang.xml", "-i", "x.npy", "-o", "y.npy",
                              "-d", "CPU"], hang, "note: output 0 of layer 'Hang'")
    assert code == 130, err
    assert "interrupted while the device was running a kernel, which cannot be stopped: the " \
           "process ends here" in err
    assert not (hang / "y.npy").exists()


def test_ctrl_c_ends_a_model_run_on_a_kernel_that_never_finishes(hang):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    graph = helper.make_graph(
        [helper.make_node("Hang", ["x"], ["y"], domain="com.example")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 2, 2])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                      helper.make_opsetid("com.example", 1)]),
              str(hang / "m.onnx"))
    code, err = _interrupted(["run", "-m", "m.onnx", "-c", "hang.xml", "-i", "x.npy",
                              "-o", "y.npz", "-d", "CPU"], hang, "device:")
    assert code == 130, err
    assert "interrupted while the device was running a kernel" in err
    assert not (hang / "y.npz").exists()
