"""A network inside the user's OpenCL pipeline: their context and queue, device buffers in and
out, events both ways, pinned host memory, streaming (issue 10). Real kernels on the test
device; references in numpy."""
from __future__ import annotations

import time

import numpy as np
import pyopencl as cl
import pyopencl.array as cla
import pytest

from customlayers.api import Engine, ExecutionError, Network, TensorError
from customlayers.errors import DeviceError, ModelError
from interop_graphs import (SHAPE, chain, chain_ref, input_view, relu_shift_ref, two_outputs,
                            view_output)

N = int(np.prod(SHAPE))
NBYTES = N * 4

_USER_KERNELS = """
__kernel void pre(__global const float* src, __global float* dst) {
    const int i = get_global_id(0); dst[i] = 2.0f * src[i] - 0.5f; }
__kernel void post(__global const float* src, __global float* dst) {
    const int i = get_global_id(0); dst[i] = src[i] + 1.0f; }
"""


@pytest.fixture(scope="module")
def user(test_device):
    """The user's own context, in-order queue, out-of-order queue and kernels."""
    ctx = cl.Context([test_device])
    prg = cl.Program(ctx, _USER_KERNELS).build()
    ooo = cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE
    try:
        ooo_queue = cl.CommandQueue(ctx, test_device, properties=ooo)
    except cl.Error:
        ooo_queue = None
    return {"ctx": ctx, "queue": cl.CommandQueue(ctx, test_device), "ooo": ooo_queue,
            "pre": cl.Kernel(prg, "pre"), "post": cl.Kernel(prg, "post"), "dev": test_device}


def _x(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(SHAPE).astype(np.float32)


def _buffer(ctx, array=None, nbytes=NBYTES):
    mf = cl.mem_flags
    if array is None:
        return cl.Buffer(ctx, mf.READ_WRITE, nbytes)
    return cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=array)


def _read(queue, buf, shape=SHAPE) -> np.ndarray:
    out = np.empty(shape, np.float32)
    cl.enqueue_copy(queue, out, buf)
    return out


# -- events both ways ---------------------------------------------------------------------------
def test_start_async_waits_for_the_event_on_the_device_and_reads_the_input_where_it_lies(user):
    """The pre-kernel writes the input only after an unset UserEvent; start_async returns at
    once, and the network reads the input once the event is set: a copy made at set time (or
    at start) would have read the stale zeros."""
    ctx, q = user["ctx"], user["queue"]
    other_q = cl.CommandQueue(ctx, user["dev"])       # only the event orders pre -> network
    net = Network(chain(), None, Engine.from_queue(q))
    req = net.create_request()
    src = _x(1)
    src_buf, x_buf = _buffer(ctx, src), _buffer(ctx, np.zeros(SHAPE, np.float32))
    y_buf = _buffer(ctx, np.full(SHAPE, -7.0, np.float32))
    req.set_tensor("x", x_buf)
    req.set_tensor("y", y_buf)
    gate = cl.UserEvent(ctx)
    pre = user["pre"]
    pre.set_args(src_buf, x_buf)
    pre_done = cl.enqueue_nd_range_kernel(other_q, pre, (N,), None, wait_for=[gate])
    t = time.perf_counter()
    done = req.start_async(wait_for=[pre_done])
    assert time.perf_counter() - t < 1.0
    assert isinstance(done, cl.Event)
    time.sleep(0.1)
    # nothing ran before the event (reading y_buf now would wait too: PoCL orders commands
    # on a buffer across queues)
    assert done.command_execution_status != cl.command_execution_status.COMPLETE
    assert pre_done.command_execution_status != cl.command_execution_status.COMPLETE
    gate.set_status(cl.command_execution_status.COMPLETE)
    assert req.wait() == {}                    # no host outputs: the device output is in place
    np.testing.assert_array_equal(_read(q, y_buf), chain_ref(2 * src - 0.5))
    assert req.copies == 0


