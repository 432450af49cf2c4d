"""Stop 28, issue 22: what makes a warm load fast and a first inference compile nothing.

- An Engine on PoCL sets POCL_WORK_GROUP_SPECIALIZATION=0 where the user has not set it: every
  launch runs the program's one work-group function for any size, which the program's binary
  holds, so the first launch compiles nothing (PoCL's own cache folder gets no new kernel) and
  the program cache keeps binaries.
- pyopencl's argument setters are made once per kind of kernel (kernel_objects.py): a request
  binds a Kernel per launch.
- Scalar arguments are set with their types declared (launch_args.set_kernel_args): packed by
  pyopencl in one call, 10x faster than each through the buffer protocol.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyopencl as cl
import pyopencl.invoker as invoker
import pytest

from customlayers.runtime.device.device import Engine
from customlayers.runtime.device.kernel_objects import set_kernel_args
from customlayers.runtime.device.limits import is_pocl_platform

ROOT = Path(__file__).resolve().parents[2]

# one program built through an Engine's cache, then one launch of a local size of 16: the files
# PoCL's cache folder gained with that launch, and what the kernel computed
_FIRST_LAUNCH = textwrap.dedent("""
    import json, os, sys
    from pathlib import Path
    import numpy as np
    import pyopencl as cl
    from customlayers.runtime.device.device import Engine
    engine = Engine(sys.argv[1])
    top = Path(os.environ["POCL_CACHE_DIR"])
    def files():
        return {str(p.relative_to(top)) for p in top.rglob("*.so")}
    program = engine.cache.build(engine.context, engine.device,
        "__kernel void twice(__global float* a) { a[get_global_id(0)] *= 2.0f; }\\n")
    before = files()
    x = np.arange(64, dtype=np.float32)
    buf = cl.Buffer(engine.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                    hostbuf=x)
    kernel = cl.Kernel(program, "twice")
    kernel.set_args(buf)
    cl.enqueue_nd_range_kernel(engine.queue, kernel, (64,), (16,))
    cl.enqueue_copy(engine.queue, x, buf)
    print(json.dumps({"new": sorted(files() - before), "x": x.tolist(),
                      "setting": os.environ.get("POCL_WORK_GROUP_SPECIALIZATION")}))
""")


def _first_launch(device, tmp_path: Path, name: str, **env) -> dict:
    environ = {k: v for k, v in os.environ.items() if k != "POCL_WORK_GROUP_SPECIALIZATION"}
    environ.update(env, POCL_CACHE_DIR=str(tmp_path / f"pocl-{name}"),
                   CUSTOMLAYERS_CACHE_DIR=str(tmp_path / f"ours-{name}"),
                   PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", _FIRST_LAUNCH, device.name.strip()],
                         env=environ, capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_an_engine_on_pocl_turns_work_group_specialization_off_unless_the_user_set_it(
        cl_env, monkeypatch):
    _, _, dev = cl_env
    monkeypatch.delenv("POCL_WORK_GROUP_SPECIALIZATION", raising=False)
    Engine(dev)
    assert os.environ.get("POCL_WORK_GROUP_SPECIALIZATION") == ("0" if is_pocl_platform(dev)
                                                                 else None)
    monkeypatch.setenv("POCL_WORK_GROUP_SPECIALIZATION", "1")     # the user's own value
    Engine(dev)
    assert os.environ["POCL_WORK_GROUP_SPECIALIZATION"] == "1"


def test_the_first_launch_on_pocl_compiles_nothing_more(cl_env, tmp_path):
    """In a process of its own (PoCL reads POCL_CACHE_DIR once): the program's build and
    binary give PoCL every kernel it runs; with the user's POCL_WORK_GROUP_SPECIALIZATION=1 the
    same launch compiles a kernel for its work-group size (the test's own check that the
    folder shows it)."""
    _, _, dev = cl_env
    if not is_pocl_platform(dev):
        pytest.skip("PoCL's work-group specialization and cache folder")
    want = (2 * np.arange(64, dtype=np.float32)).tolist()
    default = _first_launch(dev, tmp_path, "default")
    assert default["setting"] == "0" and default["x"] == want
    assert default["new"] == [], default["new"]
    specialized = _first_launch(dev, tmp_path, "specialized", POCL_WORK_GROUP_SPECIALIZATION="1")
    assert specialized["setting"] == "1" and specialized["x"] == want
    assert len(specialized["new"]) == 1 and "16-1-1" in specialized["new"][0], specialized
    # the first program's entry kept its binary; the specializing PoCL's did not
    entries = lambda name: list((tmp_path / f"ours-{name}" / "programs").iterdir())  # noqa: E731
    assert [(e / "program.bin").exists() for e in entries("default")] == [True]
    assert [(e / "program.bin").exists() for e in entries("specialized")] == [False]


def test_argument_setters_are_made_once_per_kind_of_kernel(cl_env):
    ctx, queue, dev = cl_env
    Engine(dev)                               # installs the memo (once per process)
    generate = invoker.generate_enqueue_and_set_args
    assert getattr(generate, "_customlayers_memo", False)
    # the kernels' own names and counts (pyopencl's disk cache holds what any Kernel puts there)
    program = cl.Program(ctx, "__kernel void fill(__global float* a, float v) "
                              "{ a[get_global_id(0)] = v; }\n"
                              "__kernel void copy(__global float* a, __global float* b) "
                              "{ a[get_global_id(0)] = b[get_global_id(0)]; }").build()
    for by_name in (False, True):        # pyopencl may pass them either way
        args = ("fill", 2, 2, None)
        more = dict(work_around_arg_count_bug=False, warn_about_arg_count_bug=False,
                    devs=[dev])
        call = (lambda: generate(*args, **more)) if by_name else \
            (lambda: generate(*args, *more.values()))
        first, again = call(), call()
        assert first[0] is again[0] and first[1] is again[1]
    assert generate("copy", 2, 2, None, False, False, [dev])[0] is not first[0]
    # every Kernel asks for them as it is made (so the memo is what takes effect), and two
    # kernels of one kind still hold their own arguments
    asked = []

    def spy(*a, **k):
        asked.append(a[0] if a else k.get("function_name"))
        return generate(*a, **k)
    invoker.generate_enqueue_and_set_args = spy
    try:
        kernels = [cl.Kernel(program, "fill") for _ in range(3)]
    finally:
        invoker.generate_enqueue_and_set_args = generate
    assert asked == ["fill"] * 3
    outs = [np.zeros(8, np.float32) for _ in kernels]
    bufs = [cl.Buffer(ctx, cl.mem_flags.WRITE_ONLY, 32) for _ in kernels]
    for value, (kernel, buf) in enumerate(zip(kernels, bufs)):
        kernel.set_args(buf, np.float32(value + 1))
    for kernel in kernels:
        cl.enqueue_nd_range_kernel(queue, kernel, (8,), None)
    for out, buf in zip(outs, bufs):
        cl.enqueue_copy(queue, out, buf)
    assert [float(o[0]) for o in outs] == [1.0, 2.0, 3.0]
    assert all((o == o[0]).all() for o in outs)


class _Declared:
    """A kernel's stand-in that records the types declared before its arguments are set."""

    def __init__(self, kernel):
        self.kernel, self.declared = kernel, []

    def set_arg_types(self, types):
        self.declared.append(list(types))
        self.kernel.set_arg_types(types)

    def set_args(self, *args):
        self.kernel.set_args(*args)


