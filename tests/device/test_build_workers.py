"""Programs compiled in worker processes (runtime/device/build_workers.py): NVIDIA's compiler
and PoCL's take one build at a time per process, so there the builds a network needs go to
workers, whose results come back through the disk cache. Forced here with
CUSTOMLAYERS_BUILD_PROCESSES=2 on the test device (the suite turns them off elsewhere: its test
processes already fill the machine's cores, conftest.py), with caches that keep binaries."""
from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from customlayers.api import Engine, Registry
from customlayers.errors import ConfigError, KernelBuildError
from customlayers.runtime.compile.network import Network
from customlayers.runtime.device.cache import ProgramCache

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "models" / "demo_cnn.xml"          # GRN and ReorgYolo among them
LAYERS = ROOT / "examples" / "layers"


def build(test_device, cache_dir, grn_xml=LAYERS / "grn" / "grn.xml", engine=None):
    engine = engine or Engine(test_device, cache=ProgramCache(cache_dir, binaries=True))
    registry = Registry(engine)
    registry.load(grn_xml, LAYERS / "reorg" / "reorg.xml")
    net = Network(str(DEMO), registry, engine, tuning="off")
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    return engine.cache, net.infer({"data": x})


def no_compiling_here(monkeypatch):
    """This process may read programs, not compile them (the workers do: it does not take
    builds from their queue either)."""
    from customlayers.runtime.device import build_workers
    from customlayers.runtime.device import cache as cache_module

    def refuse(*args, **kwargs):
        raise AssertionError("a program was compiled in the parent process")
    monkeypatch.setattr(cache_module, "compile_source", refuse)
    monkeypatch.setattr(build_workers, "BUILD_HERE_TOO", False)


@pytest.fixture(autouse=True)
def _no_workers_left():
    """Every test starts and ends with no worker alive: an early start (start_early) or a test
    that leaves its pool would otherwise carry into the next test's assertions."""
    from customlayers.runtime.device import build_workers
    build_workers.close_workers(wait=True)
    yield
    build_workers.close_workers(wait=True)


def test_workers_build_the_programs_and_the_results_are_the_same(test_device, tmp_path,
                                                                 monkeypatch):
    from customlayers.runtime.device import build_workers
    monkeypatch.setenv("CUSTOMLAYERS_BUILD_PROCESSES", "0")
    alone, expected = build(test_device, tmp_path / "alone")
    assert alone.worker_builds == 0 and alone.misses >= 4
    monkeypatch.setenv("CUSTOMLAYERS_BUILD_PROCESSES", "2")
    no_compiling_here(monkeypatch)
    monkeypatch.chdir(tmp_path)             # a relative cache folder: the workers' is the same
    cache, got = build(test_device, Path("workers"))
    # every program compiled by a worker, read back from the disk cache here (and counted
    # as built: misses are the programs compiled for this process, wherever)
    assert cache.worker_builds == cache.misses == alone.misses and cache.disk_hits == 0
    assert all(np.array_equal(got[n], v) for n, v in expected.items())
    assert not build_workers._pools          # ended with the network's compile


def test_this_process_builds_beside_the_workers_and_each_program_is_compiled_once(
        test_device, tmp_path, monkeypatch):
    """The default: this process takes builds from the workers' queue while they start. Every
    program is compiled once, here or there, and the numbers are those of a build alone."""
    from customlayers.runtime.device import build_workers
    monkeypatch.setenv("CUSTOMLAYERS_BUILD_PROCESSES", "0")
    alone, expected = build(test_device, tmp_path / "alone")
    monkeypatch.setenv("CUSTOMLAYERS_BUILD_PROCESSES", "2")
    assert build_workers.BUILD_HERE_TOO
    compiled_here = []
    from customlayers.runtime.device import cache as cache_module
    real = cache_module.compile_source

    def counted(*args, **kwargs):
        compiled_here.append(args[2])
        return real(*args, **kwargs)
    monkeypatch.setattr(cache_module, "compile_source", counted)
    cache, got = build(test_device, tmp_path / "both")
    assert cache.misses == alone.misses and cache.disk_hits == 0
    assert len(compiled_here) + cache.worker_builds == cache.misses
    assert len(set(compiled_here)) == len(compiled_here)
    assert all(np.array_equal(got[n], v) for n, v in expected.items())


