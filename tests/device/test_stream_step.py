"""The streaming step kernel (ops/stream/step_kernel.py) run by CausalStream
(runtime/streaming/causal_stream.py) against the numpy stepper (ops/stream/reference.py), every
step of whole sequences; reset, another N, bad frames, the state API."""
from __future__ import annotations

import threading
import time

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array
import pytest

from customlayers.errors import DeviceError, ModelError, TensorError
from customlayers.ops.stream.program import CausalConv
from customlayers.ops.stream.reference import ReferenceStream
from customlayers.ops.stream.step_kernel import step_kernel
from customlayers.runtime.device.device import Engine
from customlayers.runtime.streaming.causal_stream import CausalStream, _poll

import stream_programs as sp


@pytest.fixture(scope="module")
def engine():
    return Engine()


def close(got, want, where):
    """rtol 1e-5 of the float64 reference, with an absolute floor at 1e-5 of the output's
    scale (a sum that cancels to near zero has no relative precision in float32)."""
    scale = max(float(np.abs(want).max()), 1e-30)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * scale, err_msg=where)


def run_both(stream, program, frames):
    ref = ReferenceStream(program, frames.shape[1])
    for t, frame in enumerate(frames):
        got, want = stream.step(frame), ref.step(frame)
        assert set(got) == set(want)
        for name in want:
            assert got[name].shape == want[name].shape
            close(got[name], want[name], f"step {t}, output '{name}'")
    return ref


