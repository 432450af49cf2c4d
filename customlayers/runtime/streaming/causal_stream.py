"""CausalStream: a causal model run one time step at a time, one kernel launch per step.

Made by Network.streaming (or from an Engine and a StreamProgram). The step kernel
(ops/stream/step_kernel.py) is generated for the model, built once through the engine's program
cache, its packed parameters uploaded once. Per batch of N streams the stream holds, on the
device, the ring buffers of every causal convolution ([N, S]), one input frame and one output
row per stream, and in the GPU form (ops/stream/step_gpu.py) two halves of past-tap sums. A step
is: the frame's upload (none when the frames go by value in the launch or are already on the
device), the kernel (only the frames by value are set anew; the CPU form counts the steps in
the state, the GPU form gets t and its half with the frames), the outputs' read-back: the one
host wait. After a reset, a set_state or new buffers, the GPU form's priming kernel first makes
the step's past-tap sums from the rings.
"""
from __future__ import annotations

import time

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array

from ...errors import DeviceError, ModelError, TensorError
from ...ops.stream.program import StreamProgram
from ...ops.stream.step_kernel import INLINE_FLOATS, step_kernel
from ..device.kernel_objects import set_arg_by_value

ARG_STATE, ARG_FRAME, ARG_OUT, ARG_GIVEN, ARG_INLINED, ARG_SCRATCH = 1, 2, 3, 4, 5, 6
# the GPU form (step_gpu.py) has the step t (modulo the rings' period) and the scratch half it
# reads its past-tap sums from after the frames in `given`: one argument set per step, not
# two (each cost about 0.5 us in NVIDIA's driver)
GIVEN_T, GIVEN_HALF = INLINE_FLOATS, INLINE_FLOATS + 1
# its priming kernel's arguments: params, state, scratch, t, side (the half)
PRIME_STATE, PRIME_SCRATCH, PRIME_T, PRIME_HALF = 1, 2, 3, 4
# the dtype of a frame that goes by value at once (_take_frame)
_FLOAT32 = np.dtype(np.float32)

# A step reads its outputs through pyopencl's lower entry where this pyopencl has it:
# enqueue_copy sorts its operands' kinds first (1-4 us; a step of the seed's TCN on an H100 is
# about 20 us of launch and read-back). Its one argument by value goes the same way
# (kernel_objects.set_arg_by_value: 0.3 us against set_arg's 9-14).
_read_buffer = getattr(getattr(cl, "_cl", None), "_enqueue_read_buffer", None)

# On a CPU device a step waits for its read-back by polling the read's status for at most
# POLL_LIMIT_S, then blocks: PoCL wakes a thread blocked on an event tens of us late (the seed
# TCN's step at N = 1 on a 2-core machine: 17 us polled against 49-67 us blocked, its kernel
# 9 us). A stream whose steps outlast the limit POLL_MISSES times in a row blocks for the next
# POLL_RETRY steps, then tries again: polling through a long kernel takes a core from the
# device's own threads (N = 64: 644 us polled against 334-346 blocked), while one slow step (the
# first, which allocates; a busy moment) must not end it. A GPU device always blocks: NVIDIA's
# driver took longer to complete a polled read (75 against 44 us on an H100).
POLL_LIMIT_S = 50e-6
POLL_MISSES = 4
POLL_RETRY = 256
# step_async reads into pinned rows that wait() gives back, at most this many per stream (a
# pipeline's depth); deeper pipelines read their other steps into plain memory
ASYNC_PINNED = 8


def read_into(queue, host: np.ndarray, buffer, wait_for, blocking: bool):
    """cl.enqueue_copy(queue, host, buffer, ...) from offset 0; its event."""
    if _read_buffer is None:
        return cl.enqueue_copy(queue, host, buffer, is_blocking=blocking, wait_for=wait_for)
    return _read_buffer(queue, buffer, host, 0, wait_for, blocking)


