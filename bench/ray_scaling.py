"""Throughput of a model with custom layers through Ray Data, with 1 and 2 actors, and the
scaling efficiency, measured in one run.

    python bench/ray_scaling.py [--rows 4096] [--batch-size 32] [--model demo]
    python bench/ray_scaling.py --gpu --rows 65536      # on a machine with 2 GPUs

CPU (PoCL): the node's cores are split between the actors: 1 actor with half the cores, 2
actors with half each (so 2 actors have twice the cores: the ideal is 2x), and, for reference, 1
actor with every core (the same cores as 2 actors, in one process). Each actor asks Ray for its
cores (num_cpus) and the predictor caps its PoCL to that many threads.
GPU (--gpu): 1 actor on 1 GPU, then 2 actors with one GPU each (num_gpus=1); the report lists
which device each actor ran on (name and PCI bus), to show that the two did not share one.

Throughput is the steady rate: rows per second while every actor is working, from batch start
and end times stamped inside the actors (the actors' start and their program builds are left
out; end-to-end figures, which include them and Ray's scheduling, are printed too). A first,
untimed run fills the program cache, so every timed actor reads its programs from disk, as in a
warm cluster.
Efficiency = throughput(2 actors) / (2 x throughput(1 actor)).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from customlayers.integrations.ray import CustomLayersPredictor  # noqa: E402

LAYERS = ROOT / "examples" / "layers"
MODELS = {
    # 1x3x32x32 -> Conv, ReLU, GRN (custom), Conv, ReLU, ReorgYolo (custom), MaxPool, MatMul,
    # SoftMax: a fixed batch of 1, so rows run one by one with requests in flight
    "demo": (ROOT / "examples" / "models" / "demo_cnn.xml",
             [LAYERS / "grn" / "grn.xml", LAYERS / "reorg" / "reorg.xml",
              LAYERS / "relu" / "relu.xml"]),
    # Nx4x6x8 -> ReorgYolo (custom) -> Sigmoid: a dynamic batch, a batch is one inference
    "reorg": (ROOT / "examples" / "models" / "reorg_dynamic.onnx",
              [LAYERS / "reorg" / "reorg.xml"]),
}


class TimedPredictor(CustomLayersPredictor):
    """Stamps each batch with its start and end (wall clock: one node, one clock), the
    actor's pid and its device, so the driver can tell steady work from start-up."""

    def __call__(self, batch):
        start = time.time()
        out = super().__call__(batch)
        end = time.time()
        rows = len(next(iter(out.values())))
        info = self.device_info
        out = {"t0": np.full(rows, start), "t1": np.full(rows, end),
               "pid": np.full(rows, os.getpid()),
               "device": np.full(rows, f"{info['name']} (PCI bus "
                                       f"{info.get('pci_bus_id', '-')}, "
                                       f"{info['compute_units']} CU)")}
        return out


def input_shape(model: Path, configs) -> tuple:
    """One row's shape: the model's input without its batch dimension (4 for an open one).
    Read without a device: the driver leaves the devices to the actors."""
    from customlayers.graph.load import read_model
    from customlayers.runtime.layers.registry import Registry
    registry = Registry()
    registry.load(*configs)
    (param,) = read_model(str(model), custom_shapes=registry.output_shapes).parameters
    return tuple(4 if d is None else d for d in param.outputs[0].shape[1:])


