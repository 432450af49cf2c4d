"""`customlayers benchmark -m model.xml [-c ...] [-niter N | -t SECONDS] [-nireq N] [-hint ...]`

benchmark_app's options with their meaning: -niter, -t, -nireq, -hint latency|throughput|
cumulative_throughput|none (the default -nireq: 1, 4, 4, 2), -api sync|async (sync: one request
at a time), -progress, -inference_only, -latency_percentile, -pc, -pcsort, -b, -shape,
-data_shape; the others answer with what to use instead (benchmark_app_options.py).
"""
from __future__ import annotations

import math
import sys
import time

from .benchmark_app_options import (add_profile_options, by_time, perf_counts_wanted,
                                    str2bool, write_profiles)
from .benchmark_stats import BenchmarkResult, Progress, summary_lines
from .model_args import add_model_options, load_network
from .. import UsageError

# Each request holds its own device buffers for the whole model; more than this many in flight
# gains nothing on any device and can exhaust device memory before the first inference.
MAX_REQUESTS = 64
DEFAULT_REQUESTS = 2
# -hint -> the number of requests in flight when -nireq is not given
HINT_REQUESTS = {"latency": 1, "throughput": 4, "cumulative_throughput": 4,
                 "none": DEFAULT_REQUESTS}


def add_parser(sub):
    p = sub.add_parser("benchmark", help="measure a model's latency and throughput",
                       description="Run a model many times with several requests in flight; "
                                   "report the first inference, latency (average, median, "
                                   "percentiles, min, max) and throughput.")
    add_model_options(p, "benchmark")
    p.add_argument("-niter", type=int, default=None, help="number of inferences")
    p.add_argument("--stream", action="store_true",
                   help="a whole-window causal model (a TCN) run one time step at a time "
                        "(Network.streaming): per-step latency and steps per second, against "
                        "one inference of the whole window (-niter/-t count steps)")
    p.add_argument("-t", "--time", type=float, default=None, help="seconds to run (default 10)")
    p.add_argument("-nireq", type=int, default=None,
                   help=f"requests in flight at once (default {DEFAULT_REQUESTS}, or as -hint "
                        f"says; at most {MAX_REQUESTS})")
    p.add_argument("-hint", choices=tuple(HINT_REQUESTS), default=None,
                   help="benchmark_app's performance hint: the default -nireq (latency 1, "
                        "throughput and cumulative_throughput 4, none 2)")
    p.add_argument("-api", choices=("sync", "async"), default="async",
                   help="sync: one request at a time (-nireq 1); async (default): -nireq in "
                        "flight")
    p.add_argument("-progress", nargs="?", const=True, default=None, type=str2bool,
                   metavar="true|false",
                   help="a progress line on stderr (default: only when stderr is a terminal)")
    p.add_argument("-inference_only", nargs="?", const=True, default=True, type=str2bool,
                   metavar="true|false",
                   help="true (the only mode): inputs are filled once, before measuring; each "
                        "inference still copies them to the device")
    p.add_argument("-latency_percentile", type=int, default=None, metavar="1..100",
                   help="also report this latency percentile")
    add_profile_options(p)
    return p


def _requests_wanted(args) -> int:
    from .. import UsageError
    if args.api == "sync":
        if args.nireq not in (None, 1):
            raise UsageError(f"-api sync runs one request at a time; -nireq {args.nireq} "
                             f"needs -api async")
        return 1
    if args.nireq is not None:
        return args.nireq
    return HINT_REQUESTS.get(args.hint, DEFAULT_REQUESTS)