def test_a_post_kernel_chains_on_the_returned_event_without_a_host_wait(user):
    ctx, q = user["ctx"], user["queue"]
    net = Network(chain(), None, Engine.from_queue(q))
    req = net.create_request()
    x = _x(2)
    x_buf, y_buf, z_buf = _buffer(ctx, x), _buffer(ctx), _buffer(ctx)
    req.set_tensor("x", x_buf)
    req.set_tensor("y", y_buf)
    post = user["post"]
    post.set_args(y_buf, z_buf)
    for _ in range(3):                           # the request runs again with the same tensors
        done = req.start_async()
        last = cl.enqueue_nd_range_kernel(q, post, (N,), None, wait_for=[done])
        req.wait()
    last.wait()
    np.testing.assert_allclose(_read(q, z_buf), chain_ref(x) + 1, rtol=0, atol=0)


def test_a_failed_user_event_is_an_error_not_a_hang(user):
    """The request's own queue (Engine.from_context): some drivers leave the commands behind a
    failed event queued for ever, and the request then takes a fresh queue."""
    ctx = user["ctx"]
    q = cl.CommandQueue(ctx, user["dev"])                # only for reading back here
    net = Network(chain(), None, Engine.from_context(ctx))
    req = net.create_request()
    x = _x(3)
    y_buf = _buffer(ctx, np.full(SHAPE, -7.0, np.float32))
    req.set_tensor("x", x)
    req.set_tensor("y", y_buf)
    gate = cl.UserEvent(ctx)
    req.start_async(wait_for=[gate])
    gate.set_status(-5)
    t = time.perf_counter()
    with pytest.raises(ExecutionError, match=r"wait_for event 0 failed \(status -5\)"):
        req.wait()
    assert time.perf_counter() - t < 5
    np.testing.assert_array_equal(_read(q, y_buf), -7.0)          # nothing written half
    # an event that failed before start: refused before anything is enqueued
    with pytest.raises(ExecutionError, match="wait_for event 0 failed"):
        req.start_async(wait_for=[gate])
    assert not req.busy
    req.start_async()                             # the request still works
    req.wait()
    np.testing.assert_array_equal(_read(q, y_buf), chain_ref(x))


def test_a_wait_on_an_unset_event_can_be_bounded(user):
    ctx = user["ctx"]
    net = Network(chain(), None, Engine.from_queue(user["queue"]))
    req = net.create_request()
    req.set_tensor("x", _x(4))
    gate = cl.UserEvent(ctx)
    req.start_async(wait_for=[gate])
    with pytest.raises(ExecutionError, match="still waiting for its wait_for events"):
        req.wait(timeout=0.05)
    assert req.busy
    gate.set_status(cl.command_execution_status.COMPLETE)
    np.testing.assert_array_equal(req.wait()["y"], chain_ref(_x(4)))


def test_an_out_of_order_queue_is_ordered_by_events(user):
    """Buffers are reused by the memory plan (the chain needs 2 slots for 8 tensors): without
    write-after-read waits the out-of-order queue would race."""
    q = user["ooo"]
    if q is None:
        pytest.skip("the device has no out-of-order queues")
    ctx = user["ctx"]
    net = Network(chain(8), None, Engine.from_queue(q))
    assert len(net.plan.memory.slot_sizes) < len(net.plan.memory.slot_of)
    req = net.create_request()
    src, z_buf = _buffer(ctx), _buffer(ctx)
    x_buf, y_buf = _buffer(ctx), _buffer(ctx)
    req.set_tensor("x", x_buf)
    req.set_tensor("y", y_buf)
    pre, post = user["pre"], user["post"]
    for seed in range(5):
        x = _x(10 + seed)
        wrote = cl.enqueue_copy(q, src, x, is_blocking=False)
        pre.set_args(src, x_buf)
        pre_done = cl.enqueue_nd_range_kernel(q, pre, (N,), None, wait_for=[wrote])
        done = req.start_async(wait_for=[pre_done])
        post.set_args(y_buf, z_buf)
        post_done = cl.enqueue_nd_range_kernel(q, post, (N,), None, wait_for=[done])
        req.wait()
        out = np.empty(SHAPE, np.float32)
        cl.enqueue_copy(q, out, z_buf, wait_for=[post_done])
        np.testing.assert_array_equal(out, chain_ref(2 * x - 0.5, 8) + 1)
    # host inputs and outputs on the same queue: uploads and reads are ordered by events too
    plain = net.create_request()
    for seed in range(3):
        x = _x(20 + seed)
        np.testing.assert_array_equal(plain.infer({"x": x})["y"], chain_ref(x, 8))


