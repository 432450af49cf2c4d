"""The summary `benchmark` prints: benchmark_app's figures (first inference, count, duration,
latency average, median, min, max and percentiles, throughput), and its progress line."""
from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

PERCENTILES = (90, 95, 99)


@dataclass
class BenchmarkResult:
    first_ms: float                # the first inference (lazy allocations, first enqueue)
    latencies_ms: list[float]      # each measured inference, from its start to its outputs
    seconds: float                 # the measured run, wall clock
    batch: int | None = None       # -b: frames per inference, for frames/s


def duration_text(seconds: float) -> str:
    """A run's wall time with the digits it needs: a 20-inference run of a small model takes
    milliseconds, which two decimals of a second would print as 0.00 s."""
    if seconds >= 1.0:
        return f"{seconds:.2f} s"
    return f"{seconds * 1e3:.4g} ms"


def summary_lines(r: BenchmarkResult, extra_percentile: int | None = None) -> list[str]:
    lat = np.asarray(r.latencies_ms, dtype=np.float64)
    count = len(lat)
    fps = count / r.seconds if r.seconds > 0 else float("inf")
    more = [f"average {lat.mean():.3f} ms"]
    shown = set(PERCENTILES) | {50, 90}
    for p in PERCENTILES[1:] + ((extra_percentile,) if extra_percentile not in shown and
                                extra_percentile is not None else ()):
        more.append(f"p{p} {np.percentile(lat, p):.3f} ms")
    lines = [
        f"first inference: {r.first_ms:.3f} ms (not counted below)",
        f"count:      {count} inferences in {duration_text(r.seconds)}",
        f"latency:    median {np.median(lat):.3f} ms   p90 {np.percentile(lat, 90):.3f} ms   "
        f"min {lat.min():.3f} ms   max {lat.max():.3f} ms",
        f"            {'   '.join(more)}",
        f"throughput: {fps:.2f} inferences/s (FPS)"
        + (f", {fps * r.batch:.2f} frames/s at batch {r.batch}" if r.batch else ""),
    ]
    return lines


class Progress:
    """A one-line progress bar on stderr, redrawn in place: on a terminal, or when asked for
    (-progress). Never on stdout: the summary there stays clean for scripts."""

    def __init__(self, wanted: bool | None, niter: int | None, seconds: float | None):
        self.on = sys.stderr.isatty() if wanted is None else wanted
        self.niter = niter
        self.seconds = seconds
        self.drawn = False

    def update(self, done: int, elapsed: float) -> None:
        if not self.on:
            return
        if self.niter:
            frac = done / self.niter
        elif self.seconds:
            frac = min(elapsed / self.seconds, 1.0)
        else:
            frac = 0.0
        bar = "#" * int(frac * 30)
        print(f"\r[{bar:<30}] {frac:4.0%} {done} done", end="", file=sys.stderr, flush=True)
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            print(file=sys.stderr)