def run(ray, rows: np.ndarray, actors: int, kwargs: dict, batch_size: int, resources: dict):
    """One Ray Data pass; (steady rows/s, end-to-end rows/s, {pid: device})."""
    blocks = max(4 * actors, len(rows) // (4 * batch_size))
    ds = ray.data.from_numpy(np.array_split(rows, blocks))
    start = time.time()
    out = ds.map_batches(TimedPredictor, fn_constructor_kwargs=kwargs, batch_size=batch_size,
                         compute=ray.data.ActorPoolStrategy(size=actors), **resources)
    parts = list(out.iter_batches(batch_size=None, batch_format="numpy"))
    end = time.time()
    t0 = np.concatenate([p["t0"] for p in parts])
    t1 = np.concatenate([p["t1"] for p in parts])
    if len(t0) != len(rows):
        raise RuntimeError(f"{len(t0)} rows came back of {len(rows)}")
    pids = np.concatenate([p["pid"] for p in parts])
    devices = {}
    for p in parts:
        for pid, dev in zip(p["pid"], p["device"]):
            devices[int(pid)] = str(dev)
    return steady_rate(t0, t1, pids), len(rows) / (end - start), devices


def steady_rate(t0: np.ndarray, t1: np.ndarray, pids: np.ndarray) -> float:
    """Rows per second while every actor was working: from the last actor's first batch to the
    first actor's last batch (actors start at different times; counting from the first start
    would charge one actor's start-up to the pool). Each batch counts for the part of its
    duration inside that window."""
    actors = np.unique(pids)
    lo = max(t0[pids == a].min() for a in actors)
    hi = min(t1[pids == a].max() for a in actors)
    if hi <= lo:            # the actors never overlapped: the whole span
        return len(t0) / (t1.max() - t0.min())
    inside = np.clip(np.minimum(t1, hi) - np.maximum(t0, lo), 0, None)
    return float((inside / np.maximum(t1 - t0, 1e-9)).sum() / (hi - lo))


def gpu_count() -> int:
    """OpenCL GPUs of this node (what Ray is told to hand out)."""
    from customlayers.runtime.device.device import list_devices
    import pyopencl as cl
    return sum(1 for d in list_devices() if d.type & cl.device_type.GPU)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--model", choices=sorted(MODELS), default="demo")
    parser.add_argument("--gpu", action="store_true", help="1 and 2 GPUs (one per actor)")
    parser.add_argument("--cpus", type=int, default=os.cpu_count(),
                        help="cores Ray may use (default: all)")
    parser.add_argument("--nireq", type=int, default=4, help="requests in flight per actor")
    args = parser.parse_args(argv)

    import ray
    model, configs = MODELS[args.model]
    configs = [str(c) for c in configs]
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((args.rows, *input_shape(model, configs))).astype(np.float32)
    gpus = gpu_count() if args.gpu else 0
    if args.gpu and gpus < 2:
        print(f"--gpu needs 2 GPUs; OpenCL lists {gpus}", file=sys.stderr)
        return 2
    cache = tempfile.mkdtemp(prefix="ray-scaling-cache-")
    kwargs = dict(model=str(model), configs=configs, cache_dir=cache, nireq=args.nireq,
                  device="GPU" if args.gpu else "CPU")
    if args.gpu:
        cases = [("1 actor, 1 GPU", 1, {"num_gpus": 1, "num_cpus": 1}),
                 ("2 actors, 1 GPU each", 2, {"num_gpus": 1, "num_cpus": 1})]
    else:
        half = max(1, args.cpus // 2)
        cases = [(f"1 actor x {half} thread(s)", 1, {"num_cpus": half}),
                 (f"2 actors x {half} thread(s)", 2, {"num_cpus": half}),
                 (f"1 actor x {args.cpus} thread(s) (reference)", 1, {"num_cpus": args.cpus})]
    ray.init(num_cpus=args.cpus, num_gpus=gpus, include_dashboard=False,
             object_store_memory=max(200 << 20, 4 * rows.nbytes), log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        # untimed: fills the program cache (and starts Ray's workers)
        run(ray, rows[:args.batch_size * 2], 1, kwargs, args.batch_size, cases[0][2])
        print(f"model {args.model} ({model.name}), {args.rows} rows of {list(rows.shape[1:])}, "
              f"batches of {args.batch_size}, {args.nireq} requests in flight per actor, "
              f"{'GPU' if args.gpu else f'PoCL on {args.cpus} cores'}")
        print(f"{'case':40} {'steady rows/s':>14} {'end-to-end rows/s':>18}  devices")
        results = {}
        for label, actors, resources in cases:
            steady, total, devices = run(ray, rows, actors, kwargs, args.batch_size, resources)
            results[label] = steady
            used = "; ".join(sorted(set(devices.values())))
            print(f"{label:40} {steady:14.1f} {total:18.1f}  {len(devices)} actor(s): {used}")
        one, two = results[cases[0][0]], results[cases[1][0]]
        print(f"scaling 1 -> 2 actors: {two / one:.2f}x; efficiency {two / (2 * one):.0%}")
        if len(cases) > 2:
            ref = results[cases[2][0]]
            print(f"2 actors against 1 actor on the same {args.cpus} cores: {two / ref:.2f}x")
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