# -- device outputs written in place ----------------------------------------------------------
def _kernel_buffers(req, root) -> list[int]:
    """int_ptr of the buffers the request's kernels are bound to for tensor `root`."""
    return [req._bound[root].int_ptr for _ in req._uses[root]]


def test_the_output_lands_in_the_users_buffer_with_no_copy(user, monkeypatch):
    ctx, q = user["ctx"], user["queue"]
    net = Network(chain(), None, Engine.from_context(ctx))
    req = net.create_request()
    x = _x(5)
    x_buf, y_buf = _buffer(ctx, x), _buffer(ctx)
    req.set_tensor("x", x_buf)
    req.set_tensor("y", y_buf)
    copies = []
    real = cl.enqueue_copy
    monkeypatch.setattr(cl, "enqueue_copy", lambda *a, **k: (copies.append(1), real(*a, **k))[1])
    req.start_async()
    assert req.wait() == {}
    monkeypatch.undo()
    assert copies == [] and req.copies == 0
    y_key = dict(net.plan.outputs)["y"]
    assert set(_kernel_buffers(req, net.plan.root(y_key))) == {y_buf.int_ptr}
    x_key = dict(net.plan.inputs)["x"]
    assert set(_kernel_buffers(req, x_key)) == {x_buf.int_ptr}
    np.testing.assert_array_equal(_read(q, y_buf), chain_ref(x))


def test_an_output_read_by_later_layers_lies_in_the_users_buffer(user):
    ctx, q = user["ctx"], user["queue"]
    net = Network(two_outputs(), None, Engine.from_queue(q))
    req = net.create_request()
    x = _x(6)
    a_buf = _buffer(ctx)
    req.set_tensor("x", x)
    req.set_tensor("a", a_buf)
    req.start_async()
    outs = req.wait()
    assert list(outs) == ["b"]                     # the host output; "a" is on the device
    np.testing.assert_array_equal(_read(q, a_buf), relu_shift_ref(x, 0.1))
    np.testing.assert_array_equal(outs["b"], relu_shift_ref(x, 0.1, 0.2))
    a_root = net.plan.root(dict(net.plan.outputs)["a"])
    assert set(_kernel_buffers(req, a_root)) == {a_buf.int_ptr}   # written and read there


def test_an_output_that_is_a_view_is_written_in_place(user):
    ctx, q = user["ctx"], user["queue"]
    net = Network(view_output(), None, Engine.from_queue(q))
    req = net.create_request()
    x = _x(7)
    y = cla.empty(q, (2, 315), np.float32)
    req.set_tensor("x", x)
    req.set_tensor("y", y)
    before = req.copies
    req.start_async()
    req.wait()
    assert req.copies - before == (0 if Engine.from_queue(q).unified_memory else 1)
    np.testing.assert_array_equal(y.get(), relu_shift_ref(x, 0.1).reshape(2, 315))


def test_an_output_that_is_the_input_is_one_device_copy(user):
    ctx, q = user["ctx"], user["queue"]
    net = Network(input_view(), None, Engine.from_queue(q))
    req = net.create_request()
    x = _x(8)
    x_buf, y_buf = _buffer(ctx, x), _buffer(ctx)
    req.set_tensor("x", x_buf)
    req.set_tensor("y", y_buf)
    req.start_async()
    req.wait()
    assert req.copies == 1                         # device to device, never through the host
    np.testing.assert_array_equal(_read(q, y_buf, (2, 315)), x.reshape(2, 315))


