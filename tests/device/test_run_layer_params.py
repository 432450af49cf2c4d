"""`run-layer --param`: a parameter no Define reads is a usage error (exit 2) naming what it could
have meant; before, `--param bta=1.5` ran the layer with beta's default (a wrong number)."""
from __future__ import annotations

import numpy as np

from customlayers.cli import main

KERNEL = """__kernel void swish(const __global float* x, __global float* y)
{
    const uint i = get_global_id(0);
    y[i] = x[i] / (1.0f + exp(-BETA * x[i]));
}
"""
CONFIG = """<CustomLayer name="Swish" type="SimpleGPU" version="1">
  <Kernel entry="swish">
    <Source filename="swish.cl"/>
    <Define name="BETA" type="float" param="beta" default="1.0f"/>
  </Kernel>
  <Buffers>
    <Tensor arg-index="0" type="input" port-index="0"/>
    <Tensor arg-index="1" type="output" port-index="0"/>
  </Buffers>
</CustomLayer>
"""


def _setup(tmp_path):
    (tmp_path / "swish.cl").write_text(KERNEL)
    (tmp_path / "swish.xml").write_text(CONFIG)
    x = np.linspace(-4, 4, 24, dtype=np.float32).reshape(1, 2, 3, 4)
    np.save(tmp_path / "x.npy", x)
    return x, ["run-layer", "-c", str(tmp_path / "swish.xml"), "--layer", "Swish",
               "-i", str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy")]


def test_misspelled_param_is_a_usage_error_with_the_nearest_name(tmp_path, capsys):
    _, args = _setup(tmp_path)
    assert main(args + ["--param", "bta=1.5"]) == 2
    err = capsys.readouterr().err
    assert "layer 'Swish' does not use the parameter 'bta' (did you mean 'beta'?); it uses " \
           "beta" in err and "swish.xml:1:1" in err and "Traceback" not in err
    assert not (tmp_path / "y.npy").exists()


def test_the_param_that_is_used_changes_the_result(tmp_path, capsys):
    x, args = _setup(tmp_path)
    assert main(args + ["--param", "beta=1.5"]) == 0, capsys.readouterr().err
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), x / (1 + np.exp(-1.5 * x)),
                               rtol=1e-5, atol=1e-6)


def test_jit_refuses_a_misspelled_param_too(tmp_path, capsys):
    _setup(tmp_path)
    assert main(["jit", "-c", str(tmp_path / "swish.xml"), "--input", "1x2x3x4",
                 "--param", "bta=1.5"]) == 2
    assert "does not use the parameter 'bta' (did you mean 'beta'?)" in capsys.readouterr().err


def test_run_layer_needs_no_layer_name_when_the_config_has_one(tmp_path, capsys):
    x, args = _setup(tmp_path)
    at = args.index("--layer")
    assert main(args[:at] + args[at + 2:] + ["--param", "beta=1.5"]) == 0
    want = x / (1 + np.exp(-1.5 * x))
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), want, rtol=1e-5, atol=1e-6)
