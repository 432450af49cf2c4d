"""Fixtures of the device tests that need more than a device."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ray_local():
    """One local Ray instance for the Ray Data and Ray Serve tests (started once: it takes
    seconds), on a bounded number of CPUs, shut down at the end."""
    from ray_cases import start_ray
    ray = start_ray()
    try:
        yield ray
    finally:
        ray.shutdown()
