"""The TCN window in few launches (issue 24, point 2): a Network asked for it
(fuse_temporal_blocks, the CLI's --fuse-temporal-blocks) rewrites runs of temporal blocks into
TemporalBlocks layers; by default a GPU does for the runs that are launch-bound on it (small
batches: passes/__init__.py), a CPU never.
The kernels run on PoCL with the tile its local memory gives; the launches are counted with the
profiler (runtime/observe/profile.py); outputs against ONNX Runtime."""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from customlayers.cli import main as cli_main
from customlayers.runtime.compile.network import Network
from customlayers.runtime.device.device import Engine
from customlayers.runtime.observe.profile import collect
from tcn_models import Spec, ort_run, tcn_model

pytest.importorskip("onnxruntime")
# appended: tests/ stays first (bench/ has a models.py of its own)
sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))
import gpu_peers  # noqa: E402

TEST_DEVICE = os.environ.get("CUSTOMLAYERS_TEST_DEVICE", "CPU")   # as conftest.py reads it



def fused_network(path, engine, **options) -> Network:
    return Network(path, engine=engine, fuse_temporal_blocks=True, **options)


@pytest.fixture(scope="module")
def engine(test_device):
    return Engine(test_device)


def launches(net: Network, x: np.ndarray) -> tuple[dict, int, list]:
    request = net.create_request()
    out = request.infer({"x": x})
    rows = collect(request)
    return out, sum(r.launches for r in rows), [r.type for r in rows]


def close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(want).max()))


@pytest.mark.parametrize("batch,weight_norm", [(1, False), (64, False), (1, True)])
def test_the_seed_tcn_window_runs_in_four_launches(tmp_path, engine, batch,
                                                   weight_norm):
    path = gpu_peers.onnx_tcn(tmp_path / "tcn.onnx", batch, weight_norm=weight_norm)
    x = np.random.default_rng(batch).standard_normal((batch, 1, 784)).astype(np.float32)
    net = fused_network(path, engine, profiling=True)
    out, count, types = launches(net, x)
    # 17 convolution launches before: now 4 for the window, 1 for the head
    assert types == ["TemporalBlocks"] * 4 + ["MatMul+bias+logsoftmax"]
    assert count == 5 <= 6
    close(out["y"], ort_run(path, {"x": x})["y"])


def test_by_default_a_gpu_fuses_the_launch_bound_runs_and_a_cpu_none(tmp_path, engine):
    on_cpu = engine.device.type & 2 != 0                # CL_DEVICE_TYPE_CPU
    for batch, on_gpu in ((1, True), (64, False)):
        path = gpu_peers.onnx_tcn(tmp_path / f"tcn{batch}.onnx", batch, levels=2)
        steps = [s.type for s in Network(path, engine=engine).plan.steps]
        assert ("TemporalBlocks" in steps) == (on_gpu and not on_cpu), batch
        off = Network(path, engine=engine, fuse_temporal_blocks=False)
        assert "TemporalBlocks" not in [s.type for s in off.plan.steps]
        assert "TemporalBlocks" in [s.type for s in fused_network(path, engine).plan.steps]


def test_a_gpu_decides_per_batch_where_the_model_leaves_the_batch_open(tmp_path, engine,
                                                                     monkeypatch):
    """A TCN exported with a dynamic batch (torch's usual export): the rewrite knows whether a
    run is launch-bound only for a request's shapes, so the network decides per plan (found by
    a review: decided once on the declared graph, it never fused). The device is taken for a
    GPU (its traits), the kernels run on the test device."""
    import onnx
    from customlayers.jit.launch import DeviceTraits
    from customlayers.runtime.compile import network as network_module
    # one compute unit: launch_bound's 1.2 M multiply-adds a unit are a batch of 2 at length
    # 100 (each 25-channel convolution 0.44 M multiply-adds per item), so batch 1 fuses, 4 not
    monkeypatch.setattr(network_module, "device_traits", lambda device: DeviceTraits(
        "GPU", compute_units=1, max_work_group_size=256, local_mem_size=48 * 1024))
    path = gpu_peers.onnx_tcn(tmp_path / "tcn.onnx", 1, levels=2, length=100)
    model = onnx.load(str(path))
    for value in (*model.graph.input, *model.graph.output):
        value.type.tensor_type.shape.dim[0].dim_param = "N"
    onnx.save(model, str(path))
    net = Network(path, engine=engine, input_shapes={"x": (1, 1, 100)})
    assert [s.type for s in net.plan.steps].count("TemporalBlocks") == 1
    x = np.random.default_rng(3).standard_normal((1, 1, 100)).astype(np.float32)
    close(net.infer({"x": x})["y"], ort_run(path, {"x": x})["y"])
    assert "TemporalBlocks" not in [s.type for s in net.plan_for({"x": (4, 1, 100)}).steps]