class CausalStream:
    """step(frame [N, C_in] float32) -> {output name: [N, ...]}; reset(); t; query_state().

    batch: the number of streams N; None: taken from the first frame (and again from the first
    frame after each reset). local_size: the work-group size of the step kernel (one group
    per stream); None: chosen for the device (step_kernel.choose_local_size). cpu_form: the
    kernel's form for a CPU (blocks of channels per work-item, step_kernel.py) or a GPU (a
    channel per work-item, each stream's past taps shared by `groups` work-groups:
    step_gpu.py); None: the device's. groups: the GPU form's work-groups per stream (None:
    its choice; several only on a GPU device)."""

    def __init__(self, engine, program: StreamProgram, batch: int | None = None, *,
                 local_size: int | None = None, cpu_form: bool | None = None,
                 groups: int | None = None):
        self.engine = engine
        self.program = program
        device = engine.device
        on_cpu = bool(device.type & cl.device_type.CPU)
        is_cpu = on_cpu if cpu_form is None else cpu_form
        label = f"'{device.name.strip()}'"
        if on_cpu and not is_cpu:
            if groups is not None and groups > 1:
                # PoCL ran the last group's chain (barriers in a group-uniform branch) wrongly
                raise DeviceError(f"streaming: several work-groups per stream (groups="
                                  f"{groups}) run on GPUs; {label} is a CPU device: leave "
                                  f"groups unset")
            groups = 1
        if local_size is not None and (not isinstance(local_size, (int, np.integer)) or
                                       local_size < 1 or local_size & (local_size - 1)):
            raise DeviceError(f"streaming: local_size {local_size!r}: the step kernel's "
                              f"work-group size must be a power of two (1, 2, 4, ... 1024)")
        built = step_kernel(program, max_group=int(device.max_work_group_size),
                            local_mem=int(device.local_mem_size), is_cpu=is_cpu,
                            local_size=local_size, device=label, groups=groups)
        kernel = self._build(built)
        fits = kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, device)
        if built.local_size > fits and local_size is None:
            # the compiled kernel allows fewer work-items than the device (its registers)
            size = 1 << (int(fits).bit_length() - 1)
            built = step_kernel(program, max_group=size, local_mem=int(device.local_mem_size),
                                is_cpu=is_cpu, local_size=size, device=label, groups=groups)
            kernel = self._build(built)
        elif built.local_size > fits:
            raise DeviceError(f"streaming: local size {built.local_size} is over the "
                              f"{fits} work-items the step kernel allows on {label}")
        self.kernel_text = built.text
        self.local_size = built.local_size
        self.groups = built.groups             # work-groups per stream
        self._built = built
        self._kernel = kernel
        self._layout = built.layout
        self._cin = program.input_channels
        self._row = max(self._layout.output_floats, 1)           # floats of output per stream
        self._slices = [(o.name, o.offset, o.offset + o.size, tuple(o.shape))
                        for o in self._layout.outputs]
        shared = engine.shared_queue
        self._queue = shared if shared is not None else cl.CommandQueue(engine.context, device)
        self._on_cpu = on_cpu
        self._misses = 0                     # polls in a row that outlasted POLL_LIMIT_S
        self._blocked = 0                    # steps to block for before polling again
        self._out_of_order = shared is not None and bool(
            shared.properties & cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE)
        self._last = None                      # the last command, on an out-of-order queue
        self._period = built.layout.period     # the step count's period (the rings' lengths)
        self._inline_shape = None              # [N, C_in] while the frames go by value
        self._half = 0                         # the GPU form: the scratch half step t reads
        self._primed = False                   # ... and whether it holds step t's sums
        mf = cl.mem_flags
        params = self._layout.params
        self._params = cl.Buffer(engine.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=params)
        kernel.set_arg(0, self._params)
        if self._prime is not None:
            self._prime.set_arg(0, self._params)
        self.t = 0
        self.kernel_event = None               # the last step's launch (its profile, if any)
        self.batch: int | None = None
        self._allocated = 0
        self._fixed_batch = batch
        if batch is not None:
            self._allocate(_check_batch(batch))

    def __repr__(self) -> str:
        outputs = ", ".join(self.output_names)
        return (f"CausalStream(input '{self.input_name}' [{self.batch or 'N'}, {self._cin}], "
                f"{len(self._layout.rings)} rings, outputs {outputs}, t={self.t}, "
                f"local size {self.local_size})")

    # -- building --------------------------------------------------------------------------
    def _build(self, built):
        program = self.engine.build(built.text, "", label="streaming step")
        # the GPU form's priming kernel, where it sums a step ahead (None: no priming)
        self._prime = cl.Kernel(program, built.prime) if built.prime else None
        return cl.Kernel(program, built.entry)

    @property
    def input_name(self) -> str:
        return self.program.input

    @property
    def input_channels(self) -> int:
        return self.program.input_channels

    @property
    def output_names(self) -> list[str]:
        return [o.name for o in self._layout.outputs]

    # -- buffers ---------------------------------------------------------------------------
    def _allocate(self, n: int) -> None:
        ctx, lay = self.engine.context, self._layout
        nbytes = 4 * n * max(lay.state_floats, 1)
        try:
            self._state = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, nbytes)
            self._frame = cl.Buffer(ctx, cl.mem_flags.READ_ONLY, 4 * n * self.input_channels)
            self._out = cl.Buffer(ctx, cl.mem_flags.WRITE_ONLY,
                                  4 * n * max(lay.output_floats, 1))
            if self._built.scratch:
                # the GPU form: each stream's past-tap sums, one half for this step, the
                # other filled for the next (step_gpu.py)
                self._scratch = cl.Buffer(ctx, cl.mem_flags.READ_WRITE,
                                          4 * n * max(self._built.units, 1))
            self._zero_state()
        except (cl.Error, MemoryError) as e:
            raise DeviceError(f"streaming: {n} streams: their ring buffers ({nbytes} bytes) "
                              f"cannot be allocated on '{self.engine.device.name.strip()}': "
                              f"{str(e).strip().splitlines()[0] if str(e).strip() else e!r}"
                              ) from None
        self.batch = self._allocated = n
        self._landing = self._pinned_rows(n)
        self._pool: list[np.ndarray] = []        # step_async's pinned rows for this N
        self._pinned_async = 0                   # ... made so far (at most ASYNC_PINNED)
        self._views = list(self._outputs(self._landing).items())     # copied by each step
        k = self._kernel
        k.set_arg(ARG_STATE, self._state)
        k.set_arg(ARG_FRAME, self._frame)
        k.set_arg(ARG_OUT, self._out)
        # the frames by value (floats), then in the GPU form t and the half (uints)
        self._given = np.zeros(INLINE_FLOATS + (2 if self._built.scratch else 0), np.uint32)
        k.set_arg(ARG_GIVEN, self._given)
        if self._built.scratch:
            k.set_arg(ARG_SCRATCH, self._scratch)
        if self._prime is not None:
            self._prime.set_arg(PRIME_STATE, self._state)
            self._prime.set_arg(PRIME_SCRATCH, self._scratch)
            self._prime_global = (n * max(self.groups - 1, 1) * self.local_size,)
        self._frame_arg = self._frame
        # small frames go by value in the launch (no upload command): the whole [N, C_in]
        self._inline = self._given[:INLINE_FLOATS].view(np.float32) \
            if n * self.input_channels <= INLINE_FLOATS else None
        # the same floats as [N, C_in], and the shape a frame must have to go there at once
        # while the stream holds N (None: frames that do not go by value take every check)
        self._inline_rows = self._inline[:n * self.input_channels].reshape(
            n, self.input_channels) if self._inline is not None else None
        self._inline_shape = (n, self.input_channels) if self._inline is not None else None
        self._inlined = None
        self._global = (n * self.groups * self.local_size,)
        self._local = (self.local_size,)

    def _pinned_rows(self, n: int) -> np.ndarray:
        """Where step() reads the outputs into: [n, row] floats of pinned host memory (a buffer
        the device allocates host-side, mapped once for good; no kernel ever uses it), or
        plain numpy memory where the device will not map one. NVIDIA's driver reads into
        pageable memory through a staging copy of its own: the seed TCN's step at N = 1 took
        30.0-30.9 us against 34.5-35.2 on an H100 (the same at N = 64)."""
        shape = (n, self._row)
        try:
            staging = cl.Buffer(self.engine.context, cl.mem_flags.READ_WRITE |
                                cl.mem_flags.ALLOC_HOST_PTR, 4 * n * self._row)
            # not blocking (a map waits for the queue's earlier commands): the read into the
            # rows comes after it in the queue
            rows, self._last = cl.enqueue_map_buffer(
                self._queue, staging, cl.map_flags.READ | cl.map_flags.WRITE, 0, shape,
                np.float32, wait_for=self._after(), is_blocking=False)
            return rows
        except cl.Error:
            return np.empty(shape, np.float32)

    def _zero_state(self) -> None:
        self._last = cl.enqueue_fill_buffer(self._queue, self._state, np.float32(0), 0,
                                            self._state.size, wait_for=self._after())
        self._primed = False               # the GPU form's sums: made again from the rings

    def _after(self):
        return [self._last] if self._out_of_order and self._last is not None else None

    def reset(self) -> None:
        """Forget every stream's history (the rings zeroed on the device) and t = 0. The next
        frame may have another N, unless a batch was given."""
        self.t = 0
        if self.batch is None:
            return
        self._zero_state()
        if self._fixed_batch is None:
            self.batch = None            # the next frame sets N (the buffers kept for the same)

    # -- stepping --------------------------------------------------------------------------
    def step(self, frame) -> dict[str, np.ndarray]:
        """One step of every stream: frame [N, C_in] float32 (numpy, other integer and float
        types and lists cast as infer() casts them; or a pyopencl Array or Buffer on this
        device). Returns {output name: array [N, ...]}, the caller's to keep."""
        self._enqueue(frame)
        landing = self._landing                         # N rows (made by _allocate)
        if self._on_cpu and not self._blocked:
            read = read_into(self._queue, landing, self._out, self._after(), False)
            self._queue.flush()
            self._misses = 0 if _poll(read, POLL_LIMIT_S) else self._misses + 1
            if self._misses >= POLL_MISSES:
                self._misses, self._blocked = 0, POLL_RETRY
            read.wait()                     # at once when done; raises on a failed command
        else:
            if self._blocked:
                self._blocked -= 1
            # the one wait: on the read's event, not in a blocking read (NVIDIA's driver: the
            # seed TCN's step at N = 1 took 25.4-25.5 us against 27.6 on an H200)
            read_into(self._queue, landing, self._out, self._after(), False).wait()
        return {name: view.copy() for name, view in self._views}

    def _outputs(self, host: np.ndarray) -> dict[str, np.ndarray]:
        n = host.shape[0]
        return {name: host[:, a:b].reshape((n,) + shape) for name, a, b, shape in self._slices}

    def step_async(self, frame) -> "PendingStep":
        """Enqueue one step and the non-blocking read of its outputs; .wait() gives them. The
        next step may be enqueued before (the queue keeps the order). A numpy frame of more
        than INLINE_FLOATS floats is uploaded from where it lies: do not change it until
        wait()."""
        self._enqueue(frame)
        # pinned rows from the pool wait() gives them back to: NVIDIA's driver reads into
        # pageable memory through a copy of its own, inside the enqueue (the seed TCN's
        # step_async took 27-31 us of host time on an H200)
        pool = self._pool
        if pool:
            host = pool.pop()
        elif self._pinned_async < ASYNC_PINNED:
            self._pinned_async += 1
            host = self._pinned_rows(self.batch)
        else:                                   # deeper pipelines: plain memory, not pooled
            host, pool = np.empty((self.batch, self._row), np.float32), None
        self._last = read_into(self._queue, host, self._out, self._after(), False)
        return PendingStep(self, self._last, host, pool)

    def _enqueue(self, frame) -> None:
        arg = self._take_frame(frame)
        k, given = self._kernel, self._given
        inlined = arg is None
        if inlined != self._inlined:
            set_arg_by_value(k, ARG_INLINED, np.int32(inlined))
            self._inlined = inlined
        if not inlined and arg is not self._frame_arg:
            k.set_arg(ARG_FRAME, arg)
            self._frame_arg = arg
        if self._built.scratch:
            t = self.t % self._period
            if not self._primed:
                self._make_sums(t)
            given[GIVEN_T], given[GIVEN_HALF] = t, self._half
            self._half ^= 1
            set_arg_by_value(k, ARG_GIVEN, given)
        elif inlined:
            set_arg_by_value(k, ARG_GIVEN, given)
        self._last = self.kernel_event = cl.enqueue_nd_range_kernel(
            self._queue, k, self._global, self._local, wait_for=self._after())
        self.t += 1

    def _make_sums(self, t: int) -> None:
        """After a reset, a set_state or new buffers, the GPU form's past-tap sums of step t
        from the rings, into the half it reads (its priming kernel), where it sums ahead."""
        if self._prime is not None:
            set_arg_by_value(self._prime, PRIME_T, np.uint32(t))
            set_arg_by_value(self._prime, PRIME_HALF, np.uint32(self._half))
            self._last = cl.enqueue_nd_range_kernel(self._queue, self._prime,
                                                    self._prime_global, self._local,
                                                    wait_for=self._after())
        self._primed = True

    def _take_frame(self, frame):
        """The buffer the kernel reads this step's frame from (a host frame uploaded into the
        stream's own), or None when the frames go by value in the launch; TensorError naming
        what was expected."""
        if type(frame) is np.ndarray and frame.dtype is _FLOAT32 and \
                frame.shape == self._inline_shape and self.batch is not None:
            # the common step (checked: 0.6 us of a step was these tests, on this machine)
            self._inline_rows[...] = frame
            return None
        cin = self._cin
        if isinstance(frame, dict):         # {input name: frame}, as a stateful model's stream
            if set(frame) != {self.input_name}:
                raise TensorError(f"streaming: a step of inputs {sorted(frame)}; the model "
                                  f"streams one input, '{self.input_name}'")
            frame = frame[self.input_name]
        if isinstance(frame, cl.Buffer):
            n = self.batch if self.batch is not None else frame.size // (4 * cin)
            if frame.size < 4 * n * cin or n < 1:
                raise TensorError(f"streaming input '{self.input_name}': a device buffer of "
                                  f"{frame.size} bytes; expected {n or 1} x {cin} float32 "
                                  f"({4 * max(n, 1) * cin} bytes)")
            self._set_batch(n)
            return frame
        device = isinstance(frame, cl_array.Array)
        if not device:                     # a list, a number: its array
            try:
                frame = np.asarray(frame)
            except (ValueError, TypeError):
                raise TensorError(f"streaming input '{self.input_name}': a frame of "
                                  f"{type(frame).__name__} that is no array; expected "
                                  f"[N, {cin}] float32") from None
            if frame.dtype.kind in "iuf" and frame.dtype != np.float32:
                frame = frame.astype(np.float32)   # as infer() casts them: a list of floats too
        shape, dtype = tuple(frame.shape), frame.dtype
        expected_n = self.batch if self.batch is not None else "N"
        if len(shape) != 2 or shape[1] != cin or dtype != np.float32 or shape[0] < 1:
            raise TensorError(f"streaming input '{self.input_name}': a frame of shape "
                              f"{list(shape)} and type {dtype}; expected [{expected_n}, {cin}] "
                              f"float32 (one time step of each stream)")
        self._set_batch(shape[0])
        if device:
            if frame.context != self.engine.context:
                raise TensorError(f"streaming input '{self.input_name}': the array is on "
                                  f"another OpenCL context than the stream's")
            return frame.base_data if frame.offset == 0 else frame.data
        if self._inline is not None:
            self._inline[:frame.size] = frame.reshape(-1)
            return None                                   # by value, in the launch
        self._last = cl.enqueue_copy(self._queue, self._frame, np.ascontiguousarray(frame),
                                     is_blocking=False, wait_for=self._after())
        return self._frame

    def _set_batch(self, n: int) -> None:
        if self.batch == n:
            return
        if self._fixed_batch is not None and n != self._fixed_batch:
            raise TensorError(f"streaming input '{self.input_name}': {n} streams in this frame, "
                              f"but the stream was made for batch={self._fixed_batch}; make "
                              f"another stream for {n} (reset() keeps the batch given)")
        if self.batch is not None:
            raise TensorError(f"streaming input '{self.input_name}': {n} streams in this frame, "
                              f"but the stream runs {self.batch} (since its first frame); call "
                              f"reset() before changing N")
        if self._allocated == n:           # after reset, the same N: the same (zeroed) buffers
            self.batch = n
            return
        self._allocate(n)

    # -- state -----------------------------------------------------------------------------
    def query_state(self) -> list["RingState"]:
        """Each causal convolution's history as a named state: .name (its layer), .state (a
        numpy copy [N, C_in, L], oldest step first), set_state(array), reset()."""
        return [RingState(self, ring) for ring in self._layout.rings.values()]

    def _read_state(self) -> np.ndarray:
        n = self._require_batch("query_state")
        host = np.empty((n, max(self._layout.state_floats, 1)), np.float32)
        cl.enqueue_copy(self._queue, host, self._state, wait_for=self._after())
        return host

    @property
    def _held(self) -> int | None:
        """The streams the rings hold: N, or after reset() the N they were made for (zeroed
        then), until the next frame says another."""
        return self.batch if self.batch is not None else (self._allocated or None)

    def _require_batch(self, what: str) -> int:
        if self._held is None:
            raise TensorError(f"streaming: {what} before the first frame: the number of "
                              f"streams N is not known yet (give batch=, or step once)")
        return self._held


