"""Shared fixtures. Tests run real kernels on a real OpenCL device (PoCL on the CPU here)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

# Tests run with none of the package's environment variables set, but never touch the user's
# cache: one fresh cache directory per test session.
for _name in ("CUSTOMLAYERS_NO_CACHE", "CUSTOMLAYERS_VERBOSE", "CUSTOMLAYERS_DEVICE"):
    os.environ.pop(_name, None)


@pytest.fixture(scope="session", autouse=True)
def _cache_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("cl-cache")
    os.environ["CUSTOMLAYERS_CACHE_DIR"] = str(path)
    yield path


@pytest.fixture(scope="session")
def cl_env():
    """(context, queue, device) on the first OpenCL device, preferring a CPU (PoCL)."""
    import pyopencl as cl
    devices = [d for p in cl.get_platforms() for d in p.get_devices()]
    if not devices:
        pytest.fail("no OpenCL device: `make test` installs PoCL; see README")
    devices.sort(key=lambda d: 0 if d.type & cl.device_type.CPU else 1)
    dev = devices[0]
    ctx = cl.Context([dev])
    queue = cl.CommandQueue(ctx, dev)
    return ctx, queue, dev


@pytest.fixture(scope="session")
def examples_dir() -> Path:
    return ROOT / "examples" / "layers"
