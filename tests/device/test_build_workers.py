"""Programs compiled in worker processes (runtime/device/build_workers.py): NVIDIA's compiler
takes one build at a time per process, so there the builds a network needs go to workers, whose
results come back through the disk cache. Forced here with CUSTOMLAYERS_BUILD_PROCESSES=2 on
the test device (PoCL by default, where they are off unless asked)."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from customlayers.api import Engine, Registry
from customlayers.errors import ConfigError, KernelBuildError
from customlayers.runtime.compile.network import Network
from customlayers.runtime.device.cache import ProgramCache

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "models" / "demo_cnn.xml"          # 6 programs, GRN and ReorgYolo
LAYERS = ROOT / "examples" / "layers"


def build(test_device, cache_dir, grn_xml=LAYERS / "grn" / "grn.xml"):
    engine = Engine(test_device, cache=ProgramCache(cache_dir))
    registry = Registry(engine)
    registry.load(grn_xml, LAYERS / "reorg" / "reorg.xml")
    net = Network(str(DEMO), registry, engine, tuning="off")
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    return engine.cache, net.infer({"data": x})


def test_workers_build_the_programs_and_the_results_are_the_same(test_device, tmp_path,
                                                                 monkeypatch):
    monkeypatch.setenv("CUSTOMLAYERS_BUILD_PROCESSES", "0")
    alone, expected = build(test_device, tmp_path / "alone")
    assert alone.worker_builds == 0 and alone.misses >= 4
    monkeypatch.setenv("CUSTOMLAYERS_BUILD_PROCESSES", "2")
    cache, got = build(test_device, tmp_path / "workers")
    # every program compiled by a worker, read back from the disk cache here
    assert cache.worker_builds == alone.misses and cache.misses == 0
    assert cache.disk_hits == alone.misses
    assert all(np.array_equal(got[n], v) for n, v in expected.items())


def test_a_build_that_fails_in_a_worker_is_reported_at_the_users_line(test_device, tmp_path,
                                                                       monkeypatch):
    layer = tmp_path / "grn"
    shutil.copytree(LAYERS / "grn", layer)
    text = (layer / "grn.cl").read_text().splitlines()
    body = next(i for i, line in enumerate(text) if "{" in line)
    text.insert(body + 1, "    this is not C;")
    (layer / "grn.cl").write_text("\n".join(text) + "\n")
    monkeypatch.setenv("CUSTOMLAYERS_BUILD_PROCESSES", "2")
    with pytest.raises(KernelBuildError) as e:
        build(test_device, tmp_path / "cache", layer / "grn.xml")
    assert f"grn.cl:{body + 2}" in str(e.value)


@pytest.mark.parametrize("value", ["-1", "two", "65"])
def test_a_count_that_is_not_one_is_refused_naming_the_variable(test_device, tmp_path,
                                                                monkeypatch, value):
    monkeypatch.setenv("CUSTOMLAYERS_BUILD_PROCESSES", value)
    with pytest.raises(ConfigError, match=f"CUSTOMLAYERS_BUILD_PROCESSES='{value}'"):
        build(test_device, tmp_path / "cache")
