"""Issue 18, item 5: --check-bounds runs each kernel in a child process (bounds_process.py), so a
kernel that crashes is an error naming its layer, not the end of the user's process (the
ReorgYolo example with stride=-1 made `run-layer --check-bounds` itself segfault)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from customlayers.cli import main

TEST_DEVICE = os.environ.get("CUSTOMLAYERS_TEST_DEVICE", "CPU")   # as conftest.py reads it
ROOT = Path(__file__).resolve().parents[2]
REORG = ROOT / "examples" / "layers" / "reorg" / "reorg.xml"

LAYER = """<CustomLayer name="Wild" type="SimpleGPU" version="1">
  <Kernel entry="wild"><Source filename="wild.cl"/></Kernel>
  <Buffers>
    <Tensor arg-index="0" type="input" port-index="0"/>
    <Tensor arg-index="1" type="output" port-index="0"/>
  </Buffers>
</CustomLayer>
"""
# a write through a pointer near address 0: no guard zone is there, the process faults
WILD = """__kernel void wild(__global const float* src, __global float* dst)
{
    const size_t i = get_global_id(0);
    ((__global float*)(dst - (size_t)dst / sizeof(float)))[i + 4] = src[i];
}
"""


def _far_access_said(err: str) -> bool:
    """A CPU device (PoCL) crashes the child on a far access; a GPU reports it as an error of
    the launch (NVIDIA: an illegal address)."""
    return ("crashed the process that ran it (SIG" in err if TEST_DEVICE == "CPU" else
            "crashed the process that ran it (" in err or "failed on the device (" in err)


def _input(tmp_path: Path, shape=(1, 2, 3, 4)) -> Path:
    path = tmp_path / "x.npy"
    np.save(path, np.random.default_rng(0).standard_normal(shape).astype(np.float32))
    return path


def test_run_layer_check_bounds_reports_a_crashing_kernel(tmp_path, capsys):
    """stride=-1 makes the example's kernel read far before its input: a SIGSEGV in
    --check-bounds's own run, now a located error with exit 1 and nothing written."""
    out = tmp_path / "y.npy"
    code = main(["run-layer", "-c", str(REORG), "--layer", "ReorgYolo", "-i",
                 str(_input(tmp_path)), "--param", "stride=-1", "-o", str(out), "-d",
                 TEST_DEVICE, "--check-bounds"])
    err = capsys.readouterr().err
    assert code == 1 and not out.exists() and "Traceback" not in err
    assert "error: layer 'ReorgYolo': kernel 'reorg_kernel': " in err
    assert _far_access_said(err) and "run with --sanitize to see the access" in err


def test_run_check_bounds_names_the_models_layer_that_crashes(tmp_path, capsys):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    (tmp_path / "wild.cl").write_text(WILD)
    (tmp_path / "wild.xml").write_text(LAYER)
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]),
         helper.make_node("Wild", ["r"], ["y"], name="the_wild_one", domain="com.example")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 3, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.example", 1)])
    onnx.save(model, str(tmp_path / "m.onnx"))
    out = tmp_path / "out.npz"
    code = main(["run", "-m", str(tmp_path / "m.onnx"), "-c", str(tmp_path / "wild.xml"),
                 "-d", TEST_DEVICE, "-o", str(out), "--check-bounds"])
    err = capsys.readouterr().err
    assert code == 1 and not out.exists() and "Traceback" not in err
    assert "layer 'the_wild_one': kernel 'wild': " in err and _far_access_said(err)


def test_the_check_still_reports_near_misses_and_returns_outputs(tmp_path, capsys):
    """What the child finds comes back as before: a sound run writes its output."""
    out = tmp_path / "y.npy"
    code = main(["run-layer", "-c", str(REORG), "--layer", "ReorgYolo", "-i",
                 str(_input(tmp_path, (1, 4, 2, 2))), "--param", "stride=2", "--output-shape",
                 "1x16x1x1", "-o", str(out), "-d", TEST_DEVICE, "--check-bounds"])
    assert code == 0, capsys.readouterr().err
    assert np.load(out).shape == (1, 16, 1, 1)


STRIDED = """<CustomLayer name="Reorg" type="SimpleGPU" version="1">
  <Kernel entry="reorg_kernel">
    <Source filename="reorg.cl"/>
    <Define name="STRIDE" type="int" param="stride" default="2"/>
  </Kernel>
  <Buffers>
    <Tensor arg-index="0" type="input" port-index="0" format="ANY"/>
    <Tensor arg-index="1" type="output" port-index="0" format="ANY"
            shape="B,F*stride*stride,Y/stride,X/stride"/>
  </Buffers>
  <WorkSizes dim="input,0" global="(X+7)/8*8,Y,B*F" local="8,1,1"/>
</CustomLayer>
"""


