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
for _name in ("CUSTOMLAYERS_NO_CACHE", "CUSTOMLAYERS_VERBOSE", "CUSTOMLAYERS_DEVICE",
              "CUSTOMLAYERS_TUNING", "CUSTOMLAYERS_KEEP_BINARIES", "POCL_KERNEL_CACHE"):
    os.environ.pop(_name, None)
# what the first Engine on PoCL sets where it is unset (settings.prefer_pocl_generic_work_groups),
# set before any test, so that a test's cache sees the same PoCL whichever ran first
os.environ["POCL_WORK_GROUP_SPECIALIZATION"] = "0"
# no build worker processes (on by default on PoCL and NVIDIA) unless the one running the tests
# asks for some: `make test` runs two test processes on the 2-core machine, each compiling, and
# the device suite several files at once on the GPU machine, so a worker's start (Python,
# pyopencl, a context) would buy no core; test_build_workers.py turns them on
os.environ.setdefault("CUSTOMLAYERS_BUILD_PROCESSES", "0")


# Hypothesis: random examples in a developer's run (new finds), the same examples in CI
# (.ci/run sets HYPOTHESIS_PROFILE=ci): a landing is not decided by which inputs a run drew
# (a CI run of stop 41 drew a 5,000-digit Define value that no run before had)
try:
    from hypothesis import settings as _hypothesis_settings
    _hypothesis_settings.register_profile("ci", derandomize=True)
    _hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
except ImportError:      # the GPU machine's test set-up may lack it; its tests then skip
    pass


def pytest_configure(config):
    # a collection after the tests that grew the process; opt-in, a log of each test's memory
    # (CUSTOMLAYERS_TEST_MEMORY_LOG=file): tests/suite_memory.py
    import suite_memory
    suite_memory.register(config)
    # pytest-xdist declares it; without xdist (one process) the groups below are plain marks
    config.addinivalue_line("markers", "xdist_group(name): run in the same xdist process")


# `make test` runs the tests in two processes (pytest-xdist, --dist loadgroup: PoCL compiles
# each program on one core, and the suite is mostly compiling). Tests that share something
# heavy run in one process, one after another: the Ray tests share one local Ray instance (a
# second would be a second cluster of processes), and the whole-model tests (VGG-19's 548 MB of
# weights, OpenVINO's and ours) would, two at once, double the suite's memory peak.
_MODEL_FILES = {"test_light_ir.py", "test_onnx_backend.py"}


@pytest.hookimpl(tryfirst=True)          # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items):
    for item in items:
        if "ray_local" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("ray"))
        elif item.path.name in _MODEL_FILES:
            item.add_marker(pytest.mark.xdist_group("whole-models"))


@pytest.fixture(scope="session", autouse=True)
def _cache_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("cl-cache")
    os.environ["CUSTOMLAYERS_CACHE_DIR"] = str(path)
    yield path


# The device the tests run on: a CPU (PoCL) unless CUSTOMLAYERS_TEST_DEVICE names another
# (e.g. GPU on the lent NVIDIA machine). Read here, not in settings: it is a test switch only.
TEST_DEVICE = os.environ.get("CUSTOMLAYERS_TEST_DEVICE", "CPU")


@pytest.fixture(scope="session")
def test_device():
    from customlayers.runtime.device.device import select_device
    return select_device(TEST_DEVICE)


@pytest.fixture(scope="session")
def cl_env(test_device):
    """(context, queue, device) on the test device."""
    import pyopencl as cl
    dev = test_device
    ctx = cl.Context([dev])
    queue = cl.CommandQueue(ctx, dev)
    return ctx, queue, dev


@pytest.fixture(scope="session")
def examples_dir() -> Path:
    return ROOT / "examples" / "layers"