def test_asking_for_the_fusion_on_a_model_without_blocks_says_so(engine):
    model = Path(__file__).resolve().parents[2] / "examples" / "models" / "demo_cnn_builtin.xml"
    said = []
    net = Network(str(model), engine=engine, fuse_temporal_blocks=True, messages=said.append)
    assert any("no run of TCN temporal blocks" in m for m in said)
    assert any("nothing fused" in m for m in net.messages)


@pytest.mark.parametrize("form", ["chomp", "pads", "pad_op"])
def test_blocks_of_every_form_match_onnxruntime(tmp_path, engine, form):
    specs = [Spec(3, 8, 3, 1, form), Spec(8, 8, 5, 3, form, bias=False),
             Spec(8, 5, 2, 7, form), Spec(5, 5, 7, 4, form)]
    path = tcn_model(tmp_path / "m.onnx", 3, 97, specs, seed=2)
    x = np.random.default_rng(3).standard_normal((3, 3, 97)).astype(np.float32)
    net = fused_network(path, engine, profiling=True)
    out, count, types = launches(net, x)
    # runs (d 1, 3), (7), (4): a longer run would pass MAX_RUN_HALO; 13 launches unfused
    assert types == ["TemporalBlocks"] * 3 and count == 3
    close(out["y"], ort_run(path, {"x": x})["y"])


def test_the_fused_network_still_streams(tmp_path, engine):
    """Network.streaming converts the graph as read, not the fused one: each step equals the
    fused window network on the prefix, read at its last step."""
    batch, steps = 2, 20
    x = np.random.default_rng(5).standard_normal((batch, 1, steps)).astype(np.float32)
    path = gpu_peers.onnx_tcn(tmp_path / "tcn.onnx", batch, length=steps, weight_norm=True)
    net = fused_network(path, engine)
    assert "TemporalBlocks" in [s.type for s in net.plan.steps]
    stream = net.streaming()
    got = [stream.step(x[:, :, t])["y"] for t in range(steps)]
    for length in (1, 7, steps):
        prefix = gpu_peers.onnx_tcn(tmp_path / f"tcn{length}.onnx", batch, length=length,
                                    weight_norm=True)
        window = fused_network(prefix, engine)
        assert "TemporalBlocks" in [s.type for s in window.plan.steps]
        full = window.infer({"x": np.ascontiguousarray(x[:, :, :length])})["y"]
        close(got[length - 1], full)


def test_torchs_export_of_the_seed_tcn_window_runs_in_four_launches(engine):
    """torch.onnx's export (weight norm as arithmetic, the chomp Slices folded whatever the
    length: N and T are dynamic) against torch's own output. Its head is one launch: the
    MatMul reads the last step itself (the Gather folded) and applies the LogSoftmax, decided
    on the request's shapes."""
    models = Path(__file__).resolve().parents[1] / "data" / "models"
    x = np.load(models / "tcn_torch_x.npy")
    net = fused_network(models / "tcn_torch_wn.onnx", engine, profiling=True)
    request = net.create_request({"x": x.shape})
    out = request.infer({"x": x})
    rows = collect(request)
    assert [r.type for r in rows] == ["TemporalBlocks"] * 4 + ["MatMul+bias+logsoftmax"]
    assert sum(r.launches for r in rows[:4]) == 4
    np.testing.assert_allclose(out["y"], np.load(models / "tcn_torch_y.npy"), rtol=1e-4,
                               atol=1e-4)
    # a trace names each run's tile, not only its program (one per PB and WLOCAL)
    from customlayers.runtime.observe.trace import TraceRecorder
    recorder = TraceRecorder(engine.device.name)
    recorder.add(request)
    tiles = [e["args"]["variant"] for e in recorder.events if e["args"]["op"] == "TemporalBlocks"]
    assert len(tiles) == 4 and all(
        re.fullmatch(r"temporal_blocks_tile_r\d+_m\d+_pb\d+(_wlocal)?", v) for v in tiles), tiles