def test_closed_workers_exit_without_the_network_waiting_for_them(test_device, tmp_path,
                                                                   monkeypatch):
    """A network's compile tells its workers to stop and goes on; a thread reaps them."""
    from customlayers.runtime.device import build_workers
    monkeypatch.setenv("CUSTOMLAYERS_BUILD_PROCESSES", "2")
    started = []
    real_init = build_workers.BuildWorkers.__init__

    def remember(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        started.append(self)
    monkeypatch.setattr(build_workers.BuildWorkers, "__init__", remember)
    build(test_device, tmp_path / "cache")
    (pool,) = started
    assert pool.closed and not build_workers._pools
    for reaper in list(build_workers._reapers):
        reaper.join(timeout=build_workers.STOP_S + 5)
    assert all(child.poll() is not None for child in pool._children)


def test_an_empty_cache_starts_the_workers_with_the_engine_for_the_first_network(
        test_device, tmp_path, monkeypatch):
    """A first load on a machine with cores to spare (start_early): the workers start with the
    Engine, before the model is read, the network's builds go to those same workers, and the
    numbers are those of a build alone. A worker starts none of its own."""
    from customlayers.runtime.device import build_workers
    monkeypatch.setenv("CUSTOMLAYERS_BUILD_PROCESSES", "0")
    alone, expected = build(test_device, tmp_path / "alone")
    monkeypatch.setenv("CUSTOMLAYERS_BUILD_PROCESSES", "2")
    monkeypatch.setattr(build_workers, "_cores", lambda: 3)     # one left beside the two
    engine = Engine(test_device, cache=ProgramCache(tmp_path / "early", binaries=True))
    (pool,) = build_workers._pools.values()
    assert pool.size == 2 and not pool.closed
    for child in pool._children:            # (Linux: the environment it was started with)
        environ = Path(f"/proc/{child.pid}/environ").read_bytes().split(b"\0")
        assert b"CUSTOMLAYERS_BUILD_PROCESSES=0" in environ
    used = []
    real_build = build_workers.BuildWorkers.build

    def remember(self, *args, **kwargs):
        used.append(self)
        return real_build(self, *args, **kwargs)
    monkeypatch.setattr(build_workers.BuildWorkers, "build", remember)
    no_compiling_here(monkeypatch)
    cache, got = build(test_device, None, engine=engine)
    assert used and all(p is pool for p in used)
    # each made its context through pyopencl's loader while it imported (EarlyContext)
    assert pool.ready_said == [build_workers.EARLY_READY] * 2
    assert cache.worker_builds == cache.misses == alone.misses
    assert all(np.array_equal(got[n], v) for n, v in expected.items())
    assert not build_workers._pools
    # the cache now holds programs: a second engine on it starts no workers
    Engine(test_device, cache=ProgramCache(tmp_path / "early", binaries=True))
    assert not build_workers._pools


@pytest.mark.parametrize("case", ["no core to spare", "a program", "started before"])
def test_no_early_start_without_a_core_to_spare_or_on_a_cache_used_before(
        test_device, tmp_path, monkeypatch, case):
    from customlayers.runtime.device import build_workers
    monkeypatch.setenv("CUSTOMLAYERS_BUILD_PROCESSES", "2")
    monkeypatch.setattr(build_workers, "_cores", lambda: 2 if case == "no core to spare" else 3)
    folder = tmp_path / "cache"
    if case == "a program":
        (folder / "programs" / ("0" * 64)).mkdir(parents=True)
    if case == "started before":        # an early start of this folder that built nothing
        Engine(test_device, cache=ProgramCache(folder, binaries=True))
        assert build_workers._pools
        build_workers.close_workers(wait=True)
        assert not (folder / "programs").exists()
    Engine(test_device, cache=ProgramCache(folder, binaries=True))
    assert not build_workers._pools
    if case == "no core to spare":
        assert not folder.exists()        # the folder untouched where no worker would start


def test_the_default_count_starts_early_without_touching_a_bad_cache_folder(
        test_device, tmp_path, monkeypatch):
    """With CUSTOMLAYERS_BUILD_PROCESSES unset (the default count) and many cores, an Engine
    on a cache folder that cannot be made warns nothing and starts nothing: the first build
    reports the folder, as before."""
    import warnings
    from customlayers.runtime.device import build_workers
    monkeypatch.delenv("CUSTOMLAYERS_BUILD_PROCESSES", raising=False)
    monkeypatch.setattr(build_workers, "_cores", lambda: 64)
    monkeypatch.setattr(build_workers, "_default_count", lambda device: 2)
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Engine(test_device, cache=ProgramCache(not_a_folder / "cache", binaries=True))
    assert not build_workers._pools


def test_a_package_loaded_on_an_empty_cache_ends_the_early_workers(test_device, tmp_path,
                                                                   monkeypatch):
    """A package compiles nothing and leaves the cache empty: its Network ends the Engine's
    early workers, and the next process's Engine on that cache starts none (the first-load
    mark), so that a machine that only loads packages pays for one early start, not one per
    run."""
    from customlayers.runtime.compile.packaged import save_package
    from customlayers.runtime.device import build_workers
    monkeypatch.setenv("CUSTOMLAYERS_BUILD_PROCESSES", "0")
    engine = Engine(test_device, cache=ProgramCache(tmp_path / "build", binaries=True))
    registry = Registry(engine)
    registry.load(LAYERS / "grn" / "grn.xml", LAYERS / "reorg" / "reorg.xml")
    net = Network(str(DEMO), registry, engine, tuning="off")
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    expected = net.infer({"data": x})
    save_package(net, tmp_path / "demo.clpkg", model=str(DEMO))
    monkeypatch.setenv("CUSTOMLAYERS_BUILD_PROCESSES", "2")
    monkeypatch.setattr(build_workers, "_cores", lambda: 3)
    folder = tmp_path / "deployed"
    for run in range(2):
        engine = Engine(test_device, cache=ProgramCache(folder, binaries=True))
        assert bool(build_workers._pools) == (run == 0)
        registry = Registry(engine)
        registry.load(LAYERS / "grn" / "grn.xml", LAYERS / "reorg" / "reorg.xml")
        loaded = Network(str(tmp_path / "demo.clpkg"), registry, engine)
        assert not build_workers._pools
        got = loaded.infer({"data": x})
        assert all(np.array_equal(got[n], v) for n, v in expected.items())


def test_a_child_process_engine_starts_no_workers(test_device, tmp_path, monkeypatch):
    """open_engine_at (the build workers', checkers' and machine-code capture's children)
    makes no early start, whatever its cache."""
    from customlayers.runtime.device import build_workers
    from customlayers.runtime.device.device import device_position, open_engine_at
    monkeypatch.setenv("CUSTOMLAYERS_BUILD_PROCESSES", "2")
    monkeypatch.setattr(build_workers, "_cores", lambda: 3)
    device = Engine(test_device, cache=ProgramCache(tmp_path / "parent")).device
    build_workers.close_workers(wait=True)
    open_engine_at(device_position(device), device.name,
                   cache=ProgramCache(tmp_path / "child", binaries=True))
    assert not build_workers._pools


def test_workers_started_early_and_never_given_work_are_ended_at_once(test_device, tmp_path,
                                                                      monkeypatch):
    """A first Engine whose network needs fewer builds than MIN_JOBS (or which builds none) ends
    its early workers unused: killed, not waited for through their start."""
    import signal
    from customlayers.runtime.device import build_workers
    monkeypatch.setenv("CUSTOMLAYERS_BUILD_PROCESSES", "2")
    monkeypatch.setattr(build_workers, "_cores", lambda: 3)
    Engine(test_device, cache=ProgramCache(tmp_path / "cache", binaries=True))
    (pool,) = build_workers._pools.values()
    build_workers.close_workers(wait=True)
    assert [child.returncode for child in pool._children] == [-signal.SIGKILL] * 2


@pytest.mark.parametrize("child", ["import sys; sys.exit(3)", "import time; time.sleep(600)"],
                         ids=["exits", "hangs"])
def test_workers_that_do_not_start_leave_the_builds_here(test_device, tmp_path, monkeypatch,
                                                         child):
    from customlayers.runtime.device import build_workers
    script = tmp_path / "python"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} -c '{child}'\n")
    script.chmod(0o755)
    monkeypatch.setattr(build_workers.sys, "executable", str(script))
    monkeypatch.setattr(build_workers, "START_S", 2.0)
    monkeypatch.setattr(build_workers, "_failed", set())
    monkeypatch.setenv("CUSTOMLAYERS_BUILD_PROCESSES", "2")
    started = time.monotonic()
    cache, got = build(test_device, tmp_path / "cache")
    assert cache.worker_builds == 0 and cache.misses >= 4 and time.monotonic() - started < 60
    assert build_workers._failed           # not tried again on this device
    assert not build_workers._pools


