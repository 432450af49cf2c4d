"""`customlayers benchmark -m model.xml [-c ...] [-niter N | -t SECONDS] [-nireq N]`"""
from __future__ import annotations

import math
import sys
import time

import numpy as np

from .model_args import add_model_options, load_network

# Each request holds its own device buffers for the whole model; more than this many in flight
# gains nothing on any device and can exhaust device memory before the first inference.
MAX_REQUESTS = 64


def add_parser(sub):
    p = sub.add_parser("benchmark", help="measure a model's latency and throughput",
                       description="Run a model many times with several requests in flight; "
                                   "report latency (median, p90, min, max) and throughput.")
    add_model_options(p)
    p.add_argument("-niter", type=int, default=None, help="number of inferences")
    p.add_argument("-t", "--time", type=float, default=None, help="seconds to run (default 10)")
    p.add_argument("-nireq", type=int, default=2, help=f"requests in flight at once (default 2, at most {MAX_REQUESTS})")
    p.add_argument("-pc", "--perf-counts", action="store_true",
                   help="also print per-layer device times")
    return p


def run(args) -> int:
    from . import UsageError
    from ..runtime import profile
    if args.nireq < 1:
        raise UsageError("-nireq must be at least 1")
    if args.nireq > MAX_REQUESTS:
        raise UsageError(f"-nireq must be at most {MAX_REQUESTS}, found {args.nireq}")
    if args.niter is not None and args.niter < 1:
        raise UsageError("-niter must be at least 1")
    if args.time is not None and not (math.isfinite(args.time) and args.time > 0):
        raise UsageError(f"-t must be a finite, positive number of seconds, not {args.time}")
    nireq = args.nireq
    capped = ""
    if args.niter is not None and nireq > args.niter:
        # a request beyond the number of inferences would never run; do not allocate it
        nireq = args.niter
        capped = f" (-nireq {args.nireq} capped at -niter {args.niter})"
    engine, net, arrays = load_network(args, profiling=args.perf_counts)
    shapes = {n: tuple(a.shape) for n, a in arrays.items()}
    requests = [net.create_request(shapes, arrays) for _ in range(nireq)]  # + shape inputs
    print(f"device: {engine.device.name.strip()}; {nireq} request(s) in flight{capped}",
          file=sys.stderr)
    requests[0].infer(arrays)                       # warm-up (first enqueue, lazy allocations)
    limit_iter = args.niter
    limit_time = args.time if args.time is not None else (None if args.niter else 10.0)
    latencies: list[float] = []
    started: dict[int, float] = {}
    runs_pc = []
    t0 = time.perf_counter()
    issued = 0
    done = 0

    def more() -> bool:
        if issued == 0:         # at least one, however short the time: the statistics need one
            return True
        if limit_iter is not None and issued >= limit_iter:
            return False
        if limit_time is not None and time.perf_counter() - t0 >= limit_time:
            return False
        return True

    for k, req in enumerate(requests):          # fill the pipeline
        if not more():
            break
        started[k] = time.perf_counter()
        req.start(arrays)
        issued += 1
    k = 0
    while done < issued:
        req = requests[k]
        if req.busy:
            req.wait()
            latencies.append(time.perf_counter() - started[k])
            done += 1
            if args.perf_counts:
                runs_pc.append(profile.collect(req))
            _progress(done, limit_iter, time.perf_counter() - t0, limit_time)
            if more():
                started[k] = time.perf_counter()
                req.start(arrays)
                issued += 1
        k = (k + 1) % len(requests)
    elapsed = time.perf_counter() - t0
    print(file=sys.stderr)
    lat = np.array(latencies) * 1e3
    print(f"count:      {len(lat)} inferences in {elapsed:.2f} s")
    print(f"latency:    median {np.median(lat):.3f} ms   p90 {np.percentile(lat, 90):.3f} ms   "
          f"min {lat.min():.3f} ms   max {lat.max():.3f} ms")
    print(f"throughput: {len(lat) / elapsed:.2f} inferences/s")
    if args.perf_counts and runs_pc:
        print()
        print(profile.format_table(profile.merge(runs_pc), runs=len(runs_pc)))
    return 0


def _progress(done: int, niter, elapsed: float, limit_time) -> None:
    if not sys.stderr.isatty():
        return
    frac = done / niter if niter else min(elapsed / limit_time, 1.0) if limit_time else 0
    bar = "#" * int(frac * 30)
    print(f"\r[{bar:<30}] {frac:4.0%} {done} done", end="", file=sys.stderr, flush=True)
