"""Host cost of one kernel launch: a 64-element add enqueued N times (default 2000) through
pyopencl's two launch paths and through a direct ctypes call of clEnqueueNDRangeKernel in the
OpenCL ICD library that pyopencl loads, on the same kernel and queue.

  kernel(queue, g, l, *args)     pyopencl's call: sets every argument, then enqueues
  cl.enqueue_nd_range_kernel     arguments set once (kernel.set_args); what our executor calls
  ctypes clEnqueueNDRangeKernel  arguments set once; the raw C call, with no event made
  ctypes, with an event          the same, asking for an event and releasing it (pyopencl
                                 makes one for every enqueue)

Then our executor itself: an InferRequest of a chain of --chain built-in ReLU layers (64
elements), the time of start() (every launch enqueued, nothing waited for) per launch. What it
does per launch (runtime/execute/request.py): each kernel's arguments are set once, when the request is
made (_bind_all: kernel.set_args); a run re-sets only those whose buffer changed since the last
run (_rebind: kernel.set_arg); the launch loop calls cl.enqueue_nd_range_kernel(queue, kernel,
global, local, wait_for=...) per launch.

Times are the host's (the loop of N enqueues), the median of --rounds rounds, the paths
interleaved; "with finish" adds the wait for the queue to drain.

    python bench/launch_path.py [--device GPU] [-n 2000] [--rounds 5] [--chain 500]
"""
from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pyopencl as cl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from customlayers.graph.graph import Graph, Node, Port  # noqa: E402
from customlayers.runtime.device.device import Engine  # noqa: E402
from customlayers.runtime.compile.network import Network  # noqa: E402

ELEMENTS = 64
ADD = """__kernel void add(__global const float *a, __global const float *b, __global float *c)
{ const int i = get_global_id(0); c[i] = a[i] + b[i]; }"""


# -- the ICD library pyopencl loads --------------------------------------------------------
def icd_library() -> tuple[Path | None, list[str]]:
    """The OpenCL ICD library pyopencl's extension loaded (as the process maps it), else the
    one bundled in its wheel, else the system's; and where it looked."""
    looked = ["/proc/self/maps"]
    try:
        for line in Path("/proc/self/maps").read_text().splitlines():
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if "libOpenCL" in Path(path).name:
                return Path(path), looked
    except OSError:
        pass
    package = Path(cl.__file__).resolve().parent
    for folder in (package.parent / "pyopencl.libs", package / ".libs"):
        looked.append(str(folder))
        found = sorted(folder.glob("libOpenCL*")) if folder.is_dir() else []
        if found:
            return found[0], looked
    looked.append("ctypes.util.find_library('OpenCL')")
    name = ctypes.util.find_library("OpenCL")
    return (Path(name) if name else None), looked


def enqueue_function(library: Path):
    """clEnqueueNDRangeKernel with its C signature."""
    lib = ctypes.CDLL(str(library))
    fn = lib.clEnqueueNDRangeKernel
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_void_p,
                   ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_void_p,
                   ctypes.c_void_p]
    fn.restype = ctypes.c_int
    release = lib.clReleaseEvent
    release.argtypes = [ctypes.c_void_p]
    release.restype = ctypes.c_int
    return fn, release


# -- the paths -----------------------------------------------------------------------------
def paths(queue, kernel, buffers, library: Path) -> dict:
    """name -> a function enqueuing the add n times."""
    g, local = (ELEMENTS,), None
    enqueue = cl.enqueue_nd_range_kernel
    raw, release = enqueue_function(library)
    q, k = ctypes.c_void_p(queue.int_ptr), ctypes.c_void_p(kernel.int_ptr)
    size = (ctypes.c_size_t * 1)(ELEMENTS)
    event = ctypes.c_void_p()

    def call(n):
        for _ in range(n):
            kernel(queue, g, local, *buffers)

    def enqueue_set_once(n):
        for _ in range(n):
            enqueue(queue, kernel, g, local)

    def ctypes_set_once(n):
        for _ in range(n):
            status = raw(q, k, 1, None, size, None, 0, None, None)
            if status:
                raise RuntimeError(f"clEnqueueNDRangeKernel returned {status}")

    def ctypes_with_event(n):
        ref = ctypes.byref(event)
        for _ in range(n):
            status = raw(q, k, 1, None, size, None, 0, None, ref)
            if status:
                raise RuntimeError(f"clEnqueueNDRangeKernel returned {status}")
            release(event)

    return {"kernel(queue, g, l, *args)": (call, False),
            "cl.enqueue_nd_range_kernel": (enqueue_set_once, True),
            "ctypes clEnqueueNDRangeKernel": (ctypes_set_once, True),
            "ctypes, with an event": (ctypes_with_event, True)}