def test_one_worker_that_does_not_start_does_not_give_up_the_others(test_device, tmp_path,
                                                                    monkeypatch):
    """The first child exits at its start, the second starts (late); this process meanwhile
    builds every program itself, so no child answers a job. The device's workers are not
    given up for the process: one of them did start (only workers that cannot start at all
    are)."""
    from customlayers.runtime.device import build_workers
    monkeypatch.setenv("CUSTOMLAYERS_BUILD_PROCESSES", "0")
    alone, expected = build(test_device, tmp_path / "warm")  # PoCL's own cache: fast builds
    script = tmp_path / "python"
    script.write_text(f'#!/bin/sh\nif mkdir "{tmp_path}/first" 2>/dev/null; then exit 3; fi\n'
                      f'sleep 5\nexec {sys.executable} "$@"\n')
    script.chmod(0o755)
    monkeypatch.setattr(build_workers.sys, "executable", str(script))
    monkeypatch.setattr(build_workers, "_failed", set())
    monkeypatch.setenv("CUSTOMLAYERS_BUILD_PROCESSES", "2")
    cache, got = build(test_device, tmp_path / "cache")
    assert cache.misses == alone.misses        # each program compiled once, here or there
    assert all(np.array_equal(got[n], v) for n, v in expected.items())
    assert not build_workers._failed