def sequence(program, n, steps, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((steps, n, program.input_channels)).astype(np.float32)


@pytest.mark.parametrize("n", [1, 64])
def test_tcn_every_step(engine, n):
    program = sp.tcn(levels=8)
    stream = CausalStream(engine, program)
    run_both(stream, program, sequence(program, n, 300 if n == 1 else 140))
    assert stream.t == (300 if n == 1 else 140)


def test_poll_gives_up_at_its_limit_and_sees_a_finished_command(engine):
    """A CPU device's step polls its read-back for at most POLL_LIMIT_S, then blocks: the poll
    gives up on a command still waiting and returns at once for one that is done."""
    event = cl.UserEvent(engine.context)
    start = time.perf_counter()
    assert _poll(event, 2e-3) is False
    assert time.perf_counter() - start >= 2e-3
    event.set_status(cl.command_execution_status.COMPLETE)
    assert _poll(event, 10.0) is True


def _gated(queue, seconds):
    """Hold the queue's next commands for `seconds` (a marker waiting on a user event that a
    timer completes): the next step surely outlasts a short poll."""
    event = cl.UserEvent(queue.context)
    cl.enqueue_marker(queue, wait_for=[event])
    threading.Timer(seconds, event.set_status, [cl.command_execution_status.COMPLETE]).start()


def test_a_cpu_stream_blocks_only_after_slow_steps_in_a_row(engine, monkeypatch):
    """One slow step (a first step allocates; a busy moment) leaves a CPU device's stream
    polling; POLL_MISSES in a row make it block for POLL_RETRY steps, then poll again. Every
    step's outputs stay the reference's."""
    from customlayers.runtime.streaming import causal_stream
    if not engine.device.type & cl.device_type.CPU:
        pytest.skip("only a CPU device polls its steps")
    monkeypatch.setattr(causal_stream, "POLL_LIMIT_S", 0.05)
    monkeypatch.setattr(causal_stream, "POLL_RETRY", 2)
    program = sp.tcn(levels=2)
    stream = CausalStream(engine, program, batch=1)
    ref = ReferenceStream(program, 1)
    frames = iter(sequence(program, 1, 20))

    def step(gate=False):
        if gate:
            _gated(stream._queue, 0.2)
        frame = next(frames)
        got, want = stream.step(frame), ref.step(frame)
        for name in want:
            close(got[name], want[name], f"step {stream.t}")

    step(), step()
    assert (stream._misses, stream._blocked) == (0, 0)
    step(gate=True)
    assert (stream._misses, stream._blocked) == (1, 0)
    step()
    assert (stream._misses, stream._blocked) == (0, 0)
    for _ in range(causal_stream.POLL_MISSES):
        step(gate=True)
    assert (stream._misses, stream._blocked) == (0, 2)
    step(), step()
    assert stream._blocked == 0
    step(gate=True)                               # polling again
    assert stream._misses == 1


def test_step_outputs_are_the_callers_to_keep(engine):
    """step() reads the outputs into memory of the stream's own (pinned host memory where the
    device maps it) and hands out copies: each step's outputs stay as they were through later
    steps, a reset and another N."""
    program = sp.tcn(levels=2)
    stream = CausalStream(engine, program)
    frames = sequence(program, 2, 6)
    ref = ReferenceStream(program, 2)
    kept = [(stream.step(f), ref.step(f)) for f in frames]
    stream.reset()
    stream.step(sequence(program, 3, 1, seed=1)[0])
    for t, (got, want) in enumerate(kept):
        for name in want:
            close(got[name], want[name], f"step {t}, output '{name}', read after later steps")


@pytest.mark.parametrize("n,local_size", [(1, None), (5, 64), (2, 4), (3, 8)])
def test_every_op_kind(engine, n, local_size):
    """The CPU's one work-item (each convolution one loop over all its channels); 4 and 8:
    fewer work-items than channels (blocks of channels, a last one short) and than a
    softmax's channels; 64: a GPU's group (a work-item per channel)."""
    program = sp.every_op()
    stream = CausalStream(engine, program, local_size=local_size)
    run_both(stream, program, sequence(program, n, 400, seed=n))


def test_more_channels_than_work_items_and_split_sums(engine):
    program = sp.wide()
    for cpu_form in (True, False):      # blocks of 75 channels; a channel every 4th
        stream = CausalStream(engine, program, local_size=4, cpu_form=cpu_form)
        # strided frames (every other channel of a wider array): uploaded as a copy
        wider = np.repeat(sequence(program, 2, 12), 2, axis=2)
        run_both(stream, program, wider[:, :, ::2])
    # a GPU-sized group on the CPU too: the long past-tap sums split in parts
    small = sp.tcn(levels=2, channels=6, kernel=3, cin=40)
    kernel = step_kernel(small, max_group=256, local_mem=1 << 16, local_size=256, is_cpu=True)
    assert "const int part" in kernel.text
    run_both(CausalStream(engine, small, local_size=64), small, sequence(small, 3, 20))


def test_reset_and_another_batch(engine):
    program = sp.tcn(levels=3, channels=8, kernel=3)
    stream = CausalStream(engine, program)
    frames = sequence(program, 4, 30)
    run_both(stream, program, frames)
    with pytest.raises(TensorError, match=r"3 streams .* runs 4 .*reset\(\)"):
        stream.step(frames[0, :3])
    stream.reset()
    assert stream.t == 0
    run_both(stream, program, frames)              # the same answers from zeroed rings
    stream.reset()
    run_both(stream, program, sequence(program, 7, 25, seed=3))
    assert stream.batch == 7


def test_bad_frames(engine):
    program = sp.tcn(levels=2, channels=8, kernel=3, cin=2)
    stream = CausalStream(engine, program, batch=2)
    for bad, what in [(np.zeros((2, 3), np.float32), r"\[2, 3\] and type float32"),
                      (np.zeros((2, 3), np.float64), r"\[2, 3\] and type float32"),
                      (np.zeros((2, 2, 1), np.float32), r"\[2, 2, 1\]"),
                      (np.zeros((2, 2), bool), "bool"),
                      ([[0.5, 1.0], [2.0]], "a frame of list that is no array"),
                      (1.0, r"shape \[\] and type float32")]:
        with pytest.raises(TensorError, match=what):
            stream.step(bad)
    given = r"1 streams .* made for batch=2; make another stream for 1"
    with pytest.raises(TensorError, match=given):
        stream.step(np.zeros((1, 2), np.float32))
    stream.reset()                                 # a given batch stays: reset() cannot help
    with pytest.raises(TensorError, match=given):
        stream.step(np.zeros((1, 2), np.float32))
    assert stream.t == 0


def test_float64_frames_and_lists_step_as_float32(engine):
    """As infer() and run's inputs take them (a new user's np.random.randn frame was refused):
    the same outputs as the float32 frame; integer frames too."""
    program = sp.tcn(levels=2, channels=8, kernel=3, cin=2)
    frames = sequence(program, 2, 6)
    by32, by64, by_list, by_int32, by_ints = (CausalStream(engine, program, batch=2)
                                          for _ in range(5))
    for frame in frames:
        want = by32.step(frame)
        for stream, given in ((by64, frame.astype(np.float64)), (by_list, frame.tolist())):
            got = stream.step(given)
            for name in want:
                np.testing.assert_array_equal(got[name], want[name])
        whole = np.round(frame * 4)                     # integers: int32 as their float32
        for name, value in by_int32.step(whole.astype(np.int32)).items():
            np.testing.assert_array_equal(value, by_ints.step(whole.astype(np.float32))[name])


@pytest.mark.parametrize("n", [3, 40])
def test_frames_on_the_device(engine, n):
    """n = 40: 80 floats, more than go by value: the numpy frames are uploaded."""
    program = sp.tcn(levels=3, channels=8, kernel=3, cin=2)
    frames = sequence(program, n, 20)
    stream = CausalStream(engine, program)
    ref = ReferenceStream(program, n)
    queue = cl.CommandQueue(engine.context, engine.device)
    for t, frame in enumerate(frames):
        on_device = cl_array.to_device(queue, frame)
        queue.finish()
        # in turn: a pyopencl Array, a Buffer, a numpy frame (by value in the launch)
        got = stream.step((on_device, on_device.data, frame)[t % 3])
        close(got["y"], ref.step(frame)["y"], f"step {t}")


def test_step_async_pipelines(engine):
    """16 steps in flight (more than ASYNC_PINNED: the others read into plain memory), then a
    pipeline 3 deep whose pinned rows wait() gives back to later steps: every output kept by
    the caller stays its step's."""
    from customlayers.runtime.streaming.causal_stream import ASYNC_PINNED
    program = sp.tcn(levels=3, channels=8, kernel=3, cin=2)
    frames = sequence(program, 2, 16)
    stream = CausalStream(engine, program)
    pending = [stream.step_async(f) for f in frames]
    assert len(frames) > ASYNC_PINNED
    ref = ReferenceStream(program, 2)
    for t, (p, frame) in enumerate(zip(pending, frames)):
        close(p.wait()["y"], ref.step(frame)["y"], f"step {t}")
    frames = sequence(program, 2, 30, seed=1)
    kept, wants, flight = [], [], []
    for frame in frames:
        flight.append(stream.step_async(frame))
        wants.append(ref.step(frame)["y"])
        if len(flight) == 3:
            kept.append(flight.pop(0).wait())
    kept += [p.wait() for p in flight]
    assert flight[-1].wait() is kept[-1]                    # a second wait: the same outputs
    for t, (got, want) in enumerate(zip(kept, wants)):
        close(got["y"], want, f"pipelined step {t}")


def test_query_state_and_set_state(engine):
    program = sp.tcn(levels=2, channels=4, kernel=3, cin=2)
    frames = sequence(program, 2, 9)
    stream = CausalStream(engine, program)
    ref = run_both(stream, program, frames)
    states = stream.query_state()
    assert [s.name for s in states] == [c.name for c in program.convolutions]
    for state, conv in zip(states, program.convolutions):
        np.testing.assert_allclose(state.state, ref.history[id(conv)], rtol=1e-6, atol=1e-6)
    first = states[0]
    np.testing.assert_array_equal(first.state[:, :, -1], frames[-1])   # the newest input frame
    # set every ring to the reference's, then continue: the same steps as the reference
    rng = np.random.default_rng(5)
    for state, conv in zip(states, program.convolutions):
        new = rng.standard_normal(state.shape).astype(np.float32)
        state.set_state(new)
        ref.history[id(conv)][...] = new
        np.testing.assert_array_equal(state.state, new)
    run_both_from(stream, ref, sequence(program, 2, 8, seed=9))
    states[0].reset()
    assert not states[0].state.any()
    with pytest.raises(TensorError, match=r"set_state of 'conv1'.*expected \[2, 2, 2\]"):
        states[0].set_state(np.zeros((2, 2, 3)))


def run_both_from(stream, ref, frames):
    for t, frame in enumerate(frames):
        got, want = stream.step(frame), ref.step(frame)
        for name in want:
            close(got[name], want[name], f"step {t}, output '{name}'")


def test_local_memory_refused(engine):
    b = sp.Builder(100_000)
    x = b.input
    for _ in range(6):
        x = b.pw(x, "tanh")
    program = b.program([("y", x)])
    need = 4 * 7 * 100_000
    assert need > engine.device.local_mem_size
    with pytest.raises(ModelError, match=r"needs 2734 KiB of local memory \(7 frames of 700000 "
                                         r"floats in all, for 6 layers, 0 of them causal "
                                         r"convolutions.*\); '.*' has \d+ KiB"):
        CausalStream(engine, program)
    # a GPU's 48 KiB: the seed's TCN fits, 8 levels of 400 channels do not
    assert step_kernel(sp.tcn(), max_group=1024, local_mem=48 << 10).local_bytes < 10 << 10
    with pytest.raises(ModelError, match=r"for 51 layers, 16 of them causal convolutions with "
                                         r"6400 channels of partial sums\); the device has 48"):
        step_kernel(sp.tcn(channels=400, kernel=2), max_group=1024, local_mem=48 << 10)


def test_on_the_users_out_of_order_queue(engine):
    """Engine.from_queue with an out-of-order queue: each command waits on the one before."""
    props = cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE
    try:
        queue = cl.CommandQueue(engine.context, engine.device, properties=props)
    except cl.Error:
        pytest.skip("the device has no out-of-order queues")
    program = sp.tcn(levels=3, channels=8, kernel=3, cin=40)     # frames uploaded, not inlined
    stream = CausalStream(Engine.from_queue(queue), program)
    run_both(stream, program, sequence(program, 3, 20))
    stream.reset()
    pending = [stream.step_async(f) for f in sequence(program, 3, 10, seed=4)]
    ref = ReferenceStream(program, 3)
    for t, (p, frame) in enumerate(zip(pending, sequence(program, 3, 10, seed=4))):
        close(p.wait()["y"], ref.step(frame)["y"], f"step {t}")


def test_a_program_without_history(engine):
    """Only k=1 layers (no ring, no step count): each step depends on its frame alone; an
    output may be the input frame itself, and a softmax of one channel is 1."""
    b = sp.Builder(6)
    h = b.pw(b.conv(b.input, 9, 1), "gelu_tanh")
    one = b.conv(h, 1, 1)
    program = b.program([("y", b.softmax(b.binary("add", h, one), log=True)),
                         ("same", b.input), ("unit", b.softmax(one))])
    stream = CausalStream(engine, program)
    run_both(stream, program, sequence(program, 4, 3))
    assert stream.query_state() == []


@pytest.mark.parametrize("cpu_form", [True, False], ids=["cpu form", "gpu form"])
@pytest.mark.parametrize("width", [5, 40])
def test_channel_slices_of_a_gate(engine, cpu_form, width):
    """A gated unit's halves (ChannelSlice: a Split of the channel axis) and the even channels
    of another frame, read across work-items (a barrier before each), in both forms; 40
    channels a half: more than a work-item's block or a group of 32."""
    b = sp.Builder(3)
    h = b.conv(b.input, 2 * width, 3, 2)
    gate = b.binary("mul", b.pw(b.slice(h, 0, width), "tanh"),
                    b.pw(b.slice(h, width, width), "sigmoid"))
    y = b.conv(gate, 4, 2)
    program = b.program([("y", y), ("even", b.slice(h, 0, width, 2))])
    stream = CausalStream(engine, program, cpu_form=cpu_form)
    run_both(stream, program, sequence(program, 3, 9))


@pytest.mark.parametrize("size", [0, 6, 2.0])
def test_a_local_size_not_a_power_of_two_is_refused(engine, size):
    with pytest.raises(DeviceError, match="power of two"):
        CausalStream(engine, sp.tcn(levels=1, channels=4, kernel=2), local_size=size)


def test_gpu_form_shares_past_taps_among_groups(engine):
    """The GPU form (step_gpu.py): a chain group per stream, and other groups that sum the
    next step's past taps meanwhile; one group on a CPU device (the chain, then the sums),
    several only on a GPU."""
    import pyopencl as cl
    small = sp.tcn(levels=2, channels=6, kernel=3, cin=40)
    kernel = step_kernel(small, max_group=256, local_mem=1 << 16, local_size=8)
    assert kernel.groups > 1 and kernel.scratch and "the next step's sums" in kernel.text
    on_cpu = bool(engine.device.type & cl.device_type.CPU)
    for groups in (None,) if on_cpu else (None, 2, 5):
        stream = CausalStream(engine, small, local_size=8, cpu_form=False, groups=groups)
        assert stream.groups == (1 if on_cpu else groups or kernel.groups)
        run_both(stream, small, sequence(small, 3, 20, seed=stream.groups))
    if on_cpu:
        with pytest.raises(DeviceError, match=r"groups=3\) run on GPUs; .* is a CPU device"):
            CausalStream(engine, small, cpu_form=False, groups=3)


@pytest.mark.parametrize("kernel", [2, 3, 4])
def test_gpu_form_sums_ahead_across_reset_and_set_state(engine, kernel):
    """The GPU form sums step t+1's taps of offset >= 2 during step t (step_gpu.py). After a
    set_state, and after a reset, the next step's sums are made again from the rings (a
    priming launch): a second stream that ran on other frames, given the first's rings at
    step 9, goes on exactly as the first; the first, reset at step 15, as the numpy stepper
    reset. A tap of offset 1 (dilation 1) and rings of one step (kernel 2, dilation 1) are
    the chain group's. Several groups per stream where the device is a GPU."""
    import pyopencl as cl
    program = sp.tcn(levels=3, channels=5, kernel=kernel, cin=3, seed=kernel)   # d = 1, 2, 4
    on_cpu = bool(engine.device.type & cl.device_type.CPU)
    for groups in (None,) if on_cpu else (None, 1, 3):
        first = CausalStream(engine, program, local_size=8, cpu_form=False, groups=groups)
        second = CausalStream(engine, program, local_size=8, cpu_form=False, groups=groups)
        frames = sequence(program, 2, 24, seed=kernel)
        for frame in sequence(program, 2, 5, seed=kernel + 10):
            second.step(frame)                   # its sums made from other rings
        ref = ReferenceStream(program, 2)
        for t, frame in enumerate(frames):
            if t == 9:
                for mine, theirs in zip(second.query_state(), first.query_state()):
                    mine.set_state(theirs.state)
            if t == 15:
                first.reset()
                ref.reset()
            got, want = first.step(frame), ref.step(frame)
            for name in want:
                close(got[name], want[name], f"groups {first.groups}, step {t}, '{name}'")
            if 9 <= t < 15:
                given = second.step(frame)
                for name in want:
                    close(given[name], got[name], f"set_state: step {t}, '{name}'")


@pytest.mark.parametrize("local_size", [8, 16, 64])
def test_gpu_form_with_one_group_matches_at_every_local_size(engine, local_size):
    """Found by a review, on PoCL with one group: a priming branch around the step's barriers
    gave wrong numbers at local sizes 16 and over (a 1x1 convolution, then kernel 5 dilation
    1), and where no convolution sums ahead (kernel 2, dilation 1 alone: its rings hold one
    step) the priming launch ran a whole step into the rings. The priming is a kernel of its
    own, none where nothing sums ahead."""
    b = sp.Builder(6, 80)
    deep = b.program([("y", b.conv(b.conv(b.input, 9, 1, 1), 6, 5, 1))])
    shallow = sp.tcn(levels=1, channels=4, kernel=2, cin=2, classes=3)
    for program in (deep, shallow):
        first = CausalStream(engine, program, local_size=local_size, cpu_form=False)
        second = CausalStream(engine, program, local_size=local_size, cpu_form=False)
        second.step(np.zeros((2, program.input_channels), np.float32))
        ref = ReferenceStream(program, 2)
        for t, frame in enumerate(sequence(program, 2, 12, seed=local_size)):
            if t == 4:
                first.reset()
                ref.reset()
            if t == 7:
                for mine, theirs in zip(second.query_state(), first.query_state()):
                    mine.set_state(theirs.state)
            got, want = first.step(frame), ref.step(frame)
            for name in want:
                close(got[name], want[name], f"step {t}, '{name}'")
                if t >= 7:
                    close(second.step(frame)[name], got[name], f"set_state, step {t}")
    assert step_kernel(shallow, max_group=64, local_mem=1 << 16, local_size=8).prime is None


def test_a_period_over_two_to_the_thirty_steps_on(engine):
    """Rings of lengths 1023, 1024, 1025 and 1027 steps: their period is 2^31 (the count's
    bound); the step count passes 2^30 (a review: the step word overflowed there)."""
    b = sp.Builder(1, 0)
    outs = [b.conv(b.input, 1, 2, d) for d in (1023, 1024, 1025, 1027)]
    program = b.program([(f"y{i}", o) for i, o in enumerate(outs)])
    stream = CausalStream(engine, program, local_size=1, cpu_form=False)
    assert stream._period == 2 ** 31
    frame = np.ones((1, 1), np.float32)
    stream.step(frame)
    stream.t = 2 ** 30 - 1
    for _ in range(3):
        out = stream.step(frame)
    assert stream.t == 2 ** 30 + 2 and all(np.isfinite(v).all() for v in out.values())


def test_states_after_reset_read_zeros_and_set_state_keeps_the_streams(engine):
    """After reset() (N then open again) the rings read zeros for the N they hold; set_state
    there keeps that N for the next frame; before any frame they say what is missing."""
    program = sp.tcn(levels=1, channels=3, kernel=3)
    stream = CausalStream(engine, program)
    (ring, *_) = stream.query_state()
    with pytest.raises(TensorError, match=r"before the first frame"):
        ring.set_state(np.ones((2,) + ring.shape[1:], np.float32))
    frames = sequence(program, 2, 5)
    for f in frames:
        stream.step(f)
    assert np.abs(ring.state).max() > 0 and "RingState(" in repr(ring)
    stream.reset()
    assert ring.shape[0] == 2 and not ring.state.any()
    ring.set_state(np.ones(ring.shape, np.float32))
    with pytest.raises(TensorError, match=r"3 streams .* runs 2"):
        stream.step(np.ones((3, program.input_channels), np.float32))


@pytest.mark.parametrize("batch", [None, 2])
def test_a_reset_stream_reads_zeros_of_its_shape_and_never_raises(engine, batch):
    """OpenVINO's reset: a state reads zeros of its shape. Before any frame and after reset()
    of a stream whose N is not set (N then 0, as OpenVINO gives a state's unknown dimension),
    after reset() of one that ran; a ring's own reset() there too, then the stream steps as
    a new one."""
    program = sp.tcn(levels=1, channels=3, kernel=3)
    stream = CausalStream(engine, program, batch)
    held = batch or 0
    for _ in range(2):
        stream.reset()
        for ring in stream.query_state():
            assert ring.shape == (held, ring.shape[1], ring.shape[2])
            np.testing.assert_array_equal(ring.state, np.zeros(ring.shape, np.float32))
            ring.reset()
        frames = sequence(program, 2, 5, seed=len(str(batch)))
        run_both(stream, program, frames)
        assert all(ring.state.any() for ring in stream.query_state())
        held = 2
    stream.reset()
    for ring in stream.query_state():
        np.testing.assert_array_equal(ring.state, np.zeros((2,) + ring.shape[1:], np.float32))


@pytest.mark.parametrize("local_size", [8, 64])
def test_gpu_form_loads_rows_ahead(engine, local_size):
    """The GPU form's chain (step_gpu.py): a row a work-item holds whole is loaded PREFETCH
    convolutions ahead into registers (each row loaded after the convolution PREFETCH + 1
    before it, before the one PREFETCH before it); rows of 1 to 3 floats past a float4 (C_in
    3, 5, 6, 7), convolutions left to the loop (more output channels than work-items, grouped,
    a row over REGISTER_ROW floats), a softmax of 10 channels that every work-item computes
    alone; and the text with several groups per stream compiles (CPU devices run one)."""
    from customlayers.ops.stream.step_gpu import PREFETCH, REGISTER_ROW
    held = 0
    for program in (sp.every_op(), sp.tcn(levels=3, channels=6, kernel=3, cin=5),
                    sp.tcn(levels=2, channels=7, kernel=2, cin=6)):
        kernel = step_kernel(program, max_group=1024, local_mem=1 << 16, local_size=local_size)
        lines = kernel.text.splitlines()
        loads = [n for n, line in enumerate(lines) if "const float4 r" in line and "_0 =" in line]
        uses = [n for n, line in enumerate(lines) if "a4 = fma(r" in line and "_0," in line]
        wide = [op for op in program.ops if isinstance(op, CausalConv) and op.groups == 1 and
                (program.frames[op.dst] > local_size or -(-op.weight.shape[1] // 4) * 4 >
                 REGISTER_ROW)]
        assert len(loads) == len(uses) == sum(
            isinstance(op, CausalConv) and op.groups == 1 for op in program.ops) - len(wide)
        held += len(uses)
        for j in range(PREFETCH, len(uses)):
            assert loads[j] < uses[j - PREFETCH]
            assert j == PREFETCH or uses[j - PREFETCH - 1] < loads[j]
        stream = CausalStream(engine, program, local_size=local_size, cpu_form=False)
        run_both(stream, program, sequence(program, 3, 40, seed=local_size))
        several = step_kernel(program, max_group=1024, local_mem=1 << 16,
                              local_size=local_size, groups=2)
        assert "the next step's sums" in several.text
        cl.Program(engine.context, several.text).build()
    assert held > 6


@pytest.mark.parametrize("cpu_form,local_size", [(True, 1), (True, 8), (False, 8),
                                                 (False, 64)])
def test_a_softmax_wider_than_the_serial_one_reduces_in_a_tree(engine, cpu_form, local_size):
    """A softmax over more than SERIAL_SOFTMAX channels: the tree in local memory, with fewer
    and with more work-items than channels; a narrow one beside it, computed serially."""
    from customlayers.ops.stream.step_chain import SERIAL_SOFTMAX
    b = sp.Builder(3, seed=4)
    wide = b.pw(b.conv(b.conv(b.input, 40, 3, 2), SERIAL_SOFTMAX + 8, 2, 1), "tanh")
    narrow = b.conv(wide, 5, 1)
    program = b.program([("logp", b.softmax(wide, log=True)), ("p", b.softmax(wide)),
                         ("q", b.softmax(narrow))])
    kernel = step_kernel(program, max_group=1024, local_mem=1 << 16, local_size=local_size,
                         is_cpu=cpu_form)
    assert kernel.text.count("for (int h = ") == 4          # two trees of two reductions
    stream = CausalStream(engine, program, local_size=local_size, cpu_form=cpu_form)
    run_both(stream, program, sequence(program, 2, 30, seed=local_size))


def test_the_step_without_pyopencls_lower_entries(engine, monkeypatch):
    """The step's calls where pyopencl lacks the lower entries it takes (another version):
    the read through enqueue_copy, the argument through Kernel.set_arg; the same numbers."""
    from customlayers.runtime.device.kernel_objects import set_arg_by_value
    from customlayers.runtime.streaming import causal_stream

    class PublicOnly:
        """A kernel seen through its public set_arg alone."""
        def __init__(self, kernel):
            self.kernel = kernel

        def set_arg(self, index, value):
            self.kernel.set_arg(index, value)

    monkeypatch.setattr(causal_stream, "_read_buffer", None)
    monkeypatch.setattr(causal_stream, "set_arg_by_value",
                        lambda kernel, index, value: set_arg_by_value(
                            PublicOnly(kernel), index, value))
    program = sp.tcn(levels=2, channels=6, kernel=3)
    stream = CausalStream(engine, program)
    run_both(stream, program, sequence(program, 2, 30))
    pending = [stream.step_async(f) for f in sequence(program, 2, 3, seed=9)]
    assert [set(p.wait()) for p in pending] == [{"y"}] * 3
