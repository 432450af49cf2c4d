"""Issue 22, item 2: `customlayers warmup` builds the built-in programs for a device once into the
program cache, and a later network of the same ops and shapes loads them from that cache
(counted by the cache's own statistics: no compilation, every program a disk hit)."""
from __future__ import annotations

import os

import numpy as np
import pytest
from onnx import helper

from customlayers.cli import main
from customlayers.runtime.compile.warmup import OP_PROBES, light_models
from customlayers.runtime.device.cache import ProgramCache
from customlayers.runtime.device.device import Engine
from customlayers.api import Network
from single_node_models import model_file

TEST_DEVICE = os.environ.get("CUSTOMLAYERS_TEST_DEVICE", "CPU")   # as conftest.py reads it


def _network_stats(path, cache_dir, test_device) -> ProgramCache:
    cache = ProgramCache(cache_dir)
    Network(path, engine=Engine(test_device, cache=cache), tuning="off")
    return cache


def test_warmup_fills_the_cache_that_a_later_network_reads(tmp_path, capsys, test_device):
    cache_dir = tmp_path / "cache"
    assert main(["warmup", "-d", TEST_DEVICE, "--cache-dir", str(cache_dir),
                 "--no-models"]) == 0
    out = capsys.readouterr().out
    built = len(list((cache_dir / "programs").iterdir()))
    assert f"{built} programs ({built} built, 0 already in the cache) for {len(OP_PROBES)} " \
           f"probes" in out
    assert built >= len(OP_PROBES) // 2      # probes may share a program (a GPU's variants)
    # each with its binary (also where other commands keep none: a PoCL that specializes its
    # work-groups): later processes load them without building the source again
    assert all((entry / "program.bin").exists() for entry in (cache_dir / "programs").iterdir())

    # a user's model of two of the probed ops and shapes: every program from the disk cache
    x = np.random.default_rng(0).standard_normal((1, 16, 14, 14)).astype(np.float32)
    w = helper.make_tensor("w", 1, [16, 1, 1], np.ones(16, np.float32))
    path = model_file(tmp_path / "m.onnx", [helper.make_node("Sigmoid", ["x"], ["s"]),
                                            helper.make_node("Mul", ["s", "w"], ["y"])],
                      {"x": x}, inits=[w])
    cache = _network_stats(path, cache_dir, test_device)
    assert (cache.misses, cache.disk_hits) == (0, 2)
    # and without the warm-up, the same network compiles both
    cold = _network_stats(path, tmp_path / "cold", test_device)
    assert (cold.misses, cold.disk_hits) == (2, 0)

    # a second warm-up builds nothing
    assert main(["warmup", "-d", TEST_DEVICE, "--cache-dir", str(cache_dir),
                 "--no-models"]) == 0
    assert f"{built} programs (0 built, {built} already in the cache)" in capsys.readouterr().out


def test_warmup_of_a_light_model_serves_the_same_model_with_other_weights(tmp_path, capsys,
                                                                          test_device):
    """The light models are warmed up as the onnx package ships them (weights stripped); the
    tests' copies with random weights (tests/models.py) build the same programs."""
    from models import light_onnx
    (squeezenet,) = [p for p in light_models() if p.stem == "light_squeezenet"]
    cache_dir = tmp_path / "cache"
    assert main(["warmup", "-d", TEST_DEVICE, "--cache-dir", str(cache_dir), "--no-models",
                 "--model", str(squeezenet)]) == 0
    assert "model squeezenet" in capsys.readouterr().err
    cache = _network_stats(light_onnx("squeezenet"), cache_dir, test_device)
    assert cache.misses == 0 and cache.disk_hits > 0


def test_a_probe_that_fails_is_named_and_the_others_still_run(tmp_path, capsys):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    assert main(["warmup", "-d", TEST_DEVICE, "--cache-dir", str(tmp_path / "cache"),
                 "--no-models", "--model", str(bad)]) == 1
    captured = capsys.readouterr()
    assert "error: warmup probe model bad failed:" in captured.err
    assert f"for {len(OP_PROBES)} probes" in captured.out     # the op probes all ran


def test_warmup_offers_no_switch_that_would_undo_it(capsys):
    """warmup's job is the on-disk cache: it takes no --no-cache (a run that keeps nothing)."""
    with pytest.raises(SystemExit) as stop:
        main(["warmup", "--help"])
    assert stop.value.code == 0
    assert "--no-cache" not in capsys.readouterr().out
    with pytest.raises(SystemExit) as stop:
        main(["warmup", "--no-cache"])
    assert stop.value.code == 2


# -- mistakes found before anything builds (a warm-up of the light models takes minutes on PoCL)
@pytest.mark.parametrize("made", ["missing", "folder"])
def test_a_model_that_is_not_there_is_a_usage_error_before_any_build(tmp_path, capsys, made):
    """README: a model that is missing or cannot be read is exit 2 with one line naming it; a
    warm-up that built every probe first and then failed (exit 1) cost minutes for a typo."""
    model = tmp_path / "typo.onnx"
    if made == "folder":
        model.mkdir()
    cache_dir = tmp_path / "cache"
    assert main(["warmup", "-d", TEST_DEVICE, "--cache-dir", str(cache_dir), "--no-models",
                 "--model", str(model)]) == 2
    captured = capsys.readouterr()
    assert str(model) in captured.err and "Traceback" not in captured.err
    assert "probes" not in captured.out + captured.err        # nothing was built
    assert not (cache_dir / "programs").exists()


@pytest.mark.parametrize("where", ["a file", "under a file", "CUSTOMLAYERS_NO_CACHE"])
def test_a_cache_that_keeps_nothing_is_refused_before_any_build(tmp_path, capsys, monkeypatch,
                                                                  where):
    """warmup's only product is the on-disk cache: where it cannot be written (or the disk
    cache is off) every build would be thrown away, so it says so and builds nothing (exit 2)
    rather than printing 'N built' and exit 0."""
    blocker = tmp_path / "cache"
    blocker.write_text("not a folder")
    cache_dir = {"a file": blocker, "under a file": blocker / "sub"}.get(where, tmp_path / "c")
    if where == "CUSTOMLAYERS_NO_CACHE":
        monkeypatch.setenv("CUSTOMLAYERS_NO_CACHE", "1")
    assert main(["warmup", "-d", TEST_DEVICE, "--cache-dir", str(cache_dir),
                 "--no-models"]) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert "probes" not in captured.out + captured.err
    if where == "CUSTOMLAYERS_NO_CACHE":
        assert "CUSTOMLAYERS_NO_CACHE" in captured.err
    else:
        assert str(cache_dir) in captured.err and "cannot be written" in captured.err