def test_a_build_that_fails_in_a_worker_is_reported_at_the_users_line(test_device, tmp_path,
                                                                       monkeypatch):
    layer = tmp_path / "grn"
    shutil.copytree(LAYERS / "grn", layer)
    text = (layer / "grn.cl").read_text().splitlines()
    body = next(i for i, line in enumerate(text) if "{" in line)
    text.insert(body + 1, "    this is not C;")
    (layer / "grn.cl").write_text("\n".join(text) + "\n")
    from customlayers.runtime.device import build_workers
    monkeypatch.setenv("CUSTOMLAYERS_BUILD_PROCESSES", "0")
    programs = build(test_device, tmp_path / "count")[0].misses      # the demo's, all good
    monkeypatch.setattr(build_workers, "BUILD_HERE_TOO", False)    # the workers alone
    monkeypatch.setenv("CUSTOMLAYERS_BUILD_PROCESSES", "2")
    engine = Engine(test_device, cache=ProgramCache(tmp_path / "cache", binaries=True))
    with pytest.raises(KernelBuildError) as e:
        build(test_device, None, layer / "grn.xml", engine)
    assert f"grn.cl:{body + 2}" in str(e.value)
    # the workers built the others; GRN's failed there and was built here, for its error
    assert engine.cache.worker_builds == programs - 1


def test_the_default_count_is_up_to_eight_on_nvidia_and_pocl(test_device, tmp_path,
                                                             monkeypatch):
    from customlayers.runtime.device import build_workers
    from customlayers.runtime.device.limits import is_nvidia_platform, is_pocl_platform
    monkeypatch.delenv("CUSTOMLAYERS_BUILD_PROCESSES", raising=False)
    engine = Engine(test_device, cache=ProgramCache(tmp_path / "cache", binaries=True))
    known = is_nvidia_platform(engine.device) or is_pocl_platform(engine.device)
    cores = len(os.sched_getaffinity(0))
    assert build_workers.worker_count(engine) == (min(8, cores) if known and cores >= 2 else 0)
    off = Engine(test_device, cache=ProgramCache(tmp_path / "off", enabled=False))
    assert build_workers.worker_count(off) == 0      # nothing could carry their results
    # a process that caps PoCL's threads at its share (a Ray actor of one CPU) gets none
    monkeypatch.setenv("POCL_MAX_PTHREAD_COUNT", "1")
    assert build_workers.worker_count(engine) == (0 if is_pocl_platform(engine.device) else
                                                  min(8, cores) if known and cores >= 2 else 0)


@pytest.mark.parametrize("v2,v1,want", [
    ("200000 100000", None, 2), ("150000 100000", None, 1), ("50000 100000", None, 1),
    ("max 100000", None, None), (None, ("400000", "100000"), 4), (None, ("-1", "100000"), None),
    ("garbled", ("300000", "100000"), 3), (None, None, None)])
def test_a_cgroup_cpu_quota_caps_the_cores(tmp_path, monkeypatch, v2, v1, want):
    """A container's --cpus (cgroup v2's cpu.max, else v1's quota and period): the whole CPUs
    it gives, at least one; no limit where the quota says none or no file is there."""
    from customlayers.runtime.device import build_workers
    files = (tmp_path / "cpu.max", tmp_path / "quota", tmp_path / "period")
    if v2 is not None:
        files[0].write_text(v2 + "\n")
    if v1 is not None:
        files[1].write_text(v1[0] + "\n")
        files[2].write_text(v1[1] + "\n")
    monkeypatch.setattr(build_workers, "CPU_QUOTA_FILES",
                        ((files[0], None), (files[1], files[2])))
    assert build_workers._cpu_quota() == want
    cores = len(os.sched_getaffinity(0))
    assert build_workers._cores() == (min(cores, want) if want else cores)


