"""Programs compiled in worker processes, for drivers that compile one program at a time per
process (NVIDIA's, PoCL's), their results handed over through the disk program cache.

Why: on an H100, ResNet-50's first load compiles 28 programs and its default tuning 100; NVIDIA's
compiler runs one build at a time per process whatever the threads (0.18-0.32 s a program: 4.3 s
and 33 s, measured with bench/cold_start.py and a profile of Network()). Eight processes, each
with its own context on the same device, built the 28 in 2.4 s against 3.8 s on eight threads.

How: `BuildWorkers` starts N children (`python -m customlayers.runtime.device.build_workers`),
each opening the device by its position (device_position) with a ProgramCache on the parent's
cache folder. A job (source, options, line map, label) is compiled there and stored on disk;
on NVIDIA the child then loads the program's binary once more, so that the driver's own code
cache (the folder the parent's driver reads: device.driver_cache_folder) holds its machine code
(PoCL's binary holds its machine code already). While
the children start, and then beside them, the parent takes jobs from the same queue and builds
them itself (BUILD_HERE_TOO). The parent then builds as before and finds every program in
memory or on disk, and the driver its code. A job
that fails in a child is simply built again in the parent, which reports the error the usual
way (its file and line); a child that dies takes only its pending job with it.

Workers are subprocesses of our own module, not multiprocessing's: its "spawn" would import the
user's main script again in each child. They stay a while for the next build (a network's
tuning builds each layer's candidates in turn), and go when a Network's compile ends
(close_workers: told to stop, then reaped by a thread, so that the network does not wait for
their contexts to be torn down), after IDLE_S without work, or when the process ends. Each
holds a context on the device (some hundreds of MB of its memory). A child that does not start
within START_S or answer a job within JOB_S is killed, and its jobs are built here.
"""
from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import glob
import importlib.util
import os
import pickle
import queue
import select
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from ... import settings
from ...errors import CustomLayersError

# Nothing above imports pyopencl or numpy: a worker runs this module, and its context is made
# (EarlyContext, below) while serve() imports them; the parent's side imports limits.py where
# it asks what the platform is.

IDLE_S = 30.0
START_S = 60.0        # Python, pyopencl and a context: about 1 s on the GPU machine
JOB_S = 600.0         # one program's compile
STOP_S = 5.0          # a stopped child's exit (its context torn down) before it is killed
# fewer builds than this are not worth a worker's start (about 1 s: Python, pyopencl, a
# context); a tuned layer's candidates come 4 at a time
MIN_JOBS = 4
# this process builds from the workers' queue too, while they start (about 1.5 s each, eight at
# once, on the GPU machine) and then beside them: with this and the children's exit left to a
# thread, ResNet-50's cold load on an H100 (bench/cold_start.py, tuning off) went from 4.0-4.2 s
# to 3.3-3.6 s (stop 26)
BUILD_HERE_TOO = True
_FRAME = struct.Struct("<Q")
WORKER_MODULE = "customlayers.runtime.device.build_workers"   # (run as __main__ there)
_READY = "ready"
EARLY_READY = "ready, its context made while it imported (EarlyContext)"


def worker_count(engine) -> int:
    """How many worker processes builds on `engine` use: CUSTOMLAYERS_BUILD_PROCESSES, by
    default 8 (at most the cores this process may use) on NVIDIA's platform and on PoCL, whose
    compilers take one build at a time per process (PoCL holds a lock around its LLVM: two
    processes built EfficientNet-B0's 15 programs in 7.2 s where one took 12.1 s on the 2-core
    machine, stop 28), and none elsewhere. On PoCL no more than POCL_MAX_PTHREAD_COUNT: a
    process that caps PoCL's threads at its share of the cores (a Ray actor) gets no more
    compiling processes than that. 0 where the disk cache cannot carry their results (off, or
    not writable)."""
    wanted = _wanted_count(engine.device)       # a bad value is an error wherever it is set
    cache = engine.cache
    if wanted < 2 or not cache.enabled or not cache.check_directory():   # (it probes)
        return 0
    return wanted


def _wanted_count(device) -> int:
    """The workers asked for on `device` (CUSTOMLAYERS_BUILD_PROCESSES, else the default),
    before any look at the cache."""
    wanted = settings.build_processes()
    return _default_count(device) if wanted is None else wanted


def _default_count(device) -> int:
    """worker_count's default for `device`."""
    from .limits import is_nvidia_platform, is_pocl_platform
    if is_nvidia_platform(device):
        return min(8, _cores())
    if is_pocl_platform(device):
        return min(8, _cores(), settings.pocl_thread_cap() or 8)
    return 0