def test_runs_on_the_same_device_buffers_check_them_once_and_follow_every_change(user,
                                                                                 monkeypatch):
    """Runs whose tensors are all the user's device buffers take the last run's bindings and
    copies again (prepared once): new contents of a buffer are read, and a set_tensor, of a
    buffer or of an array, is followed at the next run."""
    import customlayers.runtime.execute.request as request_module
    ctx, q = user["ctx"], user["queue"]
    net = Network(input_view(), None, Engine.from_queue(q))
    req = net.create_request()
    prepared = []
    real = request_module.prepare_run
    monkeypatch.setattr(request_module, "prepare_run",
                        lambda *a, **k: (prepared.append(1), real(*a, **k))[1])
    x1, x2, x3 = _x(21), _x(22), _x(23)
    x_buf, y_buf, y2_buf = _buffer(ctx, x1), _buffer(ctx), _buffer(ctx)
    req.set_tensor("x", x_buf)
    req.set_tensor("y", y_buf)
    for _ in range(3):                             # the same buffers: prepared once
        req.start_async()
        assert req.wait() == {}
    assert len(prepared) == 1 and req.copies == 3  # the device-side copy made every run
    np.testing.assert_array_equal(_read(q, y_buf, (2, 315)), x1.reshape(2, 315))
    cl.enqueue_copy(q, x_buf, x2)                  # new contents, the same buffer
    req.start_async()
    req.wait()
    np.testing.assert_array_equal(_read(q, y_buf, (2, 315)), x2.reshape(2, 315))
    assert len(prepared) == 1
    req.set_tensor("y", y2_buf)                    # another output buffer: prepared again
    req.start_async()
    req.wait()
    assert len(prepared) == 2
    np.testing.assert_array_equal(_read(q, y2_buf, (2, 315)), x2.reshape(2, 315))
    req.set_tensor("x", x3)                        # a host array: uploaded, every run
    for _ in range(2):
        req.start_async()
        req.wait()
    assert len(prepared) == 4
    np.testing.assert_array_equal(_read(q, y2_buf, (2, 315)), x3.reshape(2, 315))


def test_host_outputs_are_a_new_array_every_run(user):
    """An output the user gave no buffer for is read into a new array each run (never the
    last run's, which the caller may still hold), also after runs on device buffers alone."""
    ctx, q = user["ctx"], user["queue"]
    net = Network(chain(), None, Engine.from_queue(q))
    req = net.create_request()
    x1, x2 = _x(24), _x(25)
    x_buf = _buffer(ctx, x1)
    req.set_tensor("x", x_buf)
    req.start_async()
    first = req.wait()["y"]
    cl.enqueue_copy(q, x_buf, x2)
    req.start_async()
    second = req.wait()["y"]
    assert first is not second
    np.testing.assert_array_equal(first, chain_ref(x1))
    np.testing.assert_array_equal(second, chain_ref(x2))


_BYXF_LAYER = """
<CustomLayer name="ReLU" type="SimpleGPU" version="1">
  <Kernel entry="relu_byxf"><Source filename="k.cl"/></Kernel>
  <Buffers>
    <Tensor arg-index="0" type="input" port-index="0" format="BYXF"/>
    <Tensor arg-index="1" type="output" port-index="0" format="BYXF"/>
  </Buffers>
</CustomLayer>
"""
_BYXF_KERNEL = """
__kernel void relu_byxf(__global const INPUT0_TYPE* in, __global OUTPUT0_TYPE* out)
{
    const int i = get_global_id(0);      /* dense BYXF: the same walk for both */
    out[i] = max(in[i], (INPUT0_TYPE)0);
}
"""


def test_an_output_in_another_format_is_reordered_by_one_kernel_into_the_users_buffer(user):
    from customlayers.api import Registry
    ctx, q = user["ctx"], user["queue"]
    engine = Engine.from_queue(q)
    reg = Registry(engine)
    reg.load_string(_BYXF_LAYER, {"k.cl": _BYXF_KERNEL}, name="byxf.xml")
    net = Network(chain(2), reg, engine)
    last = net.plan.steps[-1]
    assert last.type == "Reorder"                  # custom BYXF output -> dense BFYX
    req = net.create_request()
    x = _x(9)
    y_buf = _buffer(ctx)
    req.set_tensor("x", x)
    req.set_tensor("y", y_buf)
    before = req.copies
    req.start_async()
    req.wait()
    uploads = 0 if engine.unified_memory else 1
    assert req.copies - before == uploads          # no copy of the output
    y_root = net.plan.root(dict(net.plan.outputs)["y"])
    assert set(_kernel_buffers(req, y_root)) == {y_buf.int_ptr}
    np.testing.assert_allclose(_read(q, y_buf), chain_ref(x, 2), atol=1e-6)


