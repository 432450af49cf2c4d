"""One walk binds a launch's arguments for every caller (runtime/device/launch_args.py): each kind of
jit/launch.py Arg reaches the kernel as the caller's source gives it, and a kind the launch
language does not define is refused with the layer named, by every caller alike."""
from __future__ import annotations

import numpy as np
import pyopencl as cl
import pytest

from customlayers.errors import ModelError
from customlayers.jit.launch import Arg, KernelLaunch
from customlayers.jit.tensor import TensorDesc
from customlayers.runtime.checks.bounds import run_guarded
from customlayers.runtime.device.device import Engine
from customlayers.runtime.device.launch_args import ArgumentSource, bind_args

# every kind at once: y = (x * c staged through __local) + n, via a scratch buffer
SOURCE = """
__kernel void every_kind(__global const float* x, __global float* y, __global const float* c,
                         __global float* tmp, const int n, __local float* staged) {
    int i = get_global_id(0), l = get_local_id(0);
    staged[l] = x[i] * c[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    tmp[i] = staged[l] + (float)n;
    y[i] = tmp[i];
}
"""
N = 8
X = np.arange(N, dtype=np.float32)
C = np.linspace(1.0, 2.0, N).astype(np.float32)
EXPECTED = X * C + 3


def _launch(*extra: Arg) -> KernelLaunch:
    args = (Arg.input(0), Arg.output(0), Arg.const(C), Arg.scratch(0, 4 * N),
            Arg.scalar(np.int32(3)), Arg.local(4 * 4), *extra)
    return KernelLaunch(SOURCE, "every_kind", args, (N,), (4,), label="every_kind")


class _Buffers(ArgumentSource):
    """A caller of its own: plain buffers, recording what it was asked for."""

    def __init__(self, context):
        self.context, self.asked, self.keep = context, [], []
        mf = cl.mem_flags
        self.x = cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=X)
        self.y = cl.Buffer(context, mf.READ_WRITE, X.nbytes)

    def input(self, arg, position):
        self.asked.append(("input", arg.index, position))
        return self.x

    def output(self, arg, position):
        self.asked.append(("output", arg.index, position))
        return self.y

    def const(self, arg, position):
        self.asked.append(("const", position))
        self.keep.append(cl.Buffer(self.context, cl.mem_flags.READ_ONLY |
                                   cl.mem_flags.COPY_HOST_PTR, hostbuf=arg.value))
        return self.keep[-1]

    def scratch(self, arg, position):
        self.asked.append(("scratch", arg.index, position))
        self.keep.append(cl.Buffer(self.context, cl.mem_flags.READ_WRITE, arg.nbytes))
        return self.keep[-1]

    def local(self, arg, position):
        self.asked.append(("local", arg.nbytes, position))
        return cl.LocalMemory(arg.nbytes)


@pytest.fixture(scope="module")
def engine(test_device):
    return Engine(test_device)


def test_every_kind_is_bound_as_the_source_gives_it(engine):
    source = _Buffers(engine.context)
    args = bind_args(_launch().args, source, "every_kind")
    assert source.asked == [("input", 0, 0), ("output", 0, 1), ("const", 2), ("scratch", 0, 3),
                            ("local", 16, 5)]
    assert args[4] == np.int32(3)                        # a scalar passes by value
    kernel = cl.Kernel(engine.build(SOURCE), "every_kind")
    kernel.set_args(*args)
    cl.enqueue_nd_range_kernel(engine.queue, kernel, (N,), (4,))
    y = np.empty(N, np.float32)
    cl.enqueue_copy(engine.queue, y, source.y)
    np.testing.assert_allclose(y, EXPECTED, rtol=1e-6)


def test_the_bounds_checker_binds_every_kind_through_it(engine):
    desc = TensorDesc((N,), "f32")
    outputs, problems = run_guarded(engine, engine.build(SOURCE), _launch(), "every_kind",
                                    [X], [desc], [desc])
    assert problems == []
    np.testing.assert_allclose(outputs[0], EXPECTED, rtol=1e-6)


def test_an_unknown_kind_is_refused_with_the_layer_named(engine):
    bad = _launch(Arg("texture", 1))
    with pytest.raises(ModelError, match=r"layer 'conv7': unknown argument kind 'texture'"):
        bind_args(bad.args, _Buffers(engine.context), "conv7")
    desc = TensorDesc((N,), "f32")
    with pytest.raises(ModelError, match=r"layer 'conv7': unknown argument kind 'texture'"):
        run_guarded(engine, engine.build(SOURCE), bad, "conv7", [X], [desc], [desc])


def test_a_kind_the_caller_cannot_bind_is_refused():
    class OnlyTensors(ArgumentSource):
        def input(self, arg, position):
            return "x"

    assert bind_args((Arg.input(0), Arg.scalar(np.float32(1))), OnlyTensors(), "l") == \
        ["x", np.float32(1)]
    with pytest.raises(ModelError, match=r"OnlyTensors cannot bind an argument of kind 'local'"):
        bind_args((Arg.local(4),), OnlyTensors(), "l")