def _cores() -> int:
    """The cores this process may use: its CPU affinity, and no more than a cgroup's CPU quota
    allows (a container started with --cpus=2 on a 64-core host sees 64 cores and may run on
    two)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    quota = _cpu_quota()
    return min(cores, quota) if quota is not None else cores


# cgroup v2's "<quota> <period>" (or "max <period>"), then v1's quota and period in two files
CPU_QUOTA_FILES = ((Path("/sys/fs/cgroup/cpu.max"), None),
                   (Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"),
                    Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us")))


def _cpu_quota() -> int | None:
    """The whole CPUs a cgroup quota gives this process (at least 1), or None where the first
    quota file found sets no limit ("max", -1) or none can be read."""
    for quota_file, period_file in CPU_QUOTA_FILES:
        try:
            fields = quota_file.read_text().split()
            period = fields[1] if period_file is None else period_file.read_text().split()[0]
            quota = fields[0]
        except (OSError, IndexError):
            continue
        if quota in ("max", "-1"):
            return None
        try:
            quota_us, period_us = int(quota), int(period)
        except ValueError:
            return None
        if quota_us <= 0 or period_us <= 0:
            return None
        return max(1, quota_us // period_us)
    return None


def build_in_workers(engine, wanted: list[tuple]) -> int:
    """Compile those of `wanted` ((source, options, line_map, label)) the cache lacks in the
    engine's worker processes into its disk cache (each found there noted as built for this
    process), and meanwhile in this process from the same queue (BUILD_HERE_TOO); the number
    compiled. Those that failed, were not reached or did not reach the disk are left to the
    caller's own build. Where workers are off (drivers other than NVIDIA's and PoCL by
    default) the cache is not even looked up."""
    available = worker_count(engine)
    if len(wanted) < MIN_JOBS or available < 2:
        return 0
    cache = engine.cache
    jobs = [job for job in wanted
            if not cache.has(engine.context, engine.device, job[0], job[1])]
    count = min(available, len(jobs))
    if len(jobs) < MIN_JOBS or count < 2:
        return 0
    try:
        workers = _workers_for(engine.device, cache, count)
    except (OSError, ValueError, CustomLayersError):
        return 0      # no position to open the device by (a sub-device), no process: here
    if workers is None:
        return 0
    def build_here(job: tuple) -> None:
        source, options, line_map, label = job
        cache.build(engine.context, engine.device, source, options, line_map=line_map,
                    label=label)

    answered, built_here = workers.build(jobs, here=build_here if BUILD_HERE_TOO else None)
    built = [job for job in answered
             if cache.has(engine.context, engine.device, job[0], job[1])]
    for source, options, *_ in built:
        cache.built_elsewhere(engine.device, source, options)
    # given up for the device only where no child ever started: "none answered" no longer
    # says so, since this process may have built every job before a started child was ready
    if workers.broken and not answered and not workers.ready:
        _failed.add(workers.key[0])     # they cannot start on this device: build here
        workers.close()
    return len(built) + len(built_here)


def start_early(device, cache) -> bool:
    """Start the build workers of an engine on `device` and `cache` now (Engine() calls it
    before making its context; from_context and from_queue once they have the user's; the
    engines of our own child processes never), where they will be wanted and
    cost this process nothing: the first load of this cache folder on this device (its
    `programs` folder empty, and no early start before: the cache's first-load mark, so that a
    process that only loads packages, and never fills the cache, pays for one early start, not
    one per run), on a machine with a core for this process beside each worker. A worker's start
    (Python, pyopencl, a context) then overlaps this process's own context, model reading and
    planning, instead of following the plan: eight at once took 1.6-1.9 s each on the GPU
    machine's host, and the first builds waited for them. ResNet-50's cold load (tuning off,
    H200) went from 2.62-2.71 s to 2.12-2.16 s after the Engine, 2.95-3.17 to 2.67-2.74 s with
    it (the Engine itself slower by their start beside it). Whether they started. The count and
    the cores are checked before the cache's folder is touched (nothing made, nothing warned
    where no worker would start)."""
    try:
        count = _wanted_count(device)
    except CustomLayersError:
        return False      # a bad value is reported by the first build, as before
    if count < 2 or _cores() <= count or not cache.is_empty():
        return False
    try:
        if not cache.claim_first_load(device):
            return False
        return _workers_for(device, cache, count) is not None
    except (OSError, ValueError, CustomLayersError):
        return False


def close_workers(wait: bool = False) -> None:
    """End every worker process (a Network's compile is done: their contexts hold the device's
    memory, which its requests may need). They are told to stop now; without `wait` a thread
    waits for them to exit: a child's exit (its context torn down) took 0.57 s of a cold
    ResNet-50 load on an H100 with 8 children waited for in turn (stop 26)."""
    for pool in list(_pools.values()):
        pool.close(wait=wait)


# -- the parent's side ---------------------------------------------------------------------
# one set of workers per process (for one device and cache folder): a test suite or a server
# that builds into many cache folders never holds more than one set of contexts
_pools: dict[tuple, "BuildWorkers"] = {}
_pools_lock = threading.Lock()
_failed: set[tuple] = set()       # device positions whose workers could not start
_reapers: list[threading.Thread] = []    # threads waiting for closed workers to exit


def _workers_for(device, cache, count: int) -> "BuildWorkers | None":
    from .device import device_position, driver_cache_folder
    position = device_position(device)
    if position in _failed:
        return None
    folder = driver_cache_folder()
    # absolute: the children run in another folder
    # the cache's binaries setting too: a child's entries must be what the parent reads
    key = (position, str(Path(cache.directory).resolve()),
           None if folder is None else str(Path(folder).resolve()),
           cache.keeps_binary(device))
    with _pools_lock:
        others = [p for k, p in _pools.items() if k != key]
        pool = _pools.get(key)
    for other in others:
        other.close()
    if pool is not None and (pool.broken or pool.closed or pool.size < count):
        pool.close()
    with _pools_lock:
        pool = _pools.get(key)           # again: another thread may have made one meanwhile
        if pool is None or pool.closed:
            pool = _pools[key] = BuildWorkers(key, device.name, count)
        return pool


class BuildWorkers:
    """`size` child processes building programs into one cache folder."""

    def __init__(self, key: tuple, device_name: str, size: int):
        position, cache_dir, driver_folder, binaries = key
        self.key = key
        self.size = size
        self.broken = False
        self.closed = False
        self._first_batch_begun = False       # (its threads read the children's ready frames)
        self.ready: list = []                 # the children that said they were ready
        self.ready_said: list = []            # and what (_READY or EARLY_READY)
        self._lock = threading.Lock()          # one batch at a time
        self._timer: threading.Timer | None = None
        self._log = tempfile.TemporaryFile()   # the children's stderr (never read: a pipe
        #                                        nobody reads would fill and stall them)
        # a worker starts no workers of its own (its Engine would, on an empty cache)
        env = settings.child_environment(
            CUDA_CACHE_PATH=driver_folder, CUDA_CACHE_DISABLE=None if driver_folder else "1",
            CUSTOMLAYERS_BUILD_PROCESSES="0")
        spec = repr((tuple(position), device_name, cache_dir, binaries))
        # cwd: the folder holding this customlayers, which `-m` puts first on the path (not
        # a shared folder where anyone could leave a module of pyopencl's name)
        root = settings.package_root()
        # unbuffered pipes: select() then tells truly whether an answer waits
        # (its __main__: the child's context made while it imports, then serve())
        self._children = [subprocess.Popen(
            [sys.executable, "-m", WORKER_MODULE, spec], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self._log, env=env, cwd=root, bufsize=0)
            for _ in range(size)]
        self._touch()

    def _touch(self) -> None:
        """Used now: close after IDLE_S more without use."""
        if self._timer is not None:
            self._timer.cancel()
        self._timer = threading.Timer(IDLE_S, self.close)
        self._timer.daemon = True
        self._timer.start()

    def build(self, jobs: list[tuple],
              here: Callable[[tuple], object] | None = None) -> tuple[list, list]:
        """(the jobs the children compiled, those `here` did): the others failed, or a child
        ended or hung before them. `here` builds a job in this process from the same queue
        while the children start and work (a child's start, about 1 s, is time this process
        would otherwise only wait); whatever it raises leaves the job to the caller."""
        with self._lock:
            if self.closed:
                return [], []
            if self._timer is not None:
                self._timer.cancel()
            todo: queue.Queue = queue.Queue()
            for job in jobs:
                todo.put(job)
            done: list[tuple] = []
            done_here: list[tuple] = []
            first = not self._first_batch_begun
            self._first_batch_begun = True

            def serve_here() -> None:
                while True:
                    try:
                        job = todo.get_nowait()
                    except queue.Empty:
                        return
                    try:
                        here(job)
                        done_here.append(job)
                    except Exception:   # noqa: BLE001 - the caller builds it and reports it
                        pass

            def serve(child) -> None:
                try:
                    if first:
                        said = _receive(child.stdout, START_S)      # its context is open
                        self.ready.append(child)     # list.append: safe between threads
                        self.ready_said.append(said)
                    while True:
                        try:
                            job = todo.get_nowait()
                        except queue.Empty:
                            return
                        _send(child.stdin, job)
                        if _receive(child.stdout, JOB_S):
                            done.append(job)     # list.append: one at a time under the GIL
                except (OSError, EOFError, TimeoutError, pickle.UnpicklingError):
                    self.broken = True           # this child is gone or stuck: the others go on
                    child.kill()

            threads = [threading.Thread(target=serve, args=(c,), daemon=True)
                       for c in self._children]
            if here is not None:
                threads.append(threading.Thread(target=serve_here, daemon=True))
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            self._touch()
            return done, done_here

    def close(self, wait: bool = True) -> None:
        """End the children (after the batch under way, if any): each is sent the stop frame
        at once; then they are waited for (killed after STOP_S) here, or with `wait` False by
        a thread of their own (the interpreter's exit still waits for it: no child outlives
        its parent unreaped)."""
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            if self.closed:
                return
            self.closed = True
            if self._first_batch_begun:
                self._stop_children()
            else:
                # started early (start_early) and never given a job: nothing of theirs to
                # wait for, and a child still starting would read the stop frame only once
                # its context is open (a process's exit would wait for that)
                for child in self._children:
                    child.kill()
                    for pipe in (child.stdin, child.stdout):
                        pipe.close()
        with _pools_lock:
            for key, pool in list(_pools.items()):
                if pool is self:
                    del _pools[key]
        if wait:
            self._reap_children()
        else:
            reaper = threading.Thread(target=self._reap_children, name="cl-build-reaper")
            with _pools_lock:
                _reapers[:] = [r for r in _reapers if r.is_alive()] + [reaper]
            reaper.start()

    def _stop_children(self) -> None:
        for child in self._children:
            try:
                _send(child.stdin, None)         # the stop frame (a forked process may hold
                child.stdin.close()              # our pipes open: no end of input comes)
            except OSError:
                pass

    def _reap_children(self) -> None:
        deadline = time.monotonic() + STOP_S
        for child in self._children:
            try:
                child.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        self._log.close()


@atexit.register
def _close_all() -> None:
    close_workers(wait=True)
    with _pools_lock:
        reapers = list(_reapers)
    for reaper in reapers:
        reaper.join()


def _forget_in_child() -> None:
    """A forked process does not own its parent's workers (nor may it write to their pipes),
    and may have been forked while another thread held the lock of their table."""
    global _pools_lock
    _pools.clear()
    _reapers.clear()
    _pools_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def _send(stream, value) -> None:
    payload = pickle.dumps(value)
    data = memoryview(_FRAME.pack(len(payload)) + payload)
    while data:                          # an unbuffered pipe may take part of it at a time
        data = data[stream.write(data):]
    stream.flush()


def _read(stream, size: int, deadline: float | None) -> bytes:
    data = b""
    while len(data) < size:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([stream], [], [], left)[0]:
                raise TimeoutError("the build worker did not answer")
        chunk = stream.read1(size - len(data)) if hasattr(stream, "read1") else \
            stream.read(size - len(data))
        if not chunk:
            raise EOFError("the build worker ended")
        data += chunk
    return data


def _receive(stream, seconds: float | None = None):
    deadline = None if seconds is None else time.monotonic() + seconds
    size = _FRAME.unpack(_read(stream, _FRAME.size, deadline))[0]
    return pickle.loads(_read(stream, size, deadline))   # our own child's, never a user's


# -- the child's side ----------------------------------------------------------------------
def serve(spec: str, early=None) -> int:
    """The child's loop: open the device (through `early`, an EarlyContext, where it
    made the context; else as open_engine_at does), say ready, build each job sent."""
    import ast

    from .build import load_binary, program_binary
    from .cache import ProgramCache
    from .device import adopt_context, open_engine_at
    from .limits import is_nvidia_platform
    # the answers go through a copy of stdout; whatever a driver or library prints goes to
    # stderr instead, and can never break a frame
    stdout = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    stdin = sys.stdin.buffer
    position, name, cache_dir, binaries = ast.literal_eval(spec)
    cache = ProgramCache(Path(cache_dir), enabled=True, verbose=False, binaries=binaries)
    taken = early.take(START_S) if early is not None else None
    engine = adopt_context(*taken, name, cache=cache) if taken is not None else None
    said = _READY if engine is None else EARLY_READY
    if engine is None:
        engine = open_engine_at(position, name, cache=cache)
    _send(stdout, said)
    while True:
        try:
            job = _receive(stdin)
        except EOFError:
            return 0
        if job is None:                  # the stop frame
            return 0
        source, options, line_map, label = job
        try:
            program = cache.build(engine.context, engine.device, source, options,
                                  line_map=line_map, label=label)
            # the driver's own code cache: what the parent's load of the binary looks up
            # (where the cache keeps no binary, the parent builds the source as this child did;
            # other drivers' binaries are their code, loaded as they are: PoCL's)
            if cache.keeps_binary(engine.device) and is_nvidia_platform(engine.device):
                load_binary(engine.context, engine.device,
                            program_binary(program, engine.device), options)
            ok = True
        except Exception:   # noqa: BLE001 - the parent builds it again and reports the error
            ok = False
        _send(stdout, ok)


# -- a worker's context, made while it imports -----------------------------------------------
# Why: eight workers starting at once on the GPU machine's host spent 0.7-0.9 s each importing,
# then 0.1-0.3 s listing the platforms and 0.65-0.8 s making a context (an H200), one after the
# other; a cold load's first builds wait for them. The driver's calls release the GIL (ctypes),
# so the two go at once: eight were ready 0.62-0.75 s after the parent's Engine, against
# 1.11-1.20 s. The loader is pyopencl's own (its wheel bundles one, found without importing
# pyopencl), so that the platforms and devices come in the order the parent's device_position
# counted them; pyopencl then adopts the context (device.adopt_context, which checks the
# device's name as open_engine_at does). Anything that goes wrong here leaves the worker to open
# its device as before.
CL_SUCCESS = 0
CL_DEVICE_TYPE_ALL = 0xFFFFFFFF
_MAX = 64


def loader_path() -> str | None:
    """The OpenCL ICD loader pyopencl links: the one its wheel bundles (pyopencl/.libs), else
    the system's. The bundled one finds the vendors through PYOPENCL_HOME, which pyopencl's
    import sets (without it, a call into the loader crashed the process): set here first, to
    the same folder, before any thread calls the loader (pyopencl's import then sets the same
    value again)."""
    try:
        spec = importlib.util.find_spec("pyopencl")
    except (ImportError, ValueError):
        spec = None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        found = sorted(glob.glob(os.path.join(folder, ".libs", "libOpenCL*.so*")))
        if found:
            settings.set_pyopencl_home(os.path.abspath(folder))
            return found[0]
    return ctypes.util.find_library("OpenCL")


class EarlyContext:
    """A context on the device at `position` (platform, device indices), made in a thread
    from now on. take(): (context, device) as C handles (ints), or None where it failed."""

    def __init__(self, position):
        self.position = tuple(int(i) for i in position)
        self._loader = loader_path()          # (in this thread: it may set the environment)
        self._result: tuple[int, int] | None = None
        self._thread = threading.Thread(target=self._open, name="cl-early-context",
                                        daemon=True)
        self._thread.start()

    def _open(self) -> None:
        try:
            self._result = _open_context(self._loader, *self.position)
        except Exception:   # noqa: BLE001 - the worker then opens its device as before
            self._result = None

    def take(self, timeout: float | None = None) -> tuple[int, int] | None:
        self._thread.join(timeout)
        return None if self._thread.is_alive() else self._result


def _open_context(path: str | None, platform_index: int,
                  device_index: int) -> tuple[int, int] | None:
    if path is None:
        return None
    cl = ctypes.CDLL(path)
    handle = ctypes.c_void_p
    count = ctypes.c_uint32()
    platforms = (handle * _MAX)()
    if cl.clGetPlatformIDs(ctypes.c_uint32(_MAX), platforms, ctypes.byref(count)) != \
            CL_SUCCESS or platform_index >= count.value:
        return None
    devices = (handle * _MAX)()
    if cl.clGetDeviceIDs(handle(platforms[platform_index]), ctypes.c_uint64(CL_DEVICE_TYPE_ALL),
                         ctypes.c_uint32(_MAX), devices, ctypes.byref(count)) != CL_SUCCESS \
            or device_index >= count.value:
        return None
    device = handle(devices[device_index])
    error = ctypes.c_int32()
    cl.clCreateContext.restype = handle
    context = cl.clCreateContext(None, ctypes.c_uint32(1), ctypes.byref(device), None, None,
                                 ctypes.byref(error))
    if error.value != CL_SUCCESS or not context:
        return None
    return int(context), int(device.value)


if __name__ == "__main__":
    import ast
    _early = EarlyContext(ast.literal_eval(sys.argv[1])[0])
    # serve() of the module by its name (this file run as __main__ is a second copy of it)
    from customlayers.runtime.device.build_workers import serve as _serve_named
    sys.exit(_serve_named(sys.argv[1], _early))