def test_typed_scalar_arguments_arrive_as_given(cl_env):
    """Every scalar type a launch passes, declared, with a buffer, __local memory and a NULL
    buffer between them: the kernel writes back what it got, exactly."""
    ctx, queue, dev = cl_env
    program = cl.Program(ctx, """
        #pragma OPENCL EXTENSION cl_khr_fp64 : enable
        __kernel void echo(__global double* out, int a, uint b, __local float* tmp, float c,
                           __global float* none, long d, ulong e, short f, uchar g, double h) {
            tmp[0] = c;
            barrier(CLK_LOCAL_MEM_FENCE);
            out[0] = a; out[1] = b; out[2] = tmp[0]; out[3] = d; out[4] = e; out[5] = f;
            out[6] = g; out[7] = h; out[8] = none == 0 ? 1.0 : 0.0;
        }""").build()
    out = cl.Buffer(ctx, cl.mem_flags.WRITE_ONLY, 9 * 8)
    args = [out, np.int32(-7), np.uint32(4000000000), cl.LocalMemory(16), np.float32(0.1),
            None, np.int64(-(2 ** 40)), np.uint64(2 ** 41), np.int16(-300), np.uint8(250),
            np.float64(1 / 3)]
    kernel = _Declared(cl.Kernel(program, "echo"))
    set_kernel_args(kernel, args)
    assert kernel.declared == [[None, np.int32, np.uint32, None, np.float32, None, np.int64,
                                np.uint64, np.int16, np.uint8, np.float64]]
    cl.enqueue_nd_range_kernel(queue, kernel.kernel, (1,), (1,))
    got = np.empty(9, np.float64)
    cl.enqueue_copy(queue, got, out)
    want = [-7, 4000000000, float(np.float32(0.1)), -(2 ** 40), 2 ** 41, -300, 250, 1 / 3, 1]
    assert got.tolist() == want


def test_a_kernel_of_buffers_only_declares_nothing(cl_env):
    ctx, queue, _ = cl_env
    program = cl.Program(ctx, "__kernel void k(__global float* a) { a[0] = 2.0f; }").build()
    buf = cl.Buffer(ctx, cl.mem_flags.WRITE_ONLY, 4)
    kernel = _Declared(cl.Kernel(program, "k"))
    set_kernel_args(kernel, [buf])
    assert kernel.declared == []
    cl.enqueue_nd_range_kernel(queue, kernel.kernel, (1,), None)
    got = np.empty(1, np.float32)
    cl.enqueue_copy(queue, got, buf)
    assert got[0] == 2.0