def test_a_compiled_package_of_the_fused_tcn_runs_as_compiled(tmp_path, engine):
    from customlayers.runtime.compile.packaged import save_package
    path = gpu_peers.onnx_tcn(tmp_path / "tcn.onnx", 2, levels=4, length=100)
    x = np.random.default_rng(7).standard_normal((2, 1, 100)).astype(np.float32)
    save_package(fused_network(path, engine), tmp_path / "tcn.clpkg")
    loaded = Network(tmp_path / "tcn.clpkg", engine=engine)
    assert [s.type for s in loaded.plan.steps][:2] == ["TemporalBlocks"] * 2
    close(loaded.infer({"x": x})["y"], ort_run(path, {"x": x})["y"])


def test_the_cli_fuses_where_asked_and_a_package_runs_as_compiled(tmp_path, capsys):
    path = str(gpu_peers.onnx_tcn(tmp_path / "tcn.onnx", 1, levels=2, length=50))
    common = ["-m", path, "-d", TEST_DEVICE, "--tuning", "off"]
    # by default a GPU fuses this launch-bound model, a CPU does not
    assert cli_main(["run", *common, "-pc"]) == 0
    assert ("TemporalBlocks" in capsys.readouterr().out) == (TEST_DEVICE != "CPU")
    assert cli_main(["run", *common, "-pc", "--no-fuse-temporal-blocks"]) == 0
    assert "TemporalBlocks" not in capsys.readouterr().out
    assert cli_main(["run", *common, "-pc", "--fuse-temporal-blocks"]) == 0
    assert "TemporalBlocks" in capsys.readouterr().out
    for flag, name in ((["--no-fuse-temporal-blocks"], "plain"),
                       (["--fuse-temporal-blocks"], "fused")):
        assert cli_main(["compile", *common, *flag, "-o", str(tmp_path / f"{name}.clpkg")]) == 0
    capsys.readouterr()
    # the package keeps what was compiled, whatever the option says when it runs
    assert cli_main(["run", "-m", str(tmp_path / "plain.clpkg"), "-d", TEST_DEVICE, "-pc",
                     "--fuse-temporal-blocks"]) == 0
    shown = capsys.readouterr()
    assert "TemporalBlocks" not in shown.out
    assert "plans run as compiled" in shown.err
    assert cli_main(["run", "-m", str(tmp_path / "fused.clpkg"), "-d", TEST_DEVICE,
                     "-pc"]) == 0
    assert "TemporalBlocks" in capsys.readouterr().out
    # the note names the option as it was given
    assert cli_main(["run", "-m", str(tmp_path / "fused.clpkg"), "-d", TEST_DEVICE,
                     "--no-fuse-temporal-blocks"]) == 0
    assert "note: --no-fuse-temporal-blocks: " in capsys.readouterr().err


def test_the_tuner_times_the_tiles_and_runs_the_fastest(tmp_path, test_device):
    """tuning "full" on this device times every tile candidate of each TemporalBlocks layer
    (ops/nn/temporal_block.py's tile_candidates) and runs the one it keeps."""
    from customlayers.runtime.device.cache import ProgramCache
    path = gpu_peers.onnx_tcn(tmp_path / "tcn.onnx", 2, levels=4, length=100)
    x = np.random.default_rng(9).standard_normal((2, 1, 100)).astype(np.float32)
    engine = Engine(test_device, cache=ProgramCache(tmp_path / "cache"))
    net = fused_network(path, engine, tuning="full")
    records = [r for f in (tmp_path / "cache" / "tuning").glob("*.json")
               for r in json.loads(f.read_text())["choices"].values()
               if r["type"] == "TemporalBlocks"]
    assert len(records) == 2                       # one per run of two blocks
    for record in records:
        assert len(record["times_us"]) >= 2
        assert all(name.startswith("tile_r") for name in record["times_us"])
        assert record["variant"] in record["times_us"]
    close(net.infer({"x": x})["y"], ort_run(path, {"x": x})["y"])


def test_gpu_peers_runs_the_tcn_unfused_and_fused_in_one_run(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["gpu_peers.py", "--device", TEST_DEVICE, "--only", "TCN",
                                      "--quick", "--runs", "1", "--temporal-blocks"])
    assert gpu_peers.main() == 0
    rows = {line.split("  ")[0]: line.split() for line in capsys.readouterr().out.splitlines()
            if line.startswith("TCN b")}
    assert list(rows) == [f"TCN b{b}{form}" for b in (1, 4) for form in ("", " unfused", " fused")]
    for batch in (1, 4):
        assert rows[f"TCN b{batch} fused"][6] == "5"            # launches: 4 runs and the head
        assert int(rows[f"TCN b{batch} unfused"][6]) > 5
        for form in ("unfused", "fused"):                       # against the default row
            assert float(rows[f"TCN b{batch} {form}"][-1]) < 1e-5