def time_paths(queue, kernel, buffers, library, n: int, rounds: int) -> dict:
    """name -> (median us per launch of the enqueue loop, the same with the queue's finish)."""
    found = paths(queue, kernel, buffers, library)
    enqueue_us: dict = {name: [] for name in found}
    finish_us: dict = {name: [] for name in found}
    for name, (run, set_once) in found.items():           # warm-up: each path once
        if set_once:
            kernel.set_args(*buffers)
        run(50)
        queue.finish()
    for _ in range(rounds):                                # interleaved: drift hits all
        for name, (run, set_once) in found.items():
            if set_once:
                kernel.set_args(*buffers)                  # once, before the loop
            queue.finish()
            t0 = time.perf_counter()
            run(n)
            t1 = time.perf_counter()
            queue.finish()
            t2 = time.perf_counter()
            enqueue_us[name].append((t1 - t0) / n * 1e6)
            finish_us[name].append((t2 - t0) / n * 1e6)
    return {name: (statistics.median(enqueue_us[name]), statistics.median(finish_us[name]))
            for name in found}


def relu_chain(layers: int) -> Graph:
    g = Graph("relu_chain")
    port = lambda: Port((1, ELEMENTS), "f32")  # noqa: E731
    g.add_node(Node("x", "x", "Parameter", outputs=[port()]))
    prev = "x"
    for i in range(layers):
        nid = f"relu{i}"
        g.add_node(Node(nid, nid, "ReLU", {}, [port()], [port()]))
        g.connect(prev, 0, nid, 0)
        prev = nid
    g.add_node(Node("y", "y", "Result", inputs=[port()]))
    g.connect(prev, 0, "y", 0)
    return g


def time_executor(engine, layers: int, rounds: int) -> tuple[float, float, int]:
    """(median us per launch of InferRequest.start, the same with the wait, launches)."""
    net = Network(relu_chain(layers), engine=engine, tuning="off")
    request = net.create_request()
    x = {"x": np.random.default_rng(0).standard_normal((1, ELEMENTS)).astype(np.float32)}
    launches = sum(len(s.launches) for s in net.plan.steps)
    request.infer(x)
    starts, totals = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        request.start(x)
        t1 = time.perf_counter()
        request.wait()
        t2 = time.perf_counter()
        starts.append((t1 - t0) / launches * 1e6)
        totals.append((t2 - t0) / launches * 1e6)
    return statistics.median(starts), statistics.median(totals), launches


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--device", default=None, help="CPU, GPU, GPU.1, a name (default: the best)")
    ap.add_argument("-n", type=int, default=2000, help="launches per round (default 2000)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--chain", type=int, default=500,
                    help="layers of the executor's chain (0: leave it out)")
    args = ap.parse_args()
    library, looked = icd_library()
    if library is None:
        print(f"launch_path: no OpenCL ICD library found (looked in {', '.join(looked)}); "
              f"the ctypes path cannot be measured", file=sys.stderr)
        return 2
    try:
        enqueue_function(library)
    except (OSError, AttributeError) as e:
        print(f"launch_path: {library} has no usable clEnqueueNDRangeKernel ({e})",
              file=sys.stderr)
        return 2
    engine = Engine(args.device)
    ctx, device = engine.context, engine.device
    queue = cl.CommandQueue(ctx, device)                 # in order, no profiling: a request's
    program = cl.Program(ctx, ADD).build()
    kernel = cl.Kernel(program, "add")
    mf = cl.mem_flags
    a = np.arange(ELEMENTS, dtype=np.float32)
    buffers = (cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a),
               cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a),
               cl.Buffer(ctx, mf.WRITE_ONLY, a.nbytes))
    times = time_paths(queue, kernel, buffers, library, args.n, args.rounds)
    out = np.empty_like(a)
    cl.enqueue_copy(queue, out, buffers[2])
    assert np.array_equal(out, a + a), "the add computed something else"
    print(f"device: {device.name.strip()} ({device.platform.name.strip()}); ICD library: "
          f"{library}")
    print(f"{ELEMENTS}-element add, {args.n} launches per round, median of {args.rounds} "
          f"rounds (us per launch)")
    base = times["ctypes clEnqueueNDRangeKernel"][0]
    print(f"  {'path':<32} {'enqueue':>9} {'with finish':>12} {'enqueue / ctypes':>17}")
    for name, (enqueue_us, finish_us) in times.items():
        print(f"  {name:<32} {enqueue_us:>9.2f} {finish_us:>12.2f} {enqueue_us / base:>17.2f}")
    if args.chain > 0:
        start_us, total_us, launches = time_executor(engine, args.chain, args.rounds)
        print(f"  {'our executor (InferRequest)':<32} {start_us:>9.2f} {total_us:>12.2f} "
              f"{start_us / base:>17.2f}   ({launches} launches per start)")
    print("our executor per launch (runtime/execute/request.py): arguments set once per request "
          "(_bind_all), re-set per run only where a buffer changed (_rebind), then "
          "cl.enqueue_nd_range_kernel(queue, kernel, global, local, wait_for=...): the second "
          "path, plus its loop's bookkeeping")
    return 0


if __name__ == "__main__":
    sys.exit(main())