@pytest.mark.parametrize("value", ["-1", "two", "65"])
def test_a_count_that_is_not_one_is_refused_naming_the_variable(test_device, tmp_path,
                                                                monkeypatch, value):
    monkeypatch.setenv("CUSTOMLAYERS_BUILD_PROCESSES", value)
    with pytest.raises(ConfigError, match=f"CUSTOMLAYERS_BUILD_PROCESSES='{value}'"):
        build(test_device, tmp_path / "cache")


def two_matmuls(path: Path) -> Path:
    """x @ w1 -> ReLU -> @ w2: two layers the tuner times (MatMul lists several variants)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)
    w1 = numpy_helper.from_array((rng.standard_normal((96, 64)) * 0.1).astype(np.float32), "w1")
    w2 = numpy_helper.from_array((rng.standard_normal((64, 40)) * 0.1).astype(np.float32), "w2")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("MatMul", ["r", "w2"], ["y"])], "mm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [24, 96])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [24, 40])], [w1, w2])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path / "mm.onnx"))
    return path / "mm.onnx", numpy_helper.to_array(w1), numpy_helper.to_array(w2)


def test_every_layers_candidates_are_built_together_before_the_timing(test_device, tmp_path,
                                                                         monkeypatch):
    from customlayers.runtime.device import build_workers
    model, w1, w2 = two_matmuls(tmp_path)
    x = np.random.default_rng(8).standard_normal((24, 96)).astype(np.float32)
    monkeypatch.setenv("CUSTOMLAYERS_BUILD_PROCESSES", "2")
    from customlayers.runtime.device.limits import device_traits
    # one layer's candidates (4 on a CPU, 16 on a GPU) alone are too few for the workers
    # here; both layers' together are not
    per_layer = 4 if device_traits(Engine(test_device).device).kind == "CPU" else 16
    monkeypatch.setattr(build_workers, "MIN_JOBS", per_layer + 1)
    monkeypatch.setattr(build_workers, "BUILD_HERE_TOO", False)    # the workers alone
    engine = Engine(test_device, cache=ProgramCache(tmp_path / "cache", binaries=True))
    net = Network(str(model), engine=engine, tuning="full")
    note = next(m for m in net.messages if m.startswith("tuning (full)"))
    timed = int(note.split(" layer(s) timed, ")[1].split(" ")[0])
    assert note.startswith("tuning (full): 2 layer(s) timed") and timed >= 4
    # the workers compiled every candidate of both layers; this process compiled nothing
    assert engine.cache.worker_builds == engine.cache.misses >= timed
    want = np.maximum(x.astype(np.float64) @ w1, 0) @ w2
    np.testing.assert_allclose(net.infer({"x": x})["y"], want, rtol=1e-4, atol=1e-4)
    # a second load: both choices from the tuning cache, each counted once (the collecting
    # walk counts none)
    again = Network(str(model), engine=engine, tuning="full")
    note = next(m for m in again.messages if m.startswith("tuning (full)"))
    assert note.startswith("tuning (full): 0 layer(s) timed, 0 candidate(s)")
    assert "; 2 choice(s) from the cache" in note


def test_a_context_made_while_importing_is_the_parents_device_or_none(test_device, tmp_path):
    """build_workers.EarlyContext through pyopencl's own loader: the device at the parent's
    position, adopted with its name checked; a wrong name or position gives None (the worker
    then opens its device as before)."""
    import pyopencl as cl
    from customlayers.runtime.device.device import adopt_context, device_position
    from customlayers.runtime.device.build_workers import EarlyContext
    parent = Engine(test_device, cache=ProgramCache(tmp_path / "cache"))
    position = device_position(parent.device)
    engine = adopt_context(*EarlyContext(position).take(60), parent.device.name)
    assert engine is not None and engine.device == parent.device
    program = cl.Program(engine.context, "__kernel void k(__global float* a) "
                                         "{ a[get_global_id(0)] = 2.0f; }").build()
    out = cl.Buffer(engine.context, cl.mem_flags.READ_WRITE, 16)
    program.k(engine.queue, (4,), None, out)
    got = np.empty(4, np.float32)
    cl.enqueue_copy(engine.queue, got, out)
    assert got.tolist() == [2.0] * 4
    assert adopt_context(*EarlyContext(position).take(60), "not " + parent.device.name) is None
    assert EarlyContext((position[0], 99)).take(60) is None
    assert EarlyContext((99, 0)).take(60) is None
