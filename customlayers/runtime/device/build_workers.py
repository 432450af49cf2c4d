"""Programs compiled in worker processes, for drivers that compile one program at a time per
process (NVIDIA's), their results handed over through the disk program cache.

Why: on an H100, ResNet-50's first load compiles 28 programs and its default tuning 100; NVIDIA's
compiler runs one build at a time per process whatever the threads (0.18-0.32 s a program: 4.3 s
and 33 s, measured with bench/cold_start.py and a profile of Network()). Eight processes, each
with its own context on the same device, built the 28 in 2.4 s against 3.8 s on eight threads.

How: `BuildWorkers` starts N children (`python -m customlayers.runtime.device.build_workers`),
each opening the device by its position (device_position) with a ProgramCache on the parent's
cache folder. A job (source, options, line map, label) is compiled there and stored on disk;
the child then loads the program's binary once more, so that NVIDIA's own code cache (the
folder the parent's driver reads: device.driver_cache_folder) holds its machine code. The
parent then builds as before and finds every program on disk, and the driver its code. A job
that fails in a child is simply built again in the parent, which reports the error the usual
way (its file and line); a child that dies takes only its pending job with it.

Workers are subprocesses of our own module, not multiprocessing's: its "spawn" would import the
user's main script again in each child. They stay a while for the next build (a network's
tuning builds each layer's candidates in turn), and go after IDLE_S without work or when the
process ends. Each holds a context on the device (some hundreds of MB of its memory).
"""
from __future__ import annotations

import atexit
import os
import pickle
import queue
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from ... import settings

IDLE_S = 30.0
# fewer builds than this are not worth a worker's start (about 1 s: Python, pyopencl, a
# context); a tuned layer's candidates come 4 at a time
MIN_JOBS = 4
_FRAME = struct.Struct("<Q")


def worker_count(engine) -> int:
    """How many worker processes builds on `engine` use: CUSTOMLAYERS_BUILD_PROCESSES, by
    default 8 (at most the cores) on NVIDIA's platform, whose compiler takes one build at a
    time per process, and none elsewhere (PoCL's threads compile in parallel). 0 where the
    disk cache cannot carry their results (off, or not writable)."""
    cache = engine.cache
    if not cache.enabled or not cache.writable:
        return 0
    wanted = settings.build_processes()
    if wanted is None:
        nvidia = "NVIDIA" in engine.device.platform.vendor
        wanted = min(8, os.cpu_count() or 1) if nvidia else 0
    return wanted


def build_in_workers(engine, jobs: list[tuple]) -> int:
    """Compile `jobs` ((source, options, line_map, label), each not in the cache yet) in the
    engine's worker processes into its disk cache (each noted there as built for this
    process); the number compiled. Those that failed or were not reached are left to the
    caller's own build."""
    count = min(worker_count(engine), len(jobs))
    if len(jobs) < MIN_JOBS or count < 2:
        return 0
    try:
        workers = _workers_for(engine, count)
    except (OSError, ValueError):
        return 0
    if workers is None:
        return 0
    built = workers.build(jobs)
    for source, options, *_ in built:
        engine.cache.built_elsewhere(engine.device, source, options)
    if workers.broken and not built:
        _failed.add(workers.key)        # they cannot start here: build in this process
    return len(built)


# -- the parent's side ---------------------------------------------------------------------
# one set of workers per process (for one device and cache folder): a test suite or a server
# that builds into many cache folders never holds more than one set of contexts
_pools: dict[tuple, "BuildWorkers"] = {}
_pools_lock = threading.Lock()
_failed: set[tuple] = set()


def _workers_for(engine, count: int) -> "BuildWorkers | None":
    from .device import device_position, driver_cache_folder
    position = device_position(engine.device)
    folder = driver_cache_folder()
    key = (position, str(engine.cache.directory), str(folder))
    if key in _failed:
        return None
    with _pools_lock:
        others = [p for k, p in _pools.items() if k != key]
        pool = _pools.get(key)
    for other in others:
        other.close()
    if pool is not None and (pool.broken or pool.size < count):
        pool.close()
        pool = None
    with _pools_lock:
        if pool is None:
            pool = _pools[key] = BuildWorkers(key, engine.device.name, count)
        pool.touch()
        return pool


