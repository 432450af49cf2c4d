"""What a streaming step cannot go below on a device (docs/benchmarks.md, "Streaming a TCN"):

  floor: a step of a kernel whose only work is to write 100 floats, through the calls
  CausalStream makes (its frames set by value, the launch, the outputs read back; wall, median
  of 3000): with a blocking read (as step), and the same into pinned host memory; with a
  non-blocking read waited on by its event (as step_async); with no read, the queue finished
  (the read's share); and the cost of setting a 256-byte argument by value through pyopencl's
  Kernel.set_arg and through its lower entry _set_arg_buf (kernel_objects.set_arg_by_value);
  links: the cost of one link of a serial chain in one work-group (the step kernel's chain runs
  51 such ops one after another), from the kernel's profiled time at 128 links and at none
  (that kernel still loads the registers' weights): a barrier and a local-memory round trip; a
  25-wide dot product with its weights in registers, then a barrier; the same with its weights
  read from global memory (rows of 28 floats; the loop reads 2 rows, which stay in the cache,
  the unrolled chain 16 rows in turn); each as a loop and unrolled.

    python bench/step_floor.py [--device GPU|CPU|name]
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np
import pyopencl as cl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gpu_peers  # noqa: E402

from customlayers.runtime.device.device import Engine, describe_device  # noqa: E402
from customlayers.runtime.device.kernel_objects import set_arg_by_value  # noqa: E402
from customlayers.runtime.streaming.causal_stream import read_into  # noqa: E402

LINKS = 128
FLOOR_SRC = """
typedef struct { float v[64]; } frames;
__kernel void write100(__global float* out, const frames given) {
    const int i = get_global_id(0);
    if (i < 100) out[i] = given.v[i & 63];
}
"""


def median_us(fn, runs: int) -> float:
    """The median wall time of `runs` calls, after a tenth as many not timed."""
    return gpu_peers.median_ms(fn, runs, warmup=runs // 10) * 1e3


def floor(engine, runs: int) -> None:
    ctx, queue = engine.context, cl.CommandQueue(engine.context, engine.device)
    kernel = cl.Kernel(cl.Program(ctx, FLOOR_SRC).build(), "write100")
    out = cl.Buffer(ctx, cl.mem_flags.WRITE_ONLY, 400)
    given, host = np.zeros(64, np.float32), np.empty(100, np.float32)
    kernel.set_arg(0, out)
    kernel.set_arg(1, given)

    # the read's own share, and whether the host memory it reads into matters: pinned memory
    # (a mapped ALLOC_HOST_PTR buffer) as the destination, and the kernel waited for with no
    # read at all (the floor a zero-copy output would have; OpenCL has none a kernel may write
    # while the host holds it mapped, and NVIDIA's OpenCL has no fine-grained SVM)
    pinned_buffer = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.ALLOC_HOST_PTR, 400)
    pinned, _ = cl.enqueue_map_buffer(queue, pinned_buffer, cl.map_flags.READ, 0, (100,),
                                      np.float32, is_blocking=True)

    def step(finish):
        """A step as CausalStream makes it (the frame set by value, the launch), then
        `finish()`: how the outputs come back, or none."""
        def one():
            set_arg_by_value(kernel, 1, given)
            cl.enqueue_nd_range_kernel(queue, kernel, (128,), (128,))
            finish()
        return one

    blocking = step(lambda: read_into(queue, host, out, None, True))
    into_pinned = step(lambda: read_into(queue, pinned, out, None, True))
    by_event = step(lambda: read_into(queue, host, out, None, False).wait())
    no_read = step(queue.finish)

    print(f"step with a blocking read       {median_us(blocking, runs):7.1f} us")
    print(f"  the same into pinned memory   {median_us(into_pinned, runs):7.1f} us")
    print(f"step read by its event          {median_us(by_event, runs):7.1f} us")
    print(f"step with no read (finish)      {median_us(no_read, runs):7.1f} us")
    pinned.base.release(queue)
    set_arg = median_us(lambda: kernel.set_arg(1, given), runs)
    print(f"set_arg of 256 bytes by value   {set_arg:7.1f} us")
    if hasattr(kernel, "_set_arg_buf"):
        print(f"_set_arg_buf of the same        "
              f"{median_us(lambda: kernel._set_arg_buf(1, given), runs):7.1f} us")


def _link(kind: str, i: int) -> str:
    src, dst = (i & 1) * 32, 32 - (i & 1) * 32
    if kind == "barrier":
        return (f"{{ float v = 0.0f; if (lid < 25) v = a[(lid + 1) % 25 + {src}] * 0.999f + "
                f"0.5f; barrier(CLK_LOCAL_MEM_FENCE); if (lid < 25) a[lid + {dst}] = v; "
                f"barrier(CLK_LOCAL_MEM_FENCE); }}")
    weight = "h{s}_{j}" if kind == "registers" else "vload4({j}, w + {row} + lid * 28)"
    terms = " ".join(f"acc = fma({weight.format(s=i % 3, j=j, row=(i % 16) * 700)}, "
                     f"vload4({j}, a + {src}), acc);" for j in range(7))
    return (f"if (lid < 25) {{ float4 acc = (float4)(0.0f); {terms} a[{dst} + lid] = "
            f"fmax(acc.x + acc.y + acc.z + acc.w, 0.0f); }} barrier(CLK_LOCAL_MEM_FENCE);")


def _links_source() -> str:
    held = ", ".join(f"h{s}_{j} = vload4({j}, w + {s * 700} + (lid % 25) * 28)"
                     for s in range(3) for j in range(7))
    text = ""
    for kind in ("barrier", "registers", "memory"):
        for form in ("none", "loop", "unrolled"):
            body = {"none": "",
                    "loop": f"for (int it = 0; it < {LINKS // 2}; it++) {{ {_link(kind, 0)} "
                            f"{_link(kind, 1)} }}",
                    "unrolled": "\n".join(_link(kind, i) for i in range(LINKS))}[form]
            text += (f"__kernel void {kind}_{form}(__global float* out, __global const float* w)"
                     f" {{\n __local float a[64]; const int lid = get_local_id(0);\n"
                     f" float4 {held};\n if (lid < 64) a[lid] = lid * 0.01f;\n"
                     f" barrier(CLK_LOCAL_MEM_FENCE);\n{body}\n"
                     f" if (lid < 25) out[lid] = a[lid] + h0_0.x + h2_6.w;\n}}\n")
    return text


def links(engine, runs: int) -> None:
    ctx = engine.context
    queue = cl.CommandQueue(ctx, engine.device,
                            properties=cl.command_queue_properties.PROFILING_ENABLE)
    program = cl.Program(ctx, _links_source()).build()
    out = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4096)
    weights = np.random.default_rng(0).random(16 * 700).astype(np.float32) * 0.05
    w = cl.Buffer(ctx, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=weights)

    def kernel_us(name: str, ls: int) -> float:
        kernel = cl.Kernel(program, name)
        times = []
        for _ in range(runs):
            event = kernel(queue, (ls,), (ls,), out, w)
            event.wait()
            times.append((event.profile.end - event.profile.start) * 1e-3)
        return statistics.median(times[runs // 10:])

    print(f"\none link of a serial chain in one work-group, ns ({LINKS} links against none)")
    for kind in ("barrier", "registers", "memory"):
        for ls in (32, 256):
            none = kernel_us(f"{kind}_none", ls)
            loop, unrolled = (kernel_us(f"{kind}_{form}", ls) for form in ("loop", "unrolled"))
            print(f"{kind:10s} group of {ls:3d}: no links {none:5.1f} us; a link "
                  f"{(loop - none) / LINKS * 1e3:6.1f} ns as a loop, "
                  f"{(unrolled - none) / LINKS * 1e3:6.1f} ns unrolled")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="CPU, GPU, or a device name")
    ap.add_argument("--runs", type=int, default=3000)
    args = ap.parse_args(argv)
    engine = Engine(device=args.device)
    d = describe_device(engine.device)
    print(f"device: {d['name']} ({d['platform']}, {d['type']}, driver {d['driver']})")
    floor(engine, args.runs)
    links(engine, 60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
