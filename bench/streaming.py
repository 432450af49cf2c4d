"""Streaming throughput of a small model (issue 10): Network.stream with nireq 1, 2, 4, 8
requests in flight, inputs and outputs in pageable numpy memory against pinned host memory
(host_tensor: ALLOC_HOST_PTR, mapped; the TCN notes' pinned-in / zero-copy-out experiment).
Every figure comes from this one run; the table gives frames per second and the ratio to
nireq 1 with pageable memory. Every configuration must give the same outputs.

    python bench/streaming.py [--device CPU|GPU] [--size 128] [--seconds 2]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from customlayers.api import Engine, Network  # noqa: E402
from pipeline import small_cnn  # noqa: E402

NIREQS = (1, 2, 4, 8)


def run(net: Network, frames: list, nireq: int, pinned: bool, seconds: float):
    """(frames per second, the outputs of the first round): one stream over the frames again
    and again for about `seconds`; its first round (requests made, memory pinned) is not
    timed."""
    state = {"start": None}

    def inputs():
        i = 0
        while state["start"] is None or time.perf_counter() - state["start"] < seconds:
            yield frames[i % len(frames)]
            i += 1

    first, count = [], 0
    # reuse_outputs: the timed frames are dropped at once, so pinned outputs skip the copy
    # that keeps a stream's results valid (the first round copies what it keeps)
    for i, out in enumerate(net.stream(inputs(), nireq=nireq, pinned=pinned,
                                       reuse_outputs=True)):
        if i < len(frames):
            first.append(out["y"].copy())          # reused outputs: valid until the next
            if i == len(frames) - 1:
                state["start"] = time.perf_counter()
        else:
            count += 1
    return count / (time.perf_counter() - state["start"]), first


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=None, help="CPU, GPU or part of a device name")
    ap.add_argument("--size", type=int, default=128, help="image side")
    ap.add_argument("--frames", type=int, default=32, help="frames per stream")
    ap.add_argument("--seconds", type=float, default=2.0, help="per configuration")
    args = ap.parse_args()
    engine = Engine(args.device)
    net = Network(small_cnn(args.size), None, engine)
    rng = np.random.default_rng(2)
    frames = [rng.standard_normal((1, 3, args.size, args.size)).astype(np.float32)
              for _ in range(args.frames)]
    print(f"device: {engine.device.name.strip()} ({engine.device.platform.name.strip()})")
    print(f"model: 3 conv on 1x3x{args.size}x{args.size} f32, streams of {args.frames} frames; "
          f"frames/s (ratio to nireq 1, pageable)")
    print(f"{'nireq':>6} {'pageable':>16} {'pinned':>16}")
    base = reference = None
    for nireq in NIREQS:
        cells = []
        for pinned in (False, True):
            fps, outs = run(net, frames, nireq, pinned, args.seconds)
            if reference is None:
                reference = outs
            elif any(not np.array_equal(a, b) for a, b in zip(outs, reference)):
                print(f"nireq {nireq} pinned={pinned}: outputs differ", file=sys.stderr)
                return 1
            base = base or fps
            cells.append(f"{fps:9.1f} ({fps / base:4.2f}x)")
        print(f"{nireq:>6} {cells[0]:>16} {cells[1]:>16}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