def test_array_offsets_are_honoured(user):
    ctx, q = user["ctx"], user["queue"]
    engine = Engine.from_queue(q)
    align = engine.device.mem_base_addr_align // 8
    net = Network(chain(), None, engine)
    x = _x(11)
    for offset_elems in (align // 4, 1):           # a sub-buffer; a device-side copy
        big_in = cla.to_device(q, np.concatenate([np.zeros(offset_elems, np.float32),
                                                  x.ravel()]))
        big_out = cla.zeros(q, N + offset_elems + 3, np.float32)
        req = net.create_request()
        req.set_tensor("x", big_in[offset_elems:].reshape(SHAPE))
        req.set_tensor("y", big_out[offset_elems:offset_elems + N].reshape(SHAPE))
        req.start_async()
        req.wait()
        got = big_out.get()
        np.testing.assert_array_equal(got[offset_elems:offset_elems + N].reshape(SHAPE),
                                      chain_ref(x))
        assert not got[:offset_elems].any() and not got[offset_elems + N:].any()


# -- host memory ------------------------------------------------------------------------------
def test_host_tensors_are_pinned_and_read_in_place(user, test_device):
    engine = Engine(test_device)
    net = Network(chain(), None, engine)
    req = net.create_request()
    hx, hy = req.host_tensor("x"), req.host_tensor("y")
    assert hx.shape == SHAPE and hx.dtype == np.float32 and req.host_tensor("x") is hx
    for seed in range(3):
        hx[...] = _x(30 + seed)
        req.start_async()
        outs = req.wait()
        assert outs["y"] is hy
        np.testing.assert_array_equal(hy, chain_ref(_x(30 + seed)))
    if engine.unified_memory:                       # PoCL: host memory is the device's
        assert req.copies == 0


def test_numpy_inputs_are_used_where_they_lie_on_a_cpu_device(test_device):
    engine = Engine(test_device)
    if not engine.unified_memory:
        pytest.skip("host and device memory differ on this device")
    net = Network(chain(), None, engine)
    req = net.create_request()
    x = _x(12)
    before = req.copies
    np.testing.assert_array_equal(req.infer({"x": x})["y"], chain_ref(x))
    assert req.copies - before == 1                 # the output read, no input upload
    before = req.copies
    out = np.empty(SHAPE, np.float32)
    req.set_tensor("y", out)                        # an output array of the user's
    outs = req.infer({"x": x[::-1].copy()})
    assert outs["y"] is out and req.copies - before == 1
    np.testing.assert_array_equal(out, chain_ref(x[::-1]))


# -- streaming --------------------------------------------------------------------------------
@pytest.mark.parametrize("pinned", [False, True])
def test_streamed_outputs_are_in_order_and_equal_to_one_by_one_inference(test_device, pinned):
    net = Network(two_outputs(), None, Engine(test_device))
    xs = [_x(40 + i) for i in range(9)]
    one_by_one = [net.infer({"x": x}) for x in xs]
    streamed = []
    for outs in net.stream(iter(xs), nireq=3, pinned=pinned):
        streamed.append({k: v.copy() for k, v in outs.items()})   # pinned: valid until next
    assert len(streamed) == len(xs)
    for got, want in zip(streamed, one_by_one):
        assert list(got) == ["a", "b"]
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])


@pytest.mark.parametrize("pinned", [False, True])
def test_every_streamed_output_stays_valid_when_the_caller_keeps_them_all(test_device, pinned):
    """list(net.stream(...)): results handed to the caller are not overwritten by later steps
    (issue 18: pinned streaming handed out the requests' host tensors, rewritten by the next
    run on the same request)."""
    net = Network(two_outputs(), None, Engine(test_device))
    xs = [_x(60 + i) for i in range(9)]
    one_by_one = [net.infer({"x": x}) for x in xs]
    streamed = list(net.stream(xs, nireq=3, pinned=pinned))
    assert len(streamed) == len(xs)
    for got, want in zip(streamed, one_by_one):
        assert list(got) == ["a", "b"]
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])


@pytest.mark.parametrize("bad", [0, 2, 6])
def test_a_bad_item_of_a_stream_comes_after_the_items_before_it(test_device, bad):
    """An item that cannot run (the wrong shape): every item before it is yielded, in order and
    right, then the error names the item (the results in flight were lost and the error did
    not say which item: a new user's trial)."""
    net = Network(two_outputs(), None, Engine(test_device))
    xs = [_x(80 + i) for i in range(9)]
    xs[bad] = np.zeros((1,) + tuple(SHAPE[1:-1]) + (SHAPE[-1] + 1,), np.float32)
    got = []
    with pytest.raises(ModelError, match=f"^item {bad} of the stream: input 'x' has shape"):
        for outs in net.stream(xs, nireq=4):
            got.append(outs)
    assert len(got) == bad
    for outs, x in zip(got, xs):
        np.testing.assert_array_equal(outs["a"], net.infer({"x": x})["a"])


