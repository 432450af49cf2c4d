"""A plain runner for KernelLaunch lists, for op tests that need no executor.

Deliberately simple (blocking, no program cache of the runtime's): it states what a launch list
means. The last few programs are kept in memory (`_built`): a test that runs an op's every
candidate builds the same padding or reduce pass once per candidate, and PoCL's own cache still
took 40 ms a build to find it (1,353 such builds in one cold suite, 58 s, stop 41).

Kernels shaped for a GPU, run on a CPU device (PoCL) to check their arithmetic, are built there
with -cl-opt-disable (`shaped_for`): no user runs them so, and PoCL's optimizer made their first
build the most of the suite's cold time. The register-blocked tiles (gemm_async.cl, the fused
attention) took it about 1.1 s a kernel (0.37 s turning work-items into loops, 0.73 s of
machine code) against 0.09 s unoptimized: test_fused_attention's 49 tile cases 30.7 s against
8.2 s with PoCL's cache empty (stop 41). The optimized builds of these kernels are the GPU's own,
which the suite checks on the GPU machine (CUSTOMLAYERS_TEST_DEVICE=GPU: the device is then no
CPU, and nothing changes); kernels shaped for a CPU are built here as a user's are.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Sequence

import numpy as np
import pyopencl as cl

from customlayers.jit.tensor import TensorDesc
from customlayers.jit.launch import CompileContext, KernelLaunch
from customlayers.runtime.device.build import compile_source


def run_launches(cl_env, launches: Sequence[KernelLaunch], inputs: Sequence[np.ndarray],
                 input_descs: Sequence[TensorDesc],
                 output_descs: Sequence[TensorDesc],
                 shaped_for: CompileContext | None = None) -> list[np.ndarray]:
    """`shaped_for`: the compile context the launches were made for; where it is not a CPU's
    (GPU traits, or none: the GPU forms) and the device is one, they are built unoptimized (see
    the module's docstring). Without it, every launch is built as the runtime builds it."""
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
    extra = " -cl-opt-disable" if simulated_here(shaped_for, device) else ""
    for launch in launches:
        # built as the runtime builds (compile_source): pyopencl's own build adds -I <its folder
        # in this virtual environment> to the options, and PoCL keys its cache by them, so
        # every new checkout compiled every program of these tests again
        prg = _built_program(ctx, device, launch, launch.options + extra)
        kernel = cl.Kernel(prg, launch.entry)
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


# the programs last built here, by (context, source, options): a few, so that the suite's memory
# does not grow with the programs of every test
_KEPT_PROGRAMS = 16
_built: OrderedDict = OrderedDict()


def _built_program(ctx, device, launch: KernelLaunch, options: str) -> cl.Program:
    key = (ctx.int_ptr, launch.source, options)
    if key in _built:
        _built.move_to_end(key)
        return _built[key]
    prg, _ = compile_source(ctx, device, launch.source, options, line_map=launch.line_map,
                            label=launch.label)
    _built[key] = prg
    while len(_built) > _KEPT_PROGRAMS:
        _built.popitem(last=False)
    return prg


def simulated_here(shaped_for: CompileContext | None, device) -> bool:
    """Whether launches made for `shaped_for` are a GPU's kernels run on this CPU device."""
    return shaped_for is not None and not shaped_for.on_cpu and \
        bool(device.type & cl.device_type.CPU)


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
