"""Issue 18, item 4: `validate --compile --check-bounds` (the README's command for a new layer)
runs layers with <Data> blobs (the shipped ScaleShift example included) on blobs of the size
they are compiled for, reports every file, ends with the summary line, and says that guard
zones do not see reads out of bounds, pointing to --sanitize, which does."""
from __future__ import annotations

from pathlib import Path

import pytest

from customlayers.cli import main
from customlayers.runtime.checks.sanitize import find_oclgrind

ROOT = Path(__file__).resolve().parents[2]
SCALE_SHIFT = ROOT / "examples" / "layers" / "scale_shift" / "scale_shift.xml"
RELU = ROOT / "examples" / "layers" / "relu" / "relu.xml"
GRN = ROOT / "examples" / "layers" / "grn" / "grn.xml"

needs_oclgrind = pytest.mark.skipif(find_oclgrind() is None, reason="Oclgrind is not installed")

# a layer whose gamma blob is read at every channel: with fewer values than channels, the
# kernel reads past the blob (the 3-value gamma for 8 channels gave 5e21, silently)
GAMMA_LAYER = """<CustomLayer name="Gamma" type="SimpleGPU" version="1">
  <Kernel entry="gamma_kernel"><Source filename="gamma.cl"/></Kernel>
  <Buffers>
    <Tensor arg-index="0" type="input" port-index="0" format="BFYX"/>
    <Data name="gamma" arg-index="1"/>
    <Tensor arg-index="2" type="output" port-index="0" format="BFYX"/>
  </Buffers>
  <WorkSizes global="X,Y,B*F"/>
</CustomLayer>
"""
GAMMA_KERNEL = """__kernel void gamma_kernel(const __global float* x, const __global float* gamma,
                           __global float* y)
{
    const uint i = (get_global_id(2) * get_global_size(1) + get_global_id(1))
                   * get_global_size(0) + get_global_id(0);
    const uint f = get_global_id(2) % OUTPUT0_DIMS[1];
    y[i] = x[i] * gamma[f];
}
"""


def _gamma_layer(tmp_path: Path) -> Path:
    (tmp_path / "gamma.cl").write_text(GAMMA_KERNEL)
    config = tmp_path / "gamma.xml"
    config.write_text(GAMMA_LAYER)
    return config


def test_check_bounds_runs_the_scale_shift_example(capsys):
    code = main(["validate", "--compile", "--check-bounds", "-d", "CPU", str(SCALE_SHIFT)])
    captured = capsys.readouterr()
    assert "description only" not in captured.out + captured.err
    assert code == 0, captured.out + captured.err
    assert captured.out.strip().splitlines()[-1] == "1 file, 1 layer: 0 errors, 0 warnings"


def test_every_file_is_reported_with_the_summary_line(capsys):
    code = main(["validate", "--compile", "--check-bounds", "-d", "CPU", str(RELU),
                 str(SCALE_SHIFT), str(GRN)])
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err
    assert captured.out.strip().splitlines()[-1] == "3 files, 3 layers: 0 errors, 0 warnings"


def test_blobs_of_the_size_given_with_shape(tmp_path, capsys):
    """--shape gives the Data blobs' sizes after the inputs' shapes; the check runs on blobs of
    that size: 8 gammas for 8 channels is clean."""
    config = _gamma_layer(tmp_path)
    code = main(["validate", "--compile", "--check-bounds", "-d", "CPU", str(config),
                 "--shape", "Gamma=1x8x4x4,8"])
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err


def test_check_bounds_says_it_cannot_see_reads_and_points_to_sanitize(tmp_path, capsys):
    """3 gammas for 8 channels: every read past the blob goes unseen by guard zones, and the
    output says so."""
    config = _gamma_layer(tmp_path)
    main(["validate", "--compile", "--check-bounds", "-d", "CPU", str(config),
          "--shape", "Gamma=1x8x4x4,3"])
    captured = capsys.readouterr()
    assert "--check-bounds does not see reads out of bounds" in captured.err
    assert "--sanitize" in captured.err
    assert captured.out.strip().splitlines()[-1].startswith("1 file, 1 layer:")


@needs_oclgrind
def test_sanitize_finds_the_read_past_a_short_blob(tmp_path, capsys):
    config = _gamma_layer(tmp_path)
    code = main(["validate", "--compile", "--sanitize", "-d", "CPU", str(config),
                 "--shape", "Gamma=1x8x4x4,3"])
    captured = capsys.readouterr()
    assert code == 1
    assert "error[CL087]: Oclgrind: invalid read" in captured.out
    assert "does not see reads" not in captured.err     # --sanitize was asked for: no hint


def test_run_layer_check_bounds_says_so_too(tmp_path, capsys):
    import numpy as np
    config = _gamma_layer(tmp_path)
    np.save(tmp_path / "x.npy", np.ones((1, 8, 2, 2), np.float32))
    np.save(tmp_path / "g.npy", np.ones(3, np.float32))
    main(["run-layer", "-c", str(config), "-i", str(tmp_path / "x.npy"), "--data",
          f"gamma={tmp_path / 'g.npy'}", "-o", str(tmp_path / "y.npy"), "-d", "CPU",
          "--check-bounds"])
    assert "--check-bounds does not see reads out of bounds" in capsys.readouterr().err
