"""Building a network's programs in parallel: pyopencl releases the GIL in clBuildProgram, and
drivers compile independent programs on as many threads as they are given (a cold ResNet-50 is
dozens of programs). Each distinct (source, options) is built once; a failed build comes back
as its exception, so the caller raises the first in its own order (the layer a sequential
build would have named).

warm_driver_cache: NVIDIA's driver compiles a binary's PTX to machine code about 0.1 s a
program and one program at a time in a process, whatever the threads (an H200, ResNet-50's 28
programs: 2.84 s on one thread, 2.54 s on eight), but keeps the result in a compiled-code cache
on disk that every process reads. Child processes that each load a share of the binaries fill
that cache in parallel; the caller then loads every binary from it. Run as
`python -m customlayers.runtime.device.parallel_build JOB.json`, this module is such a child."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterable, Sequence

from ...errors import CustomLayersError

# more threads than this gain nothing on the drivers we know and multiply their memory use
MAX_THREADS = 8


def build_programs(engine, wanted: Iterable[tuple]) -> dict[tuple, object]:
    """{(source, options): program, or the CustomLayersError its build raised} for `wanted`:
    (source, options, line_map, label) tuples."""
    unique: dict[tuple, tuple] = {}
    for source, options, line_map, label in wanted:
        unique.setdefault((source, options), (line_map, label))
    if not unique:
        return {}

    def build(key):
        line_map, label = unique[key]
        try:
            return engine.cache.build(engine.context, engine.device, key[0], key[1],
                                      line_map=line_map, label=label)
        except CustomLayersError as e:
            return e

    threads = min(MAX_THREADS, os.cpu_count() or 1, len(unique))
    if threads <= 1:
        return {key: build(key) for key in unique}
    with ThreadPoolExecutor(threads, thread_name_prefix="cl-build") as pool:
        futures = {key: pool.submit(build, key) for key in unique}
        return {key: future.result() for key, future in futures.items()}


def device_position(device) -> tuple[int, int] | None:
    """(platform index, device index) of `device` as OpenCL lists them: a child process of
    the same environment (CUDA_VISIBLE_DEVICES included) lists them alike."""
    import pyopencl as cl
    for p, platform in enumerate(cl.get_platforms()):
        try:
            devices = platform.get_devices()
        except cl.Error:
            continue
        for d, candidate in enumerate(devices):
            if candidate == device:
                return p, d
    return None


def warm_driver_cache(device, binaries: Sequence[tuple[bytes, str]], processes: int,
                      timeout_s: float = 120.0) -> int:
    """Load `binaries` ((binary, final build options) pairs) in `processes` child processes at
    once, so that the driver caches their machine code; returns how many children ended well.
    Best effort: a child that fails or outlives `timeout_s` costs only the time (the caller
    loads every binary itself afterwards, from the cache or not)."""
    position = device_position(device)
    if position is None or not binaries or processes < 1:
        return 0
    with tempfile.TemporaryDirectory(prefix="customlayers-jit-") as folder:
        shares: list[list] = [[] for _ in range(processes)]
        loads = [0] * processes
        # the largest first, each to the least loaded child
        for i, (binary, options) in sorted(enumerate(binaries), key=lambda b: -len(b[1][0])):
            path = Path(folder) / f"{i}.bin"
            path.write_bytes(binary)
            k = loads.index(min(loads))
            shares[k].append([str(path), options])
            loads[k] += len(binary)
        # the child imports this package from where the parent did (a path put on sys.path
        # by a script is not in its environment)
        root = str(Path(__file__).resolve().parents[3])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        children = []
        for k, share in enumerate(s for s in shares if s):
            job = Path(folder) / f"job{k}.json"
            job.write_text(json.dumps({"platform": position[0], "device": position[1],
                                       "programs": share}))
            children.append(subprocess.Popen(
                [sys.executable, "-m", __name__, str(job)], stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env))
        done = 0
        for child in children:
            try:
                done += child.wait(timeout=timeout_s) == 0
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        return done


def _child(job_path: str) -> int:
    """Load the job's binaries on its device (they are checked by the parent before they were
    written; a driver's refusal is the parent's to report when it loads them itself)."""
    import pyopencl as cl
    job = json.loads(Path(job_path).read_text())
    device = cl.get_platforms()[job["platform"]].get_devices()[job["device"]]
    context = cl.Context([device])
    for path, options in job["programs"]:
        cl.Program(context, [device], [Path(path).read_bytes()]).build(options)
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1]))
