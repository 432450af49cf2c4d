"""The interop talk's pipeline in miniature (issue 10): a user pre-processing kernel turns an
8-bit image into the network's float input, the network runs, a user post-processing kernel
turns its output into an 8-bit mask. Two ways, interleaved frame by frame, in one run:

  before  numpy hand-offs and host waits between the stages: the pre kernel's output is read to
          the host, the network (its own context) takes and returns numpy arrays, the output is
          copied back to the device for the post kernel (OpenVINO before RemoteTensor/queue
          sharing: the talk's 5 ms PointPillars pipeline)
  after   one queue (Engine.from_queue), device tensors (set_tensor with the user's buffers) and
          events (start_async(wait_for=[pre]) -> post waits on its event): the host waits once
          per frame, for the mask (the talk's 1.5 ms)

Prints one table: per size, ms per frame before and after, and the ratio (goal on a GPU: after
at least 2x faster at small sizes). Both ways must give the same mask.

    python bench/pipeline.py [--device CPU|GPU] [--seconds 2] [--sizes 32,64,128]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pyopencl as cl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from customlayers.api import Engine, Network, select_device  # noqa: E402
from customlayers.graph.graph import Graph, Node, Port  # noqa: E402

CHANNELS = 8
USER_KERNELS = """
__kernel void pre(__global const uchar* img, __global float* x) {
    const int i = get_global_id(0);
    x[i] = (float)img[i] * (1.0f / 255.0f) - 0.5f;        /* scale and centre */
}
__kernel void post(__global const float* y, __global uchar* mask) {
    const int i = get_global_id(0);
    mask[i] = y[i] > 0.05f ? 255 : 0;                      /* threshold */
}
"""


def small_cnn(size: int) -> Graph:
    """conv 3x3 (3 -> 8) -> ReLU -> conv 3x3 (8 -> 8) -> ReLU -> conv 1x1 (8 -> 1): a few
    layers, so the hand-offs between the stages are a visible part of a frame."""
    rng = np.random.default_rng(0)
    g = Graph("pipeline_cnn")

    def port(c, dtype="f32", names=()):
        return Port((1, c, size, size), dtype, names)

    g.add_node(Node("x", "x", "Parameter", outputs=[port(3, names=("x",))]))
    prev, cin, n = "x", 3, 0
    for cout, k in ((CHANNELS, 3), (CHANNELS, 3), (1, 1)):
        n += 1
        w = (rng.standard_normal((cout, cin, k, k)) * np.sqrt(2 / (cin * k * k))).astype(np.float32)
        g.add_node(Node(f"w{n}", f"w{n}", "Const", outputs=[Port(w.shape, "f32")], value=w))
        pad = str(k // 2)
        last = cout == 1
        g.add_node(Node(f"conv{n}", "y" if last else f"conv{n}", "Convolution",
                        {"strides": "1,1", "dilations": "1,1", "pads_begin": f"{pad},{pad}",
                         "pads_end": f"{pad},{pad}"},
                        [port(cin), Port(w.shape, "f32")],
                        [port(cout, names=("y",) if last else ())]))
        g.connect(prev, 0, f"conv{n}", 0)
        g.connect(f"w{n}", 0, f"conv{n}", 1)
        prev = f"conv{n}"
        if not last:
            g.add_node(Node(f"relu{n}", f"relu{n}", "ReLU", {}, [port(cout)], [port(cout)]))
            g.connect(prev, 0, f"relu{n}", 0)
            prev = f"relu{n}"
        cin = cout
    g.add_node(Node("out", "out", "Result", inputs=[port(1)]))
    g.connect(prev, 0, "out", 0)
    return g


class Before:
    """Stages handed over through numpy, the host waiting after each."""

    def __init__(self, device, graph, size):
        self.ctx = cl.Context([device])
        self.q = cl.CommandQueue(self.ctx, device)
        prg = cl.Program(self.ctx, USER_KERNELS).build()
        self.pre, self.post = cl.Kernel(prg, "pre"), cl.Kernel(prg, "post")
        mf = cl.mem_flags
        n_in, n_out = 3 * size * size, size * size
        self.img = cl.Buffer(self.ctx, mf.READ_ONLY, n_in)
        self.x = cl.Buffer(self.ctx, mf.READ_WRITE, n_in * 4)
        self.y = cl.Buffer(self.ctx, mf.READ_WRITE, n_out * 4)
        self.mask_buf = cl.Buffer(self.ctx, mf.WRITE_ONLY, n_out)
        self.pre.set_args(self.img, self.x)
        self.post.set_args(self.y, self.mask_buf)
        self.net = Network(graph, None, Engine(device))        # a closed box: its own context
        self.size, self.n_in, self.n_out = size, n_in, n_out
        self.x_host = np.empty((1, 3, size, size), np.float32)
        self.mask = np.empty((1, 1, size, size), np.uint8)

    def frame(self, image: np.ndarray) -> np.ndarray:
        q = self.q
        cl.enqueue_copy(q, self.img, image)                                # wait
        cl.enqueue_nd_range_kernel(q, self.pre, (self.n_in,), None)
        cl.enqueue_copy(q, self.x_host, self.x)                            # wait: to the host
        y = self.net.infer({"x": self.x_host})["y"]                        # wait
        cl.enqueue_copy(q, self.y, y)                                      # wait: back again
        cl.enqueue_nd_range_kernel(q, self.post, (self.n_out,), None)
        cl.enqueue_copy(q, self.mask, self.mask_buf)                       # wait
        return self.mask


class After:
    """One queue, the user's buffers as the network's tensors, events between the stages."""

    def __init__(self, device, graph, size):
        self.ctx = cl.Context([device])
        self.q = cl.CommandQueue(self.ctx, device)
        prg = cl.Program(self.ctx, USER_KERNELS).build()
        self.pre, self.post = cl.Kernel(prg, "pre"), cl.Kernel(prg, "post")
        mf = cl.mem_flags
        n_in, n_out = 3 * size * size, size * size
        self.img = cl.Buffer(self.ctx, mf.READ_ONLY, n_in)
        x = cl.Buffer(self.ctx, mf.READ_WRITE, n_in * 4)
        y = cl.Buffer(self.ctx, mf.READ_WRITE, n_out * 4)
        self.mask_buf = cl.Buffer(self.ctx, mf.WRITE_ONLY, n_out)
        self.pre.set_args(self.img, x)
        self.post.set_args(y, self.mask_buf)
        net = Network(graph, None, Engine.from_queue(self.q))
        self.req = net.create_request()
        self.req.set_tensor("x", x)               # read where the pre kernel wrote it
        self.req.set_tensor("y", y)               # written where the post kernel reads it
        self.n_in, self.n_out = n_in, n_out
        self.mask = np.empty((1, 1, size, size), np.uint8)

    def frame(self, image: np.ndarray) -> np.ndarray:
        q = self.q
        up = cl.enqueue_copy(q, self.img, image, is_blocking=False)
        pre = cl.enqueue_nd_range_kernel(q, self.pre, (self.n_in,), None, wait_for=[up])
        done = self.req.start_async(wait_for=[pre])
        post = cl.enqueue_nd_range_kernel(q, self.post, (self.n_out,), None, wait_for=[done])
        cl.enqueue_copy(q, self.mask, self.mask_buf, wait_for=[post])      # the one wait
        self.req.wait()                                                    # already complete
        return self.mask


def measure(runner, images, seconds: float) -> float:
    """Median ms per frame over rounds of all images, for about `seconds`."""
    rounds = []
    start = time.perf_counter()
    while not rounds or time.perf_counter() - start < seconds:
        t = time.perf_counter()
        for image in images:
            runner.frame(image)
        rounds.append((time.perf_counter() - t) / len(images))
    return float(np.median(rounds)) * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=None, help="CPU, GPU or part of a device name")
    ap.add_argument("--sizes", default="32,64,128", help="image sides (comma-separated)")
    ap.add_argument("--seconds", type=float, default=2.0, help="per size and way")
    ap.add_argument("--frames", type=int, default=8, help="different images per round")
    args = ap.parse_args()
    device = select_device(args.device)
    print(f"device: {device.name.strip()} ({device.platform.name.strip()})")
    print(f"pipeline: pre kernel (u8 image -> f32) -> network (3 conv, {CHANNELS} channels) -> "
          f"post kernel (f32 -> u8 mask); ms per frame, median of rounds")
    print(f"{'size':>10} {'before ms':>10} {'after ms':>10} {'before/after':>13}")
    rng = np.random.default_rng(1)
    for size in (int(s) for s in args.sizes.split(",")):
        graph = small_cnn(size)
        before, after = Before(device, graph, size), After(device, graph, size)
        images = [rng.integers(0, 256, (1, 3, size, size), dtype=np.uint8)
                  for _ in range(args.frames)]
        for image in images:                       # warm, and the same answer both ways
            want = before.frame(image).copy()
            got = after.frame(image)
            if not np.array_equal(got, want):
                print(f"size {size}: the masks differ", file=sys.stderr)
                return 1
        t_before = t_after = 0.0
        for _ in range(2):                         # interleaved halves, so drift hits both
            t_before += measure(before, images, args.seconds / 2) / 2
            t_after += measure(after, images, args.seconds / 2) / 2
        print(f"{f'{size}x{size}':>10} {t_before:10.3f} {t_after:10.3f} "
              f"{t_before / t_after:12.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