def test_pinned_streaming_reuses_its_host_tensors_only_when_asked(test_device):
    """reuse_outputs=True: each request's pinned host tensors are handed out as they are (no
    copy), so item i and item i + nireq share memory; each is valid until the next is taken."""
    net = Network(two_outputs(), None, Engine(test_device))
    xs = [_x(80 + i) for i in range(6)]
    one_by_one = [net.infer({"x": x}) for x in xs]
    kept = []
    for i, outs in enumerate(net.stream(xs, nireq=2, pinned=True, reuse_outputs=True)):
        for k in one_by_one[i]:
            np.testing.assert_array_equal(outs[k], one_by_one[i][k])
        kept.append(outs)
    assert np.shares_memory(kept[0]["a"], kept[2]["a"])
    copied = list(net.stream(xs, nireq=2, pinned=True))
    assert not np.shares_memory(copied[0]["a"], copied[2]["a"])


def test_a_stream_keeps_at_most_nireq_requests_in_flight(test_device):
    net = Network(chain(), None, Engine(test_device))
    seen = []
    from customlayers.runtime.execute.stream import run_stream
    for r in run_stream(net, ({"x": _x(i)} for i in range(7)), nireq=2):
        seen.append((r.index, id(r.request)))
        assert r.latency_ms >= 0
    assert [i for i, _ in seen] == list(range(7))
    assert len({rid for _, rid in seen}) == 2
    with pytest.raises(ModelError, match="nireq must be a whole number of at least 1, found 0"):
        list(net.stream([_x(0)], nireq=0))


# -- bad input ----------------------------------------------------------------------------------
def test_bad_tensors_are_refused_with_expected_against_found(user, test_device):
    ctx, q = user["ctx"], user["queue"]
    net = Network(chain(), None, Engine.from_queue(q))
    req = net.create_request()
    with pytest.raises(TensorError, match=r"input 'x': buffer too small: expected at least "
                                          rf"{NBYTES} bytes \(\[2, 5, 7, 9\] f32\), found 16"):
        req.set_tensor("x", _buffer(ctx, nbytes=16))
    other = cl.Context([test_device])
    with pytest.raises(TensorError, match="output 'y': the buffer belongs to another OpenCL "
                                          "context"):
        req.set_tensor("y", _buffer(other))
    with pytest.raises(TensorError, match="input 'x': expected a pyopencl array of float32, "
                                          "found int32"):
        req.set_tensor("x", cla.zeros(q, SHAPE, np.int32))
    with pytest.raises(TensorError, match=r"output 'y': expected shape \[2, 5, 7, 9\], found "
                                          r"\[2, 315\]"):
        req.set_tensor("y", cla.zeros(q, (2, 315), np.float32))
    with pytest.raises(ModelError, match=r"input 'x' has shape \[3\]; the network was "
                                         r"compiled for \[2, 5, 7, 9\]"):
        req.set_tensor("x", np.zeros(3, np.float32))
    with pytest.raises(TensorError, match="output 'y': expected an array of float32, found "
                                          "float64"):
        req.set_tensor("y", np.zeros(SHAPE))
    with pytest.raises(TensorError, match="no tensor 'z' in the network; inputs: x; outputs: y"):
        req.set_tensor("z", np.zeros(SHAPE, np.float32))
    with pytest.raises(TensorError, match="no tensor 'z'"):
        req.host_tensor("z")
    with pytest.raises(TensorError, match="expected a numpy array, a pyopencl.Buffer or a "
                                          "pyopencl.array.Array, found list"):
        req.set_tensor("x", [1, 2])
    shared = _buffer(ctx)
    req.set_tensor("x", shared)
    with pytest.raises(TensorError, match="output 'y': its buffer overlaps the one of input 'x'"):
        req.set_tensor("y", shared)
    with pytest.raises(TensorError, match="input 'x': no value"):
        net.create_request().start_async()
    # a host tensor, or any tensor, of a request that is still running
    gate = cl.UserEvent(ctx)
    req.start_async(wait_for=[gate])
    with pytest.raises(ExecutionError, match="host tensor 'x': the request is still running"):
        req.host_tensor("x")
    with pytest.raises(ExecutionError, match="tensor 'y': the request is still running"):
        req.set_tensor("y", _buffer(ctx))
    gate.set_status(cl.command_execution_status.COMPLETE)
    req.wait()


