"""Issue 18, item 5: a layer whose .cl includes its helpers builds and runs from any current
folder, the compiler never reads a file the config may not name, and a build error inside an
included file is reported at that file's line (config/sources/includes.py)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from customlayers.cli import main

TEST_DEVICE = os.environ.get("CUSTOMLAYERS_TEST_DEVICE", "CPU")   # as conftest.py reads it

CONFIG = """<CustomLayer name="Twice" type="SimpleGPU" version="1">
  <Kernel entry="twice_kernel">
    <Source filename="kernels/twice.cl"/>
    <Source filename="kernels/also.cl"/>
  </Kernel>
  <Buffers>
    <Tensor arg-index="0" type="input" port-index="0"/>
    <Tensor arg-index="1" type="output" port-index="0"/>
  </Buffers>
</CustomLayer>
"""
HELPERS = "#pragma once\ninline float twice(float v) { return 2.0f * v; }\n"
KERNEL = ('#include "../common/helpers.h"\n'
          "__kernel void twice_kernel(__global const float* x, __global float* y)\n"
          "{ y[get_global_id(0)] = twice(x[get_global_id(0)]); }\n")
# the second Source includes the same helpers: #pragma once keeps one definition
ALSO = '#include "../common/helpers.h"\ninline float thrice(float v) { return 3.0f * v; }\n'


def _layer(root: Path, helpers: str = HELPERS) -> Path:
    (root / "kernels").mkdir(parents=True)
    (root / "common").mkdir()
    (root / "kernels" / "twice.cl").write_text(KERNEL)
    (root / "kernels" / "also.cl").write_text(ALSO)
    (root / "common" / "helpers.h").write_text(helpers)
    (root / "twice.xml").write_text(CONFIG)
    return root / "twice.xml"


def test_a_layer_with_includes_runs_from_another_folder(tmp_path, capsys, monkeypatch):
    """Relative includes were resolved by the compiler against the current folder: here a
    decoy helpers.h there would have been the one built (or none found)."""
    config = _layer(tmp_path / "layer")
    elsewhere = tmp_path / "elsewhere" / "kernels"
    elsewhere.mkdir(parents=True)
    (tmp_path / "elsewhere" / "common").mkdir()
    (tmp_path / "elsewhere" / "common" / "helpers.h").write_text(
        "inline float twice(float v) { return -v; }\n")
    monkeypatch.chdir(elsewhere)
    x = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    np.save(tmp_path / "x.npy", x)
    code = main(["run-layer", "-c", str(config), "-i", str(tmp_path / "x.npy"), "-o",
                 str(tmp_path / "y.npy"), "-d", TEST_DEVICE])
    assert code == 0, capsys.readouterr().err
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), 2 * x)


def test_a_build_error_in_an_included_file_names_that_file_and_line(tmp_path, capsys):
    config = _layer(tmp_path, HELPERS.replace("2.0f * v", "2.0f * w"))
    assert main(["validate", "--compile", str(config), "-d", TEST_DEVICE]) == 1
    out = capsys.readouterr().out
    helpers = (tmp_path / "common" / "helpers.h").resolve()
    assert f"{helpers}:2:" in out and "error[CL080]" in out and "'w'" in out


def test_a_typo_inside_a_helper_macro_names_the_macros_line(tmp_path, capsys):
    """A macro of the helper holds the typo; the kernel line that uses it holds none. PoCL's
    log gives both places (the use, then `<Spelling=...>`): the diagnostic is at the macro's
    own line, the use named after the message (it was said at the use alone, a new user's
    trial). Drivers whose log gives only the use (NVIDIA's) are said there, as before."""
    helpers = HELPERS + "#define TWICE_AT(p, i) (2.0f * (p)[(i) + OFFSTE])\n"
    config = _layer(tmp_path, helpers)
    kernel = tmp_path / "kernels" / "twice.cl"
    kernel.write_text(KERNEL.replace("twice(x[get_global_id(0)])",
                                     "TWICE_AT(x, get_global_id(0))"))
    assert main(["validate", "--compile", str(config), "-d", TEST_DEVICE]) == 1
    out = capsys.readouterr().out
    assert "error[CL080]" in out and "'OFFSTE'" in out
    if TEST_DEVICE == "CPU":
        where = (tmp_path / "common" / "helpers.h").resolve()
        assert f"{where}:3:" in out and f"(in a macro used at {kernel.resolve()}:3:" in out, out


def test_validate_refuses_an_include_outside_the_config_folder(tmp_path, capsys):
    config = _layer(tmp_path / "layer")
    kernel = tmp_path / "layer" / "kernels" / "twice.cl"
    kernel.write_text('#include "/etc/passwd"\n' + KERNEL)
    assert main(["validate", str(config)]) == 1
    out = capsys.readouterr().out
    assert (f"{kernel.resolve()}:1:1: error[CL046]: #include \"/etc/passwd\": resolves to "
            f"/etc/passwd, outside the config's directory") in out
