"""Host steps of a request: Python layers (and reference checks) run between a network's kernels
while the host that enqueues never waits.

For each host step the request enqueues, in order on its in-order queue: a map of each input
buffer for reading (no copy on a CPU device), a map of each output buffer for writing, a
barrier that waits on a user event, then the unmaps. A worker thread (one per request, so a
request's host steps run in their order) waits for the maps, runs the step's HostWork on the
mapped arrays and sets the user event: the unmaps and the kernels after the barrier then run.
The host waits once, in InferRequest.wait(), which also raises the first error a host step met.

Everything is enqueued on the one queue on purpose: PoCL orders the commands on a buffer across
queues, so an upload from a second queue would wait for the kernels that wait for it. And PoCL 3
blocks in clEnqueueReadBuffer, holding the GIL, while a user event that the queue waits for is
pending; so a request with host steps reads the network's outputs by maps too (`read_output`).

That holds where host and device memory are one (`maps`: a CPU device), where a map is the
buffer's own memory. A device with memory of its own (a GPU) maps into staging memory of the
driver's, and NVIDIA's gave the same host address to READ maps of different requests' buffers
while all were in flight (H100 and H200, driver 580): a Python layer then computed on another
request's input, a whole row of a batch wrong in 5-30% of the runs of four requests (stop 41).
There the worker copies instead, into and out of arrays of its own, on a queue of its own:
after the kernels before the step (a marker it waits for) it reads the step's inputs, runs the
work, writes the outputs back and only then sets the user event that releases the kernels
after it; and the request reads its outputs by plain reads.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pyopencl as cl

from ...errors import CustomLayersError, ExecutionError

_WRITE = getattr(cl.map_flags, "WRITE_INVALIDATE_REGION", cl.map_flags.WRITE)


class HostStep:
    """One host stage of a request: the plan's Step, and the buffers its inputs and outputs
    lie in for the run being enqueued (`bind`: the user's tensors may move them)."""

    def __init__(self, step):
        self.step = step
        self.in_bufs: list = []
        self.out_bufs: list = []
        for d in step.output_descs:
            if not d.is_plain:      # the adapter hands out dense outputs; mapping relies on it
                raise ExecutionError(f"layer '{step.name}': a host step writes dense outputs; "
                                     f"found {d.describe()}")

    def bind(self, in_bufs, out_bufs) -> None:
        self.in_bufs, self.out_bufs = list(in_bufs), list(out_bufs)


class HostTiming:
    """The host time of a step, read like a profiling event's (`profile.start`/`.end`, ns), so
    the per-layer profile lists host steps beside kernels."""

    def __init__(self):
        self.start = self.end = 0

    @property
    def profile(self) -> "HostTiming":
        return self


class HostSteps:
    """The host steps of one request: its worker thread and, per run, the work in flight.
    `maps`: the steps map the buffers (host and device memory are one); else the worker copies
    (see the module docstring)."""

    def __init__(self, context, device, maps: bool):
        self.context = context
        self.device = device
        self.maps = maps
        self._copy_queue: cl.CommandQueue | None = None   # the worker's, where it copies
        self._worker: ThreadPoolExecutor | None = None
        self._pending: list[tuple[HostStep, Future]] = []
        self._failed = threading.Event()
        self._kept: list = []           # the run's barrier and unmap events (keep)

    def begin(self) -> None:
        """A new run: no step in flight, no error."""
        self._pending = []
        self._failed.clear()
        self._kept = []

    def keep(self, event) -> None:
        """Hold a command's event until the next run (`begin`). PoCL 3.1 aborts the process
        (PTHREAD ERROR in pocl_update_event_failed) when a failed event (a user's wait_for)
        reaches a barrier or marker whose event the application has already released: plain
        pyopencl does it too once the returned Event is dropped (stop 41)."""
        if event is not None:
            self._kept.append(event)

    @staticmethod
    def map_output(queue, buf, host: np.ndarray):
        """A network output read by a non-blocking map (not a read: see the module
        docstring); (the mapped array, its event). `finish` copies it into `host`."""
        count = host.size
        return cl.enqueue_map_buffer(queue, buf, cl.map_flags.READ, 0, (count,), host.dtype,
                                     is_blocking=False)

    def enqueue_step(self, queue, hs: HostStep) -> HostTiming:
        step = hs.step
        release = cl.UserEvent(self.context)
        timing = HostTiming()
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1,
                                              thread_name_prefix="customlayers-host")
        if not self.maps:
            ready = cl.enqueue_marker(queue)        # the kernels before the step are done
            future = self._worker.submit(self._run_copied, hs, list(hs.in_bufs),
                                         list(hs.out_bufs), ready, release, timing)
            self._pending.append((hs, future))
            self.keep(cl.enqueue_barrier(queue, wait_for=[release]))
            return timing
        ins = [self._map(queue, b, d, cl.map_flags.READ) for b, d in
               zip(hs.in_bufs, step.input_descs)]
        outs = [self._map(queue, b, d, _WRITE) for b, d in zip(hs.out_bufs, step.output_descs)]
        future = self._worker.submit(self._run, hs, ins, outs, release, timing)
        self._pending.append((hs, future))
        self.keep(cl.enqueue_barrier(queue, wait_for=[release]))
        for mapped, _ in ins + outs:
            # runs after the barrier: after the worker
            self.keep(mapped.base.release(queue=queue))
        return timing

    @staticmethod
    def _map(queue, buf, desc, flags):
        return cl.enqueue_map_buffer(queue, buf, flags, 0, (desc.buffer_count,), desc.np_dtype,
                                     is_blocking=False)

    def _run(self, hs: HostStep, ins, outs, release, timing: HostTiming) -> None:
        """In the worker: wait for the maps, run the work, release the kernels after it."""
        try:
            cl.wait_for_events([event for _, event in ins + outs])
            if self._failed.is_set():     # an earlier step failed: its error is the one shown
                return
            timing.start = time.perf_counter_ns()
            step = hs.step
            inputs = [_input_view(m, d) for (m, _), d in zip(ins, step.input_descs)]
            outputs = [m.reshape(d.shape) for (m, _), d in zip(outs, step.output_descs)]
            step.host.run(inputs, outputs)
            timing.end = time.perf_counter_ns()
        except BaseException:
            self._failed.set()
            raise
        finally:
            release.set_status(cl.command_execution_status.COMPLETE)

    def _run_copied(self, hs: HostStep, in_bufs, out_bufs, ready, release,
                    timing: HostTiming) -> None:
        """In the worker, on a device with memory of its own: read the inputs once the kernels
        before the step are done, run the work, write the outputs, then release the kernels
        after it. The copies block this thread only (pyopencl lets the GIL go meanwhile)."""
        try:
            if self._copy_queue is None:
                self._copy_queue = cl.CommandQueue(self.context, self.device)
            q = self._copy_queue
            step = hs.step
            # the commands before the step done, the user's wait_for events among them: a step
            # with no inputs would otherwise write its outputs before them (review, stop 41)
            cl.wait_for_events([ready])
            ins = []
            for buf, d in zip(in_bufs, step.input_descs):
                host = np.empty(d.buffer_count, d.np_dtype)
                if host.size:                 # (an empty tensor has nothing to read)
                    cl.enqueue_copy(q, host, buf, wait_for=[ready], is_blocking=True)
                ins.append(host)
            if self._failed.is_set():     # an earlier step failed: its error is the one shown
                return
            timing.start = time.perf_counter_ns()
            inputs = [_input_view(m, d) for m, d in zip(ins, step.input_descs)]
            outs = [np.empty(d.buffer_count, d.np_dtype) for d in step.output_descs]
            step.host.run(inputs, [m.reshape(d.shape) for m, d in zip(outs, step.output_descs)])
            timing.end = time.perf_counter_ns()
            for buf, host in zip(out_bufs, outs):
                if host.size:
                    cl.enqueue_copy(q, buf, host, is_blocking=True)
        except BaseException:
            self._failed.set()
            raise
        finally:
            release.set_status(cl.command_execution_status.COMPLETE)

    def finish(self, maps, queue) -> None:
        """After the queue finished: the outputs read by maps copied out of them (and the maps
        released), then the first error a host step met raised (an ExecutionError naming the
        layer)."""
        for mapped, host in maps:
            np.copyto(host.reshape(-1), mapped.reshape(-1)[:host.size])
            mapped.base.release(queue=queue)
        maps.clear()
        pending, self._pending = self._pending, []
        for hs, future in pending:
            error = future.exception()
            if error is None:
                continue
            if isinstance(error, CustomLayersError):
                raise error
            step = hs.step
            raise ExecutionError(f"layer '{step.name}' (type {step.type}, {step.impl}): the "
                                 f"host step failed: {type(error).__name__}: {error}") from error


def _input_view(mapped: np.ndarray, desc) -> np.ndarray:
    """The logical, read-only array of a mapped input (a padded or formatted one unpacked)."""
    if desc.is_plain:
        view = mapped.reshape(desc.shape)
    else:
        view = desc.unpack(mapped)
    view.flags.writeable = False      # the buffer may be another layer's input too
    return view