def test_engines_on_the_users_objects_are_checked(user, test_device):
    ctx = user["ctx"]
    with pytest.raises(DeviceError, match="takes a pyopencl.Context, not str"):
        Engine.from_context("GPU")
    with pytest.raises(DeviceError, match="takes a pyopencl.CommandQueue, not Context"):
        Engine.from_queue(ctx)
    engine = Engine.from_context(ctx)
    assert engine.device == test_device and engine.context is ctx
    assert Engine.from_context(ctx, test_device).device == test_device
    with pytest.raises(DeviceError, match="device must be a pyopencl.Device of the context, "
                                          "not Context"):
        Engine.from_context(ctx, device=ctx)
    from customlayers.runtime.device.device import list_devices
    for other in [d for d in list_devices() if d != test_device][:1]:   # where there is one
        with pytest.raises(DeviceError, match="is not a device of the context; its devices:"):
            Engine.from_context(ctx, device=other)
    # a registry whose engine is another context's: its layers would be built there
    from customlayers.api import Registry
    with pytest.raises(DeviceError, match="the registry's engine runs on"):
        Network(chain(), Registry(Engine(test_device)), Engine.from_queue(user["queue"]))
    # profiling needs a profiling queue
    with pytest.raises(DeviceError, match="profiling needs a queue made with PROFILING_ENABLE"):
        Network(chain(), None, Engine.from_queue(user["queue"]), profiling=True).create_request()


def test_the_registry_and_cache_work_on_the_users_context(user):
    from customlayers.api import Registry
    from pathlib import Path
    relu = Path(__file__).resolve().parents[2] / "examples" / "layers" / "relu" / "relu.xml"
    engine = Engine.from_queue(user["queue"])
    reg = Registry(engine)
    reg.load(relu)
    net = Network(chain(2), reg, engine)
    assert any(s.impl == "custom" for s in net.plan.steps)
    x = _x(13)
    np.testing.assert_allclose(net.infer({"x": x})["y"], chain_ref(x, 2), atol=1e-6)


def test_the_documented_pipeline_example_runs_and_agrees_with_the_host(test_device, monkeypatch):
    """The first Python block of docs/pipelines.md (moved there from the README) runs as
    written from the repository's root, and its answer is the network's on the host."""
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    doc = (root / "docs" / "pipelines.md").read_text()
    section = doc[doc.index("# Inside your pipeline"):]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(root)
    monkeypatch.setattr(cl, "create_some_context", lambda *a, **k: cl.Context([test_device]))
    scope: dict = {}
    exec(compile(code, "docs/pipelines.md", "exec"), scope)      # noqa: S102 - our own example
    net, image = scope["net"], scope["image"]
    x = image.astype(np.float32) / np.float32(255) - np.float32(0.5)
    prob = Network(net.graph, None, Engine(test_device)).infer({"data": x})["prob/sink"]
    assert scope["answer"][0] == int(np.argmax(prob))


def test_benchmark_nireq_runs_on_the_stream(monkeypatch, capsys):
    """`benchmark -nireq N` and Network.stream share run_stream: N requests, in order."""
    from pathlib import Path
    import customlayers.runtime.execute.stream as stream
    from customlayers.cli import main
    seen = []
    real = stream.run_stream

    def watched(*a, **k):
        for r in real(*a, **k):
            seen.append((r.index, id(r.request)))
            yield r
    monkeypatch.setattr(stream, "run_stream", watched)
    model = Path(__file__).resolve().parents[2] / "examples" / "models" / "demo_cnn_builtin.xml"
    import os
    device = os.environ.get("CUSTOMLAYERS_TEST_DEVICE", "CPU")
    assert main(["benchmark", "-m", str(model), "-d", device, "-niter", "7", "-nireq", "3"]) == 0
    assert [i for i, _ in seen] == list(range(7)) and len({r for _, r in seen}) == 3
    out = capsys.readouterr().out
    assert "count:      7 inferences" in out and "p95" in out and "throughput:" in out
