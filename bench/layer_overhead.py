"""Launch overhead of a bound custom layer against raw pyopencl.

For a tiny tensor (where the launch cost is everything) and a large one, N launches are queued
back to back and followed by one finish, through:
  ours  BoundKernel.enqueue(queue, inputs, outputs) on pre-allocated buffers
  raw   cl.enqueue_nd_range_kernel on the same program's kernel, its arguments set once
The two are measured in one run, interleaved round by round (alternating which goes first), and
the median time per launch of each is printed with the median of the per-round ratios. Goal: ratio <= 1.2 on the tiny one.

    python bench/layer_overhead.py [--device CPU] [--rounds 31]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pyopencl as cl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from customlayers.jit.tensor import TensorDesc  # noqa: E402
from customlayers.runtime.device.device import Engine, select_device  # noqa: E402
from customlayers.runtime.layers.registry import Registry  # noqa: E402

RELU_XML = ROOT / "examples" / "layers" / "relu" / "relu.xml"
# (label, shape, launches per batch)
SIZES = [("tiny", (1, 1, 1, 16), 300), ("large", (1, 64, 256, 256), 3)]


def time_batch(enqueue, queue, n: int) -> float:
    """Seconds per launch for n launches queued back to back, then one finish."""
    queue.finish()
    start = time.perf_counter()
    for _ in range(n):
        enqueue()
    queue.finish()
    return (time.perf_counter() - start) / n


def measure(engine, registry, shape, n: int, rounds: int) -> tuple[float, float, float]:
    """(ours, raw) median seconds per launch, and the median of the per-round ratios: rounds
    are paired, so load from elsewhere on the machine hits both sides of a ratio alike."""
    ctx, queue = engine.context, engine.queue
    bound = registry.bind("ReLU", [TensorDesc(shape)], params={"negative_slope": "0.1"})
    mf = cl.mem_flags
    host = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    src = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=host)
    dst = cl.Buffer(ctx, mf.READ_WRITE, host.nbytes)
    ins, outs = [src], [dst]

    raw_kernel = cl.Kernel(bound.program, bound.spec.entry)
    raw_kernel.set_args(src, dst)
    gsize, lsize = bound.global_size, bound.local_size

    def ours():
        bound.enqueue(queue, ins, outs)

    def raw():
        cl.enqueue_nd_range_kernel(queue, raw_kernel, gsize, lsize)

    ours(), raw()
    queue.finish()                         # warm-up: first-launch costs out of the timing
    times = {"ours": [], "raw": []}
    for r in range(rounds):
        order = [("ours", ours), ("raw", raw)]
        if r % 2:
            order.reverse()
        for name, fn in order:
            times[name].append(time_batch(fn, queue, n))
    ratios = [o / r for o, r in zip(times["ours"], times["raw"])]
    return statistics.median(times["ours"]), statistics.median(times["raw"]), \
        statistics.median(ratios)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default=None, help="CPU, GPU or part of a name (default: best)")
    p.add_argument("--rounds", type=int, default=31, help="interleaved rounds (default 31)")
    args = p.parse_args(argv)
    engine = Engine(select_device(args.device))
    registry = Registry(engine)
    registry.load(RELU_XML)
    print(f"device: {engine.device.name.strip()}  kernel: ReLU example  "
          f"rounds: {args.rounds} (median)")
    print(f"{'size':6} {'shape':16} {'launches':>8} {'ours us':>9} {'raw us':>9} {'ratio':>6}")
    print(f"{'':6} {'':16} {'/round':>8} {'/launch':>9} {'/launch':>9} {'median':>6}")
    for label, shape, n in SIZES:
        ours, raw, ratio = measure(engine, registry, shape, n, args.rounds)
        print(f"{label:6} {'x'.join(map(str, shape)):16} {n:8d} {ours * 1e6:9.2f} "
              f"{raw * 1e6:9.2f} {ratio:6.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
