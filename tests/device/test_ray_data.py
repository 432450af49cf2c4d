"""Ray Data batch inference on a local Ray instance (2 CPUs, 2 actors): the rows equal a plain
single-process loop, and an actor that fails is a clear error from map_batches, not a hang."""
from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from customlayers.integrations.placement import RayShare, ray_share
from customlayers.integrations.ray import CustomLayersPredictor

from ray_cases import (GRN_MODEL, RAY_CPUS, REORG_MODEL, TEST_DEVICE, broken_reorg_layer,
                       plain_loop)

pytest.importorskip("ray.data", reason="Ray is the optional extra customlayers[ray]")

RNG = np.random.default_rng(64)
ACTORS = 2
# a run that has not ended by then is a hang (a first run builds programs in both actors)
PATIENCE_S = 240


def within(seconds: float, run):
    """run() in a thread; its result, its exception, or a failure when it outlives `seconds`."""
    box = {}

    def target():
        try:
            box["value"] = run()
        except BaseException as e:   # noqa: BLE001 - handed to the test below
            box["error"] = e

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"map_batches did not end within {seconds} s (a hang)")
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_two_actors_equal_a_plain_loop_row_by_row(ray_local):
    ray = ray_local
    rows = RNG.standard_normal((64, 3, 16, 16)).astype(np.float32)
    items = [{"id": i, "x": rows[i]} for i in range(len(rows))]

    # both actors take rows: the first to start waits at its first batch until the other has
    # started too (with warm caches one actor ran all 8 batches before the other was up)
    @ray.remote(num_cpus=0)
    class Gate:
        def __init__(self):
            self.actors = set()

        def arrive(self, pid: int) -> None:
            self.actors.add(pid)

        def count(self) -> int:
            return len(self.actors)

    gate = Gate.remote()

    # defined here, so that Ray ships it by value: each row says which actor ran it and how
    # many threads its PoCL had
    class Reporting(CustomLayersPredictor):
        def __init__(self, gate, **model):
            super().__init__(**model)
            self.gate = gate
            ray.get(gate.arrive.remote(os.getpid()))

        def __call__(self, batch):
            deadline = time.monotonic() + PATIENCE_S / 2
            while ray.get(self.gate.count.remote()) < ACTORS and time.monotonic() < deadline:
                time.sleep(0.05)
            out = super().__call__(batch)
            n = len(out["id"])
            out["pid"] = np.full(n, os.getpid())
            out["threads"] = np.full(n, self.device_info["compute_units"])
            return out

    ds = ray.data.from_items(items, override_num_blocks=8)
    out = within(PATIENCE_S, lambda: ds.map_batches(
        Reporting, fn_constructor_kwargs=dict(GRN_MODEL, gate=gate), batch_size=8,
        compute=ray.data.ActorPoolStrategy(size=ACTORS), num_cpus=RAY_CPUS / ACTORS).take_all())

    out.sort(key=lambda r: r["id"])
    assert [r["id"] for r in out] == list(range(64))
    expected = plain_loop(GRN_MODEL, rows)
    for r in out:
        np.testing.assert_array_equal(r["y"], expected[r["id"]], err_msg=f"row {r['id']}")
    assert len({r["pid"] for r in out}) == ACTORS
    if TEST_DEVICE == "CPU":
        # each actor's PoCL was capped to its share of the cores, not one thread per core each
        assert {int(r["threads"]) for r in out} == {RAY_CPUS // ACTORS}


def test_the_driver_holds_no_share(ray_local):
    # a predictor made in the driver (a plain loop beside Ray) keeps every device and core
    assert ray_share() == RayShare()


def test_dynamic_batch_with_a_partial_last_batch_as_in_the_issue(ray_local, tmp_path):
    ray = ray_local
    options = ray.data.DataContext.get_current().execution_options
    options.preserve_order = True        # from_numpy has no id column: rows come back in order
    rows = RNG.standard_normal((60, 4, 6, 8)).astype(np.float32)    # 7 batches of 8, then 4
    ds = ray.data.from_numpy(np.array_split(rows, 4))
    kwargs = dict(REORG_MODEL, cache_dir=str(tmp_path / "cluster-cache"))
    try:
        out = within(PATIENCE_S, lambda: ds.map_batches(
            CustomLayersPredictor, fn_constructor_kwargs=kwargs, batch_size=8,
            concurrency=ACTORS).take_all())
    finally:
        options.preserve_order = False
    got = np.stack([r["y"] for r in out])
    np.testing.assert_array_equal(got, plain_loop(REORG_MODEL, rows))
    # the programs went to the configured (shared) cache directory
    assert list((tmp_path / "cluster-cache" / "programs").glob("*/meta.json"))


def test_actor_with_a_bad_model_path_is_an_error_not_a_hang(ray_local):
    ray = ray_local
    ds = ray.data.from_numpy(np.zeros((16, 3, 16, 16), np.float32))
    kwargs = dict(GRN_MODEL, model="/no/such/model.onnx")
    with pytest.raises(Exception) as caught:
        within(PATIENCE_S, lambda: ds.map_batches(
            CustomLayersPredictor, fn_constructor_kwargs=kwargs, batch_size=8,
            concurrency=ACTORS).take_all())
    assert "CustomLayersPredictor for model '/no/such/model.onnx'" in str(caught.value)
    assert "/no/such/model.onnx: no such model file" in str(caught.value)


def test_layer_error_in_a_batch_is_an_error_not_a_hang(ray_local, tmp_path):
    ray = ray_local
    ds = ray.data.from_numpy(np.zeros((16, 4, 6, 8), np.float32))
    kwargs = dict(REORG_MODEL, configs=[broken_reorg_layer(tmp_path)])
    with pytest.raises(Exception) as caught:
        within(PATIENCE_S, lambda: ds.map_batches(
            CustomLayersPredictor, fn_constructor_kwargs=kwargs, batch_size=8,
            concurrency=ACTORS).take_all())
    text = str(caught.value)
    assert "KernelBuildError" in text and "reorg.cl:3" in text, text[-2000:]


def test_actors_from_a_package_through_ray_data_and_ray_core(ray_local, tmp_path):
    """The scale-out recipe of docs/scaling.md: a package compiled once, loaded by every actor
    (nothing built), with batches queued per actor (Ray Data) or called by ObjectRef (Ray Core,
    pinned uploads); the rows equal a plain loop."""
    from customlayers.integrations.network_setup import build_network
    from customlayers.runtime.compile.packaged import save_package
    from ray_cases import fixed_batch_reorg
    ray = ray_local
    package = tmp_path / "reorg4.clpkg"
    save_package(build_network(fixed_batch_reorg(tmp_path, 4), REORG_MODEL["configs"],
                               device=TEST_DEVICE), package)
    rows = RNG.standard_normal((40, 4, 6, 8)).astype(np.float32)
    expected = plain_loop(REORG_MODEL, rows)
    items = [{"id": i, "x": rows[i]} for i in range(len(rows))]
    kwargs = dict(model=str(package), device=TEST_DEVICE, nireq=2)
    out = within(PATIENCE_S, lambda: ray.data.from_items(items, override_num_blocks=5)
                 .map_batches(CustomLayersPredictor, fn_constructor_kwargs=kwargs,
                              batch_size=8, num_cpus=RAY_CPUS / ACTORS,
                              compute=ray.data.ActorPoolStrategy(
                                  size=ACTORS, max_tasks_in_flight_per_actor=8)).take_all())
    out.sort(key=lambda r: r["id"])
    np.testing.assert_array_equal(np.stack([r["y"] for r in out]), expected)

    actor = ray.remote(num_cpus=1)(CustomLayersPredictor).remote(**kwargs, pinned=True)
    try:
        refs = [ray.put(rows[i:i + 10]) for i in range(0, 40, 10)]   # 10 rows: 3 requests
        got = within(PATIENCE_S, lambda: ray.get([actor.__call__.remote(r) for r in refs]))
    finally:
        ray.kill(actor)
    np.testing.assert_array_equal(np.concatenate([g["y"] for g in got]), expected)
