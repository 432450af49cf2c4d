"""`customlayers demo` works from an installed wheel, not only from a source checkout: the wheel
carries examples/ as package data (setup.py). Built with pip, unpacked, and run from another
folder with the wheel first on the path."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _offline_build_flags() -> list[str]:
    """pip's build isolation fetches setuptools from the index; a machine without network (the
    lent GPU machine) has none. Where this interpreter already has a setuptools new enough for
    pyproject.toml's build-system, build with it instead."""
    try:
        import setuptools
    except ImportError:
        return []
    major = int(setuptools.__version__.split(".")[0])
    return ["--no-build-isolation"] if major >= 68 else []


@pytest.mark.slow
def test_demo_runs_from_a_wheel(tmp_path):
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                            *_offline_build_flags(), "-w", str(tmp_path / "dist"), str(ROOT)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("customlayers-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        z.extractall(tmp_path / "site")
    assert "customlayers/examples/models/demo_cnn.xml" in names
    assert "customlayers/examples/layers/relu/relu.cl" in names
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run([sys.executable, "-m", "customlayers", "demo", "--runs", "1", "-d",
                           "CPU"], cwd=elsewhere, capture_output=True, text=True, timeout=600,
                          env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin",
                               "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert str(tmp_path / "site" / "customlayers" / "examples") in done.stdout
    assert "model demo_cnn.xml" in done.stdout and "Traceback" not in done.stderr
