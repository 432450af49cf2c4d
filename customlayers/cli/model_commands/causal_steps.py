"""`run --stream` and `benchmark --stream` on a whole-window causal model (no ReadValue/Assign):
the model becomes a step (Network.streaming, runtime/streaming/) and the time axis of its input,
the last, is walked one step at a time.

    run -m tcn.onnx --stream -i seq.npy -o steps.npy   seq [N, C, T]: T steps of [N, C]; -o:
                                                        each output's steps on a new first axis
    benchmark -m tcn.onnx --stream [-niter K | -t S]   per-step latency and steps per second,
                                                        against one run of the whole window
"""
from __future__ import annotations

import sys
import time

import numpy as np

from .. import UsageError
from ..common import warn_if_not_finite
from .benchmark_stats import duration_text


def open_stream(net, arrays: dict):
    """(the stream, its input's whole-window array [N, C, T]) for the model's one input."""
    stream = net.streaming(axis=-1)
    x = arrays[stream.input_name]
    if x.ndim != 3:
        raise UsageError(f"--stream: input '{stream.input_name}' has shape {list(x.shape)}; a "
                         f"streamed model takes [N, C, T] with the steps on its last axis")
    if x.shape[1] != stream.input_channels:
        raise UsageError(f"--stream: input '{stream.input_name}' has {x.shape[1]} channels; the "
                         f"model takes {stream.input_channels}")
    return stream, np.ascontiguousarray(x, np.float32)


def run_steps(net, arrays: dict, summarize) -> dict[str, np.ndarray]:
    """Every step of the input's time axis through the stream; each output's steps stacked on
    a new first axis. Prints the last step's outputs and the count."""
    stream, x = open_stream(net, arrays)
    outputs = [stream.step(x[:, :, t]) for t in range(x.shape[2])]
    for name, arr in outputs[-1].items():
        print(f"step {len(outputs) - 1}: {summarize(name, arr)}")
    print(f"{len(outputs)} step(s) of {x.shape[0]} stream(s), one kernel launch each "
          f"(Network.streaming)", file=sys.stderr)
    stacked = {name: np.stack([o[name] for o in outputs]) for name in outputs[0]}
    warn_if_not_finite(stacked, "the steps'", {stream.input_name: x})
    return stacked


def benchmark_steps(net, arrays: dict, niter: int | None, seconds: float | None,
                    percentile: int | None) -> list[str]:
    """Per-step latency (a step: the frame in, the outputs read back) over -niter steps or -t
    seconds, and one whole-window inference for comparison; the report's lines."""
    stream, x = open_stream(net, arrays)
    steps = x.shape[2]
    t_first = time.perf_counter()
    stream.step(x[:, :, 0])
    first_ms = (time.perf_counter() - t_first) * 1e3
    limit_time = seconds if seconds is not None else (None if niter else 10.0)
    latencies = []
    t0 = time.perf_counter()
    while not latencies or ((niter is None or len(latencies) < niter) and
                            (limit_time is None or time.perf_counter() - t0 < limit_time)):
        t = len(latencies) + 1
        start = time.perf_counter()
        stream.step(x[:, :, t % steps])
        latencies.append((time.perf_counter() - start) * 1e3)
    elapsed = time.perf_counter() - t0
    net.infer(arrays)                       # the window's plan compiled and run once
    window, spent = [], 0.0                 # 3 to 20 runs, about half a second of them
    while len(window) < 3 or (len(window) < 20 and spent < 0.5):
        start = time.perf_counter()
        net.infer(arrays)
        seconds = time.perf_counter() - start
        window.append(seconds * 1e3)
        spent += seconds
    ms = np.asarray(latencies)
    p = percentile or 50
    window_ms = float(np.median(window))
    return [f"streamed: {x.shape[0]} stream(s), one step = one kernel launch",
            f"first step:       {first_ms:.3f} ms (the step kernel built before it)",
            f"steps:            {len(ms)} in {duration_text(elapsed)}",
            f"per step:         median {np.median(ms):.4f} ms, "
            + (f"p{p} {np.percentile(ms, p):.4f} ms, " if p != 50 else "")
            + f"p99 {np.percentile(ms, 99):.4f} ms, min {ms.min():.4f} ms",
            f"throughput:       {len(ms) / elapsed:.1f} steps/s",
            f"whole window:     {window_ms:.3f} ms per inference of {steps} steps (median of "
            f"{len(window)}): {window_ms / float(np.median(ms)):.1f}x a step"]
