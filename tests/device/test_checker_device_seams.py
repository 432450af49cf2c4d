"""Issue 19, finding 4: the checkers reach OpenCL only through the device and execute rooms. A
checker's child process opens the parent's device by its position (device.open_engine_at, a
DeviceError when it is not there), and one launch runs alone on buffers given as host bytes
(execute/one_launch.py), a launch the device refuses being LaunchFailed, which the
--check-bounds child reports as a fault of the layer's kernel."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.errors import DeviceError, ExecutionError
from customlayers.jit.launch import Arg, KernelLaunch
from customlayers.jit.tensor import TensorDesc
from customlayers.runtime.checks.bounds_process import run_guarded_in_child
from customlayers.runtime.device.device import Engine, device_position, open_engine_at
from customlayers.runtime.execute.one_launch import (HostBytes, LaunchFailed, LocalBytes,
                                                     run_one_launch)

SOURCE = """
__kernel void twice(__global const float* x, __global float* y, const float add,
                    __local float* staged) {
    int i = get_global_id(0), l = get_local_id(0);
    staged[l] = x[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    y[i] = 2.0f * staged[l] + add;
}
"""
N = 8
X = np.arange(N, dtype=np.float32)


@pytest.fixture(scope="module")
def engine(test_device):
    return Engine(test_device)


def test_a_child_opens_the_parents_device_by_its_position(engine):
    opened = open_engine_at(device_position(engine.device), engine.device.name)
    assert opened.device == engine.device
    assert opened.context != engine.context          # a context of its own


def test_a_device_that_is_not_there_is_a_device_error(engine):
    with pytest.raises(DeviceError, match=r"there is no OpenCL device 99\.0"):
        open_engine_at((99, 0))
    with pytest.raises(DeviceError, match=r"'Another device' in the parent"):
        open_engine_at(device_position(engine.device), "Another device")


def test_one_launch_reads_back_the_whole_buffer_around_the_kernels_part(engine):
    guard = max(int(engine.device.mem_base_addr_align) // 8, 64)
    host = np.full(guard + X.nbytes + guard, 0xCB, np.uint8)
    after = run_one_launch(engine, engine.build(SOURCE), "twice", (N,), (4,),
                           [HostBytes(X.view(np.uint8).copy()),
                            HostBytes(host, offset=guard, size=X.nbytes),
                            np.float32(1), LocalBytes(4 * 4)])
    assert after[2] is None and after[3] is None
    np.testing.assert_array_equal(after[0].view(np.float32), X)
    y = after[1]
    assert (y[:guard] == 0xCB).all() and (y[guard + X.nbytes:] == 0xCB).all()
    np.testing.assert_array_equal(y[guard:guard + X.nbytes].view(np.float32), 2 * X + 1)


def test_a_launch_the_device_refuses_is_launch_failed(engine):
    with pytest.raises(LaunchFailed) as failed:
        run_one_launch(engine, engine.build(SOURCE), "thrice", (N,), (4,),
                       [HostBytes(X.view(np.uint8).copy()), HostBytes(np.zeros(X.nbytes, np.uint8)),
                        np.float32(1), LocalBytes(16)])
    assert isinstance(failed.value, ExecutionError)


def test_the_bounds_child_reports_a_refused_launch_as_a_fault_of_the_kernel(engine):
    launch = KernelLaunch(SOURCE, "thrice", (Arg.input(0), Arg.output(0),
                                             Arg.scalar(np.float32(1)), Arg.local(16)),
                          (N,), (4,), label="twice")
    desc = TensorDesc((N,), "f32")
    outputs, problems = run_guarded_in_child(engine, None, launch, "Twice", [X], [desc], [desc])
    assert outputs == []
    (problem,) = problems
    assert str(problem).startswith("layer 'Twice': kernel 'thrice': failed on the device (")
