"""The Makefile's pytest-xdist flags (XDIST): a worker that dies (a driver crashing in a test)
ends `make test` at once with the test named, instead of the hang pytest-xdist 3.8 falls into with
--dist loadgroup when it starts a new worker (seen once with PoCL's cache empty)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CRASHING_SUITE = '''
import os, signal, pytest

@pytest.mark.parametrize("i", range(12))
def test_plain(i):
    if i == 3:
        os.kill(os.getpid(), signal.SIGKILL)        # the worker dies, as in a driver's crash

@pytest.mark.xdist_group("together")
@pytest.mark.parametrize("i", range(4))
def test_grouped(i):
    pass
'''


def _xdist_flags() -> list[str]:
    """The flags `make test` gives pytest with its default two workers (whatever TEST_WORKERS
    the make or environment running this test was given)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES", "MAKELEVEL", "TEST_WORKERS")}
    done = subprocess.run(["make", "-s", "--no-print-directory", "TEST_WORKERS=2", "--eval",
                           "print-xdist: ; @printf '%s\\n' '$(XDIST)'", "print-xdist"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
                          check=True)
    return done.stdout.split()


@pytest.mark.skipif(shutil.which("make") is None, reason="reads the Makefile through make")
def test_a_dead_worker_ends_the_run_naming_its_test(tmp_path):
    flags = _xdist_flags()
    assert "--dist" in flags
    (tmp_path / "test_crash.py").write_text(CRASHING_SUITE)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *flags, str(tmp_path)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1, done.stdout[-2000:]
    assert "crashed while running 'test_crash.py::test_plain[3]'" in done.stdout
