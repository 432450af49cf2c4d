"""Executor overhead: a chain of 200 tiny custom layers, time per layer through a compiled
Network against raw pyopencl enqueues of the very same kernels (same programs, same buffers'
sizes, same upload and read-back), measured in one run, interleaved. Goal: ratio <= 1.2.

    python bench/executor_overhead.py [--device GPU] [--layers 200] [--size 16] [--repeat 30]
"""
from __future__ import annotations

import argparse
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
from customlayers.runtime.layers.registry import Registry  # noqa: E402


def relu_chain(n: int, shape) -> Graph:
    g = Graph("relu_chain")
    port = lambda: Port(tuple(shape), "f32")  # noqa: E731
    g.add_node(Node("x", "x", "Parameter", outputs=[port()]))
    prev = "x"
    for i in range(n):
        nid = f"r{i}"
        g.add_node(Node(nid, nid, "ReLU", {"negative_slope": "0.01"}, [port()], [port()]))
        g.connect(prev, 0, nid, 0)
        prev = nid
    g.add_node(Node("out", "out", "Result", inputs=[port()]))
    g.connect(prev, 0, "out", 0)
    return g


def raw_runner(net: Network, x: np.ndarray):
    """The same work with plain pyopencl: own buffers, args set once, enqueue loop, one wait."""
    eng = net.engine
    plan = net.plan
    ctx, q = eng.context, cl.CommandQueue(eng.context, eng.device)
    mf = cl.mem_flags
    nbytes = x.nbytes
    a, b = cl.Buffer(ctx, mf.READ_WRITE, nbytes), cl.Buffer(ctx, mf.READ_WRITE, nbytes)
    inp = cl.Buffer(ctx, mf.READ_ONLY, nbytes)
    launches = []
    src = inp
    for i, (step, progs) in enumerate(zip(plan.steps, plan.programs)):
        launch = step.launches[0]
        k = cl.Kernel(progs[0], launch.entry)
        dst = a if i % 2 == 0 else b
        k.set_args(src, dst)
        launches.append((k, launch.global_size, launch.local_size))
        src = dst
    out = np.empty_like(x)

    def run():
        cl.enqueue_copy(q, inp, x, is_blocking=False)
        for k, g, l in launches:
            cl.enqueue_nd_range_kernel(q, k, g, l)
        cl.enqueue_copy(q, out, src, is_blocking=False)
        q.finish()
        return out
    run.buffers = (a, b)    # set_args does not keep buffers alive: the runner must
    return run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--device", default=None)
    ap.add_argument("--layers", type=int, default=200)
    ap.add_argument("--size", type=int, default=16, help="elements per tensor (1x1x1xSIZE)")
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    engine = Engine(args.device)
    reg = Registry(engine)
    reg.load(ROOT / "examples" / "layers" / "relu" / "relu.xml")
    shape = (1, 1, 1, args.size)
    net = Network(relu_chain(args.layers, shape), reg, engine)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    req = net.create_request()
    raw = raw_runner(net, x)
    ours_out = req.infer({"x": x})["out"]
    np.testing.assert_array_equal(ours_out, raw())      # same work, same answer
    ours_t, raw_t = [], []
    for _ in range(args.repeat):                        # interleaved, so drift hits both
        t = time.perf_counter(); req.infer({"x": x}); ours_t.append(time.perf_counter() - t)
        t = time.perf_counter(); raw(); raw_t.append(time.perf_counter() - t)
    o, r = statistics.median(ours_t), statistics.median(raw_t)
    n = args.layers
    print(f"device: {engine.device.name.strip()}")
    print(f"chain of {n} custom ReLU layers on 1x1x1x{args.size} f32, median of {args.repeat}")
    print(f"  network.infer : {o * 1e3:8.3f} ms/inference  {o / n * 1e6:7.2f} us/layer")
    print(f"  raw pyopencl  : {r * 1e3:8.3f} ms/inference  {r / n * 1e6:7.2f} us/layer")
    print(f"  ratio (ours / raw): {o / r:.3f}   (goal <= 1.2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
