"""Where a light model's time goes on a CPU device, by layer class, ours against OpenVINO CPU:
each side's per-layer times (our OpenCL profiling events; OpenVINO's PERF_COUNT) summed by
op type and window (Convolution 1x1, 3x3, ...), with the GFLOP/s of each class and its
percentage of the device's fp32 peak (bench/models.py's count and peak). Profiled times are
sums over layers, not the wall time: OpenVINO's with PERF_COUNT on can exceed its wall time,
so compare shares and GFLOP/s, and take ratios of whole models from bench/models.py.

    python bench/cpu_layers.py [--models resnet50,inception_v1] [--runs 5] [--device CPU]
"""
from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from customlayers.graph.load import read_model  # noqa: E402
from customlayers.runtime.compile.network import Network  # noqa: E402
from customlayers.runtime.device.device import Engine  # noqa: E402
from customlayers.runtime.observe.profile import collect, merge  # noqa: E402
import models as light  # noqa: E402  (tests/models.py: the light models)


def _bench_models():
    """bench/models.py (its FLOP count and peak), by path: `models` is tests/models.py."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("bench_models", ROOT / "bench" / "models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_BENCH = _bench_models()
step_flops, device_peak_gflops = _BENCH.step_flops, _BENCH.device_peak_gflops


def _window(shape) -> str:
    return f" {shape[-2]}x{shape[-1]}" if len(shape) >= 4 else ""


def ours_by_class(name: str, engine: Engine, runs: int):
    """{class: [ms, GFLOP]} from profiling events, and the wall time (median of `runs`)."""
    net = Network(read_model(light.light_ir(name)), None, engine, profiling=True)
    x = np.random.default_rng(0).standard_normal(
        net.plan.descs[net.plan.inputs[0][1]].shape).astype(np.float32)
    req, feed = net.create_request(), {net.plan.inputs[0][0]: x}
    for _ in range(2):
        req.infer(feed)
    rows, walls = [], []
    for _ in range(runs):
        t = time.perf_counter()
        req.infer(feed)
        walls.append(time.perf_counter() - t)
        rows.append(collect(req))
    steps = {s.name: s for s in net.plan.steps}
    classes: dict = collections.defaultdict(lambda: [0.0, 0.0])
    for r in merge(rows):
        step = steps[r.name]
        kind = r.type.split("+")[0]
        if kind in ("Convolution", "GroupConvolution") and len(step.input_descs) > 1:
            kind += _window(step.input_descs[1].shape)
        classes[kind][0] += r.ns / runs / 1e6
        classes[kind][1] += step_flops(step) * 1e-9
    return classes, statistics.median(walls) * 1e3


def openvino_by_class(name: str, runs: int):
    """{class: ms} from OpenVINO CPU's per-node PERF_COUNT times (medians over `runs`)."""
    import openvino as ov
    core = ov.Core()
    model = core.read_model(str(light.light_ir(name)))
    windows = {op.get_friendly_name(): _window(list(op.input_value(1).get_partial_shape()))
               for op in model.get_ordered_ops()
               if op.get_type_name() in ("Convolution", "GroupConvolution")}
    compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32",
                                                 "PERFORMANCE_HINT": "LATENCY",
                                                 "PERF_COUNT": True})
    req = compiled.create_infer_request()
    x = np.random.default_rng(0).standard_normal(tuple(compiled.inputs[0].shape)).astype(
        np.float32)
    per_node: dict = collections.defaultdict(list)
    for i in range(runs + 2):
        req.infer({0: x})
        if i >= 2:
            for p in req.get_profiling_info():
                per_node[(p.node_type + windows.get(p.node_name, ""), p.node_name)].append(
                    p.real_time.total_seconds() * 1e3)
    classes: dict = collections.defaultdict(float)
    for (kind, _), times in per_node.items():
        classes[kind] += statistics.median(times)
    return classes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--device", default="CPU")
    ap.add_argument("--models", default="resnet50")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    engine = Engine(args.device)
    peak = device_peak_gflops(engine.device)
    print(f"device: {engine.device.name.strip()}; fp32 peak {peak:.0f} GFLOP/s")
    for name in args.models.split(","):
        ours, wall = ours_by_class(name, engine, args.runs)
        try:
            theirs = openvino_by_class(name, args.runs)
        except ImportError:
            theirs = {}
        print(f"\n{name}: our wall {wall:.2f} ms, our kernels {sum(v[0] for v in ours.values()):.2f}"
              f" ms; OpenVINO's profiled layers {sum(theirs.values()):.2f} ms")
        print(f"  {'class':<24} {'ours ms':>8} {'GFLOP':>6} {'GFLOP/s':>8} {'% peak':>7} "
              f"{'OV ms':>7} {'OV GF/s':>8}")
        for kind, (ms, gflop) in sorted(ours.items(), key=lambda kv: -kv[1][0]):
            if ms < 0.01:
                continue
            ov_ms = theirs.get(kind.replace("GroupConvolution", "Convolution"), 0.0)
            rate = gflop / ms * 1e3 if ms and gflop else 0.0
            ov_rate = f"{gflop / ov_ms * 1e3:.0f}" if ov_ms and gflop else "-"
            print(f"  {kind:<24} {ms:>8.2f} {gflop:>6.2f} {rate:>8.0f} {rate / peak:>7.0%} "
                  f"{(f'{ov_ms:.2f}' if ov_ms else '-'):>7} {ov_rate:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
