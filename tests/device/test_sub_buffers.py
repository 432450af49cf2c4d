"""Sub-buffers are released before their parents and their context, explicitly, never in the
garbage collector's order (runtime/device/sub_buffers.py). NVIDIA's driver segfaulted releasing a
Concat slice's sub-buffer after the network's own context had gone (tests/device/
test_concat_in_place.py on the H100); PoCL survives any order, so these tests watch the reference
counts OpenCL keeps: a live sub-buffer holds one on its parent."""
from __future__ import annotations

import gc

import numpy as np
import pyopencl as cl

from customlayers.runtime.device.device import Engine
from customlayers.runtime.compile.network import Network
from customlayers.runtime.device.sub_buffers import SubBuffers
from interop_graphs import Builder, relu_shift_ref


def test_a_sub_buffer_is_released_before_its_parent_and_context(test_device):
    ctx = cl.Context([test_device])
    queue = cl.CommandQueue(ctx)
    parent = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 8192)
    owner = SubBuffers()
    sub = owner.cut(parent, 4096, 4096)
    assert owner.cut(parent, 4096, 4096) is sub and len(owner) == 1   # one per region
    # PoCL counts the sub-buffer's hold on its parent; NVIDIA's count stays at 1 (which is
    # why the order is ours to keep)
    counted = parent.reference_count
    assert counted == 2 if test_device.type & cl.device_type.CPU else counted in (1, 2)
    cl.enqueue_copy(queue, sub, np.arange(1024, dtype=np.float32))
    owner.release()
    assert parent.reference_count == 1 and len(owner) == 0
    back = np.empty(2048, np.float32)                  # the parent is whole and usable
    cl.enqueue_copy(queue, back, parent)
    np.testing.assert_array_equal(back[1024:], np.arange(1024, dtype=np.float32))
    owner.release()                                    # twice is harmless


def test_the_owner_keeps_the_context_until_its_sub_buffers_are_gone(test_device):
    ctx = cl.Context([test_device])
    alone = ctx.reference_count
    parent = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 8192)
    owner = SubBuffers()
    owner.cut(parent, 0, 4096)
    held = ctx.reference_count
    del parent                                         # the owner holds the parent
    assert ctx.reference_count == held
    del owner                                          # dropped: sub-buffer, parent, context
    assert ctx.reference_count == alone


def test_a_network_with_its_own_context_freed_by_the_collector_releases_everything(
        test_device):
    """A network and its requests refer to each other: the garbage collector frees them. Every
    object of the context goes, sub-buffers of in-place Concats included, and the numbers were
    right before that."""
    ctx = cl.Context([test_device])
    alone = ctx.reference_count
    b = Builder("cycle")
    x = b.param("x", (1, 4, 16, 16))
    parts = [b.relu_shift(x, 0.1 * k) for k in range(3)]
    cat = b.op("Concat", parts, (1, 12, 16, 16), {"axis": "1"}, name="cat")
    b.result(b.relu_shift(cat, 0.0, name="y"))
    net = Network(b.g, None, Engine.from_queue(cl.CommandQueue(ctx)), tuning="off")
    assert net.plan.memory.in_place_tensors == 3
    feed = np.random.default_rng(3).standard_normal((1, 4, 16, 16)).astype(np.float32)
    want = np.concatenate([relu_shift_ref(feed, 0.1 * k) for k in range(3)], 1)
    np.testing.assert_array_equal(net.infer({"x": feed})["y"], want)
    del net
    for _ in range(3):       # a collection can leave what its finalizers let go to the next
        gc.collect()
    assert ctx.reference_count == alone