def _check(args) -> None:
    from .. import UsageError
    if args.nireq is not None and args.nireq < 1:
        raise UsageError("-nireq must be at least 1")
    if args.nireq is not None and args.nireq > MAX_REQUESTS:
        raise UsageError(f"-nireq must be at most {MAX_REQUESTS}, found {args.nireq}")
    if args.niter is not None and args.niter < 1:
        raise UsageError("-niter must be at least 1")
    if args.time is not None and not (math.isfinite(args.time) and args.time > 0):
        raise UsageError(f"-t must be a finite, positive number of seconds, not {args.time}")
    if args.latency_percentile is not None and not 1 <= args.latency_percentile <= 100:
        raise UsageError(f"-latency_percentile must be 1 to 100, found "
                         f"{args.latency_percentile}")
    if not args.inference_only:
        raise UsageError("-inference_only false: inputs are always filled once, before "
                         "measuring (as -inference_only true); each inference copies them to "
                         "the device, and that copy is measured")


def run(args) -> int:
    from ...runtime.observe import profile
    from ...runtime.execute.stream import run_stream
    _check(args)
    perf_counts = perf_counts_wanted(args)
    nireq = _requests_wanted(args)
    capped = ""
    if args.niter is not None and nireq > args.niter:
        # a request beyond the number of inferences would never run; do not allocate it
        capped = f" (-nireq {nireq} capped at -niter {args.niter})"
        nireq = args.niter
    if args.stream and perf_counts:
        raise UsageError("--stream runs one step kernel per step: -pc profiles the "
                         "whole-window model's layers; benchmark without --stream for them")
    engine, net, arrays = load_network(args, profiling=perf_counts)
    if args.stream:
        from .causal_steps import benchmark_steps
        print(f"device: {engine.device.name.strip()}", file=sys.stderr)
        if args.nireq not in (None, 1):
            print(f"note: -nireq {args.nireq}: a stream runs one step at a time (its state "
                  f"goes from each step to the next); benchmarked with one", file=sys.stderr)
        elif args.hint in ("throughput", "cumulative_throughput"):
            print(f"note: -hint {args.hint}: a stream runs one step at a time (its state "
                  f"goes from each step to the next); benchmarked for latency",
                  file=sys.stderr)
        print("\n".join(benchmark_steps(net, arrays, args.niter, args.time,
                                        args.latency_percentile)))
        return 0
    print(f"device: {engine.device.name.strip()}; {nireq} request(s) in flight{capped}",
          file=sys.stderr)
    shapes = {n: tuple(a.shape) for n, a in arrays.items()}
    requests = [net.create_request(shapes, arrays) for _ in range(nireq)]  # + shape inputs
    t_first = time.perf_counter()
    requests[0].infer(arrays)           # warm-up (first enqueue, lazy allocations)
    first_ms = (time.perf_counter() - t_first) * 1e3
    limit_iter = args.niter
    limit_time = args.time if args.time is not None else (None if args.niter else 10.0)
    progress = Progress(args.progress, limit_iter, limit_time)
    from ...runtime.observe.trace import TraceRecorder
    recorder = TraceRecorder(engine.device.name.strip())
    t0 = time.perf_counter()

    def inputs():
        """The same arrays until -niter or -t says stop (at least one: the statistics need
        one), taken by the stream as requests free up."""
        issued = 0
        while issued == 0 or (
                (limit_iter is None or issued < limit_iter) and
                (limit_time is None or time.perf_counter() - t0 < limit_time)):
            issued += 1
            yield arrays

    latencies: list[float] = []
    runs_pc = []
    # the same machinery as Network.stream: up to nireq requests in flight, in input order
    for result in run_stream(net, inputs(), nireq, requests=requests):
        latencies.append(result.latency_ms)
        if perf_counts:
            runs_pc.append(profile.collect(result.request))
            recorder.add(result.request)
        progress.update(len(latencies), time.perf_counter() - t0)
    elapsed = time.perf_counter() - t0
    progress.close()
    result = BenchmarkResult(first_ms, latencies, elapsed, batch=args.batch)
    print("\n".join(summary_lines(result, args.latency_percentile)))
    if perf_counts and runs_pc:
        print()
        rows = profile.merge(runs_pc)
        print(profile.format_table(rows, runs=len(runs_pc), by_time=by_time(args)))
        write_profiles(args, rows, len(runs_pc), recorder, engine.device.name.strip())
    return 0