def test_a_stride_the_descriptors_formulas_refuse_never_launches(tmp_path, capsys):
    """The example's kernel with a descriptor whose output shape names the stride (SimpleGPU
    formulas may name the layer's parameters): stride=-1 is refused before any launch, with
    the layer, the formula and the values; no --check-bounds or --sanitize needed."""
    (tmp_path / "reorg.xml").write_text(STRIDED)
    (tmp_path / "reorg.cl").write_text(REORG.with_name("reorg.cl").read_text())
    out = tmp_path / "y.npy"
    args = ["run-layer", "-c", str(tmp_path / "reorg.xml"), "-i",
            str(_input(tmp_path, (1, 4, 2, 2))), "-o", str(out), "-d", TEST_DEVICE]
    assert main(args + ["--param", "stride=-1"]) == 1
    err = capsys.readouterr().err
    assert not out.exists() and "Traceback" not in err
    assert ("layer type 'Reorg': output shape formula 'B,F*stride*stride,Y/stride,X/stride' "
            "gives [1, 4, -2, -2] for input dims [1, 4, 2, 2], stride=-1") in err
    assert main(args + ["--param", "stride=0"]) == 1
    assert ("layer 'Reorg', attribute 'shape': division by zero with Y=2, stride=0 in "
            "formula 'Y/stride'") in capsys.readouterr().err
    assert main(args) == 0, capsys.readouterr().err        # the default stride, 2
    assert np.load(out).shape == (1, 16, 1, 1)


# a loop that never ends (v halves towards 0, never reaching 1e30)
FOREVER = """__kernel void wild(__global const float* src, __global float* dst)
{
    const size_t i = get_global_id(0);
    float v = src[i] + 2.0f;
    while (v < 1e30f)
        v *= 0.5f;
    dst[i] = v;
}
"""


def test_a_kernel_that_never_ends_is_stopped_at_the_check_timeout(tmp_path, capsys,
                                                                  monkeypatch):
    """`validate --compile --check-bounds` on a loop that never ends hung for 10 minutes with
    nothing said (a new user's trial: "in CI this blocks forever"): a note once it has run a
    while, then an error naming the kernel at CUSTOMLAYERS_CHECK_TIMEOUT."""
    from customlayers.runtime.checks import checked_child
    monkeypatch.setattr(checked_child, "NOTE_AFTER_S", 1.0)
    monkeypatch.setenv("CUSTOMLAYERS_CHECK_TIMEOUT", "4")
    (tmp_path / "wild.xml").write_text(LAYER)
    (tmp_path / "wild.cl").write_text(FOREVER)
    out = tmp_path / "y.npy"
    code = main(["run-layer", "-c", str(tmp_path / "wild.xml"), "-i", str(_input(tmp_path)),
                 "-o", str(out), "-d", TEST_DEVICE, "--check-bounds"])
    err = capsys.readouterr().err
    assert code == 1 and not out.exists() and "Traceback" not in err, err
    assert "note: layer 'Wild': kernel 'wild' under --check-bounds is still running after 1 s; " \
           "it is stopped at 4 s (CUSTOMLAYERS_CHECK_TIMEOUT)" in err, err
    assert "did not finish within 4 s under --check-bounds (a loop that never ends? " \
           "CUSTOMLAYERS_CHECK_TIMEOUT sets the limit)" in err, err


@pytest.mark.parametrize("value", ["0", "-3", "soon", "inf", "nan", "1e10"])
def test_a_bad_check_timeout_is_refused(value, monkeypatch):
    from customlayers import settings
    from customlayers.errors import ConfigError
    monkeypatch.setenv("CUSTOMLAYERS_CHECK_TIMEOUT", value)
    with pytest.raises(ConfigError, match=r"CUSTOMLAYERS_CHECK_TIMEOUT=.*expected a positive "
                                          r"number of seconds up to 1e\+06 \(default 600\)"):
        settings.check_timeout_s()


def _children_running(module: str, parent: int) -> list[int]:
    """The processes of `module` started by `parent` (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if module in cmdline and ppid == parent:
            found.append(int(entry.name))
    return found


def _running(pid: int) -> bool:
    """Whether `pid` still runs (a zombie waiting for its reaper does not)."""
    try:
        return ") Z " not in Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_the_check_child_ends_with_its_parent(tmp_path):
    """A parent ended by SIGTERM while its check runs a kernel that never ends: the child goes
    too (it was left spinning, reparented, with no time limit: a reviewer's find)."""
    import signal
    import subprocess
    import sys
    import time
    (tmp_path / "wild.xml").write_text(LAYER)
    (tmp_path / "wild.cl").write_text(FOREVER)
    parent = subprocess.Popen(
        [sys.executable, "-m", "customlayers", "run-layer", "-c", str(tmp_path / "wild.xml"),
         "-i", str(_input(tmp_path)), "-o", str(tmp_path / "y.npy"), "-d", TEST_DEVICE,
         "--check-bounds"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not _children_running("bounds_worker", parent.pid):
            assert time.monotonic() < deadline and parent.poll() is None, "no check child"
            time.sleep(0.2)
        [child] = _children_running("bounds_worker", parent.pid)
        time.sleep(1.0)                      # into the kernel
        parent.send_signal(signal.SIGTERM)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 10
        while _running(child) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _running(child), "the check child outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        for pid in _children_running("bounds_worker", 1) + _children_running(
                "bounds_worker", parent.pid):
            os.kill(pid, signal.SIGKILL)      # (a failed run leaves no spinning child behind)
