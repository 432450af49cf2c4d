"""A plain runner for KernelLaunch lists, for op tests that need no executor.

Deliberately simple (blocking, no caching): it states what a launch list means.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pyopencl as cl

from customlayers.jit.tensor import TensorDesc
from customlayers.jit.launch import KernelLaunch
from customlayers.runtime.device.build import compile_source


def run_launches(cl_env, launches: Sequence[KernelLaunch], inputs: Sequence[np.ndarray],
                 input_descs: Sequence[TensorDesc],
                 output_descs: Sequence[TensorDesc]) -> list[np.ndarray]:
    ctx, queue, _ = cl_env
    mf = cl.mem_flags
    in_bufs = []
    for arr, desc in zip(inputs, input_descs):
        host = desc.pack(arr)
        in_bufs.append(cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=host))
    out_bufs = [cl.Buffer(ctx, mf.READ_WRITE, max(d.nbytes, 1)) for d in output_descs]
    scratch: dict[int, cl.Buffer] = {}
    keep = []
    device = ctx.devices[0]
    for launch in launches:
        # built as the runtime builds (compile_source): pyopencl's own build adds -I <its folder
        # in this virtual environment> to the options, and PoCL keys its cache by them, so
        # every new checkout compiled every program of these tests again
        prg, _ = compile_source(ctx, device, launch.source, launch.options,
                                line_map=launch.line_map, label=launch.label)
        kernel = getattr(prg, launch.entry)
        args = []
        for a in launch.args:
            if a.kind == "input":
                args.append(in_bufs[a.index])
            elif a.kind == "output":
                args.append(out_bufs[a.index])
            elif a.kind == "const":
                buf = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a.value)
                keep.append(buf)
                args.append(buf)
            elif a.kind == "scratch":
                if a.index not in scratch:
                    scratch[a.index] = cl.Buffer(ctx, mf.READ_WRITE, max(a.nbytes, 1))
                args.append(scratch[a.index])
            elif a.kind == "scalar":
                args.append(a.value)
            elif a.kind == "local":
                args.append(cl.LocalMemory(a.nbytes))
            else:
                raise ValueError(f"unknown arg kind {a.kind}")
        kernel.set_args(*args)
        cl.enqueue_nd_range_kernel(queue, kernel, launch.global_size, launch.local_size)
    outs = []
    for buf, desc in zip(out_bufs, output_descs):
        host = np.empty(desc.buffer_count, desc.np_dtype)
        cl.enqueue_copy(queue, host, buf)
        outs.append(desc.unpack(host))
    queue.finish()
    return outs


def kernel_sample(variants, count: int = 3) -> tuple:
    """A few of an op's variants that still cover its kernel forms: the first `count` (the
    heuristic's pick first), then the first split-K tiling and the first tiling whose blocks are
    not float4 fragments where those are not among them. Each variant is a program to build (a
    second on PoCL), so the tests of every form stay fast."""
    picked = list(variants[:count])
    for test in (lambda v: getattr(v, "ksplit", 1) > 1,
                 lambda v: hasattr(v, "rm") and (v.rm % 4 or v.rn % 4)):
        if not any(test(v) for v in picked):
            picked += [v for v in variants if test(v)][:1]
    return tuple(picked)