class PendingStep:
    """A step enqueued by step_async: wait() returns its outputs (the caller's to keep; a
    second wait() the same)."""

    def __init__(self, stream: CausalStream, event, host: np.ndarray, pool: list | None):
        self._stream, self.event, self._host, self._pool = stream, event, host, pool
        self._outputs = None

    def wait(self) -> dict[str, np.ndarray]:
        if self._outputs is None:
            self.event.wait()
            rows = self._host.copy()
            if self._pool is not None:
                self._pool.append(self._host)     # its pinned rows serve a later step
            self._outputs = self._stream._outputs(rows)
        return self._outputs


class RingState:
    """One convolution's history as a named state (OpenVINO's VariableState names)."""

    def __init__(self, stream: CausalStream, ring):
        self._stream, self._ring = stream, ring
        self.name = ring.name

    def __repr__(self) -> str:
        return f"RingState({self.name!r}, shape={list(self.shape)})"

    @property
    def shape(self) -> tuple:
        """(N, C_in, L); N is 0 while the stream holds no streams (before its first frame and
        after a reset of an unset N): OpenVINO's CPU plugin gives a state's unknown
        dimensions as 0 until it is run."""
        return (self._stream._held or 0, self._ring.channels, self._ring.length)

    @property
    def state(self) -> np.ndarray:
        """A numpy copy [N, C_in, L], oldest step first; zeros after a reset (of [0, C_in, L]
        before the stream knows N), as OpenVINO's reset state reads."""
        r, s = self._ring, self._stream
        if s._held is None:
            return np.zeros(self.shape, np.float32)
        host = s._read_state()
        flat = host[:, r.offset:r.offset + r.length * r.stride]
        slots = flat.reshape(host.shape[0], r.length, r.stride)[:, :, :r.channels]
        # the oldest kept step, t - L, is at slot (t - L) mod L = t mod L
        return np.ascontiguousarray(np.roll(slots, -(s.t % r.length), axis=1).transpose(0, 2, 1))

    def set_state(self, array) -> None:
        s, r = self._stream, self._ring
        s.batch = s._require_batch(f"set_state of '{self.name}'")   # the next frame keeps N
        a = np.asarray(array)
        if a.shape != self.shape or a.dtype.kind != "f":
            raise TensorError(f"set_state of '{self.name}': an array of shape {list(a.shape)} "
                              f"and type {a.dtype}; expected {list(self.shape)} float "
                              f"(streams, channels, steps oldest first)")
        slots = np.roll(a.astype(np.float32).transpose(0, 2, 1), s.t % r.length, axis=1)
        host = s._read_state()
        rows = host[:, r.offset:r.offset + r.length * r.stride].reshape(s.batch, r.length,
                                                                        r.stride)
        rows[:, :, :r.channels] = slots
        cl.enqueue_copy(s._queue, s._state, host, wait_for=s._after())
        s._primed = False                  # the GPU form's sums: made again from these rings

    def reset(self) -> None:
        if self._stream._held is None:
            return                       # no streams held: nothing but zeros to reset
        self.set_state(np.zeros(self.shape, np.float32))


def _poll(event, limit: float) -> bool:
    """Poll `event` until it is no longer queued or running, or for `limit` seconds; whether it
    finished within the limit."""
    end = time.perf_counter() + limit
    while event.command_execution_status > 0:        # queued, submitted or running
        if time.perf_counter() > end:
            return False
    return True


def _check_batch(batch) -> int:
    if not isinstance(batch, (int, np.integer)) or isinstance(batch, bool) or batch < 1:
        raise ModelError(f"streaming: batch must be a positive number of streams, not {batch!r}")
    return int(batch)
