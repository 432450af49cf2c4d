"""The seed's TCN streamed one time step at a time (issue 21 points 5-6), as ratios in one run.

In one run:

  per N in (1, 64): the full-window network's inference (ours, 784 steps, host arrays in and
  out) against one step of the stream (Network.streaming: one kernel launch per step, the frame
  from the host, the outputs read back), and the ratio; the stream pipelined (step_async, every
  step enqueued before the first wait) as steps per second; the host's own cost of a step (the
  enqueues, without the wait);
  the seed's pipeline figure: 784 steps of one sequence (N = 1) streamed end to end, every
  frame from the host, the per-step latency p50 / p99, and the last step's output against the
  full-window network's.

    python bench/streaming_tcn.py [--device CPU|GPU] [--steps 784] [--runs 200] [--rounds 5]
        [--local-size 256] [--sweep 32,64,128,256,512,1024]

The model is written without weight norm (gpu_peers.onnx_tcn's default): the stream is the
same either way (the conversion folds it), but the full-window network runs weight norm's
constant arithmetic at every inference (7x slower on PoCL), which would flatter the ratio.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyopencl as cl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import gpu_peers  # noqa: E402
from customlayers.api import Engine, Network  # noqa: E402
from customlayers.ops.stream.step_kernel import INLINE_FLOATS  # noqa: E402
from customlayers.runtime.device.device import describe_device  # noqa: E402
from customlayers.runtime.streaming.causal_stream import CausalStream  # noqa: E402


def median_us(times) -> float:
    return statistics.median(times) * 1e6


def percentile_us(times, q) -> float:
    return float(np.percentile(np.asarray(times), q)) * 1e6


def timed_steps(stream, frames) -> list[float]:
    times = []
    for f in frames:
        t = time.perf_counter()
        stream.step(f)
        times.append(time.perf_counter() - t)
    return times


def full_window(net, x, runs) -> float:
    for _ in range(3):
        net.infer(x)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        net.infer(x)
        times.append(time.perf_counter() - t)
    return median_us(times)


def bench_batch(engine, workdir: Path, n: int, steps: int, runs: int, local_size,
                rounds: int = 1) -> dict:
    path = gpu_peers.onnx_tcn(workdir / f"tcn_b{n}.onnx", n, length=steps)
    net = Network(path, engine=engine)
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, 1, steps)).astype(np.float32)
    window_us = full_window(net, x, max(runs // 10, 5))
    stream = net.streaming(local_size=local_size)
    frames = [np.ascontiguousarray(x[:, :, t]) for t in range(steps)]
    last = None
    for f in frames:                                # the whole sequence once: warm, checked
        last = stream.step(f)
    want = net.infer(x)
    name = next(iter(want))
    err = float(np.max(np.abs(last[name] - want[name])) / np.max(np.abs(want[name])))
    # the step's wall time: the median of each round's median (a GPU machine's host moved a
    # single round's median by 10 us from one run to the next), and their range
    medians = []
    for _ in range(rounds):
        stream.reset()
        medians.append(median_us(timed_steps(stream, frames[:runs])))
    step_us = statistics.median(medians)
    stream.reset()
    t = time.perf_counter()
    pending = [stream.step_async(f) for f in frames[:runs]]
    host_us = (time.perf_counter() - t) / runs * 1e6
    pending[-1].wait()
    pipelined = runs / (time.perf_counter() - t)
    return {"n": n, "window_us": window_us, "step_us": step_us, "host_us": host_us,
            "step_range": (min(medians), max(medians)),
            "pipelined_steps_s": pipelined, "last_step_rel_err": err,
            "local_size": stream.local_size, "uploads": int(n > INLINE_FLOATS),
            "kernel_us": kernel_us(engine, stream, frames[:runs])}


def kernel_us(engine, stream, frames) -> float:
    """The step kernel's own time (the median of its profiled launches), the same program on
    a profiling queue of the same device."""
    queue = cl.CommandQueue(engine.context, engine.device,
                            properties=cl.command_queue_properties.PROFILING_ENABLE)
    profiled = CausalStream(Engine.from_queue(queue, cache=engine.cache), stream.program,
                            local_size=stream.local_size)
    times = []
    for f in frames:
        profiled.step(f)
        e = profiled.kernel_event
        times.append((e.profile.end - e.profile.start) * 1e-9)
    return median_us(times)


def end_to_end(engine, workdir: Path, steps: int, local_size) -> dict:
    path = gpu_peers.onnx_tcn(workdir / "tcn_b1.onnx", 1, length=steps)
    net = Network(path, engine=engine)
    stream = net.streaming(local_size=local_size)
    digit = np.random.default_rng(7).standard_normal((1, 1, steps)).astype(np.float32)
    for t in range(20):                                # warm (built, first launches)
        stream.step(np.ascontiguousarray(digit[:, :, t]))
    stream.reset()
    start = time.perf_counter()
    times = timed_steps(stream, [np.ascontiguousarray(digit[:, :, t]) for t in range(steps)])
    total = time.perf_counter() - start
    return {"steps": steps, "total_ms": total * 1e3, "p50_us": percentile_us(times, 50),
            "p99_us": percentile_us(times, 99), "max_us": max(times) * 1e6}, stream.program


def sweep(engine, program, sizes, runs) -> None:
    """Step wall time and kernel time per local size, N = 1 and 64 (the program of the N = 1
    network; N is the launch's), to pick a device's default."""
    print(f"\n{'local':>6} {'N':>3} {'step us':>9} {'kernel us':>10}")
    rng = np.random.default_rng(3)
    for size in sizes:
        if size > engine.device.max_work_group_size:
            continue
        for n in (1, 64):
            frames = list(rng.standard_normal((runs, n, 1)).astype(np.float32))
            stream = CausalStream(engine, program, local_size=size)
            timed_steps(stream, frames[:10])
            step = median_us(timed_steps(stream, frames))
            print(f"{size:>6} {n:>3} {step:>9.1f} {kernel_us(engine, stream, frames):>10.1f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="CPU, GPU, or a device name")
    ap.add_argument("--steps", type=int, default=gpu_peers.TCN_LENGTH)
    ap.add_argument("--runs", type=int, default=200, help="steps timed per N and round")
    ap.add_argument("--rounds", type=int, default=5,
                    help="rounds of --runs steps; the step's figure: the median of their medians")
    ap.add_argument("--local-size", type=int, default=None,
                    help="the step kernel's work-group size (default: chosen for the device)")
    ap.add_argument("--sweep", default="",
                    help="local sizes to time the step at, e.g. 32,64,128,256,512,1024")
    args = ap.parse_args(argv)
    engine = Engine(args.device)
    info = describe_device(engine.device)
    print(f"device: {info['name']} ({info['platform']}, {info['type']}, driver "
          f"{info['driver']})")
    print(f"model: the seed's TCN (gpu_peers.onnx_tcn: 8 blocks of 25 channels, kernel 7, "
          f"dilations 1..128), {args.steps} steps")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        rows = [bench_batch(engine, work, n, args.steps, min(args.runs, args.steps),
                            args.local_size, max(args.rounds, 1)) for n in (1, 64)]
        e2e, program = end_to_end(engine, work, args.steps, args.local_size)
    print("\nwindow: the full-window network's inference (ours); step: one step of the stream, "
          "wall, frame from the host and outputs read back (the median of the rounds' medians; "
          "range: the lowest and highest of them); kernel: the step kernel's profiled "
          "time; host: the enqueues of a step (step_async); commands per step: uploads + 1 "
          "launch + 1 read-back")
    print(f"\n{'N':>3} {'window us':>10} {'step us':>9} {'range':>13} {'ratio':>7} "
          f"{'kernel us':>10} {'host us':>8} {'commands':>9} {'pipelined steps/s':>18} "
          f"{'local':>6} {'last step rel err':>18}")
    for r in rows:
        low, high = r["step_range"]
        print(f"{r['n']:>3} {r['window_us']:>10.1f} {r['step_us']:>9.1f} "
              f"{f'{low:.1f}-{high:.1f}':>13} "
              f"{r['window_us'] / r['step_us']:>6.1f}x {r['kernel_us']:>10.1f} "
              f"{r['host_us']:>8.1f} {r['uploads'] + 2:>9} "
              f"{r['pipelined_steps_s']:>18.0f} {r['local_size']:>6} "
              f"{r['last_step_rel_err']:>18.2e}")
    print(f"\nend to end, N = 1: {e2e['steps']} steps in {e2e['total_ms']:.1f} ms, per step "
          f"p50 {e2e['p50_us']:.1f} us, p99 {e2e['p99_us']:.1f} us, max {e2e['max_us']:.1f} us")
    if args.sweep:
        sweep(engine, program, [int(v) for v in args.sweep.split(",")],
              min(args.runs, args.steps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