class BuildWorkers:
    """`size` child processes building programs into one cache folder."""

    def __init__(self, key: tuple, device_name: str, size: int):
        position, cache_dir, driver_folder = key
        self.key = key
        self.size = size
        self.broken = False
        self.closed = False
        self._lock = threading.Lock()          # one batch at a time
        self._timer: threading.Timer | None = None
        self._log = tempfile.TemporaryFile()   # the children's stderr (never read: a pipe
        #                                        nobody reads would fill and stall them)
        env = settings.child_environment(
            CUDA_CACHE_PATH=driver_folder if driver_folder != "None" else None,
            CUDA_CACHE_DISABLE=None if driver_folder != "None" else "1")
        spec = repr((tuple(position), device_name, str(cache_dir)))
        self._children = [subprocess.Popen(
            [sys.executable, "-m", __name__, spec], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self._log, env=env,
            cwd=tempfile.gettempdir()) for _ in range(size)]

    def touch(self) -> None:
        """Used now: close after IDLE_S more without use."""
        if self._timer is not None:
            self._timer.cancel()
        self._timer = threading.Timer(IDLE_S, self.close)
        self._timer.daemon = True
        self._timer.start()

    def build(self, jobs: list[tuple]) -> list[tuple]:
        """The jobs compiled (the others failed, or a child ended before them)."""
        with self._lock:
            if self.closed:
                return []
            todo: queue.Queue = queue.Queue()
            for job in jobs:
                todo.put(job)
            done: list[tuple] = []

            def serve(index: int, child) -> None:
                while True:
                    try:
                        job = todo.get_nowait()
                    except queue.Empty:
                        return
                    try:
                        _send(child.stdin, job)
                        ok = _receive(child.stdout)
                    except (OSError, EOFError, pickle.UnpicklingError):
                        self.broken = True     # this child is gone: the others go on
                        return
                    if ok:
                        done.append(job)         # list.append: one at a time under the GIL

            threads = [threading.Thread(target=serve, args=(i, c), daemon=True)
                       for i, c in enumerate(self._children)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            return done

    def close(self) -> None:
        """End the children (after the batch under way, if any)."""
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._end_children()
        with _pools_lock:
            for key, pool in list(_pools.items()):
                if pool is self:
                    del _pools[key]

    def _end_children(self) -> None:
        for child in self._children:
            try:
                child.stdin.close()            # the child ends at the end of its input
            except OSError:
                pass
        for child in self._children:
            try:
                child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                child.kill()
        self._log.close()


@atexit.register
def _close_all() -> None:
    for pool in list(_pools.values()):
        pool.close()


def _send(stream, value) -> None:
    data = pickle.dumps(value)
    stream.write(_FRAME.pack(len(data)) + data)
    stream.flush()


def _receive(stream):
    head = stream.read(_FRAME.size)
    if len(head) < _FRAME.size:
        raise EOFError("the build worker ended")
    size = _FRAME.unpack(head)[0]
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the build worker ended")
    return pickle.loads(data)      # our own child's answer, never a user's file


# -- the child's side ----------------------------------------------------------------------
def _serve(spec: str) -> int:
    import ast

    from .build import load_binary, program_binary
    from .cache import ProgramCache
    from .device import open_engine_at
    # the answers go through a copy of stdout; whatever a driver or library prints goes to
    # stderr instead, and can never break a frame
    stdout = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    stdin = sys.stdin.buffer
    position, name, cache_dir = ast.literal_eval(spec)
    cache = ProgramCache(Path(cache_dir), enabled=True, verbose=False)
    engine = open_engine_at(position, name, cache=cache)
    while True:
        try:
            source, options, line_map, label = _receive(stdin)
        except EOFError:
            return 0
        try:
            program = cache.build(engine.context, engine.device, source, options,
                                  line_map=line_map, label=label)
            # the driver's own code cache: what the parent's load of the binary looks up
            load_binary(engine.context, engine.device, program_binary(program, engine.device),
                        options)
            ok = True
        except Exception:   # noqa: BLE001 - the parent builds it again and reports the error
            ok = False
        _send(stdout, ok)


if __name__ == "__main__":
    sys.exit(_serve(sys.argv[1]))
