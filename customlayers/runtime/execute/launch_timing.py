"""Timing a layer's launches on the device, for the tuner: tuning/tuning.py decides which
variants to time and keeps the fastest; this binds one variant's work to scratch buffers and
measures it with profiling events.
"""
from __future__ import annotations

import statistics
import time
from typing import Sequence

import numpy as np
import pyopencl as cl

from ...errors import KernelBuildError
from ...jit.layer import LayerCall, LayerWork
from ...jit.tensor import TensorDesc
from ..device.kernel_objects import set_kernel_args
from ..device.launch_args import ArgumentSource, bind_args


class LaunchTimer:
    """Times LayerWorks on one engine's device, on a profiling queue of its own (made at the
    first timing)."""

    def __init__(self, engine):
        self.engine = engine
        self._queue = None

    def time_launches(self, work: LayerWork, call: LayerCall, outputs: Sequence[TensorDesc], *,
                      repeats: int, slow_ns: float) -> float | None:
        """Device time of one run of `work`'s launches (ns, the best of `repeats` runs after a
        warm-up; a run slower than `slow_ns` ends the repeats), or None when it cannot build or
        launch on this device (a candidate the device refuses)."""
        keep: list = []            # the buffers live as long as the kernels that use them
        try:
            launches = self._bind(work, call, outputs, keep)
        except (KernelBuildError, cl.Error):
            return None
        queue = self._profiling_queue()
        try:
            best = None
            for rep in range(repeats + 1):
                events = [cl.enqueue_nd_range_kernel(queue, k, g, loc)
                          for k, g, loc in launches]
                queue.finish()
                ns = sum(e.profile.end - e.profile.start for e in events)
                if rep > 0:
                    best = ns if best is None else min(best, ns)
                if ns > slow_ns and rep > 0:
                    break
            return best
        except cl.Error:
            return None

    def _profiling_queue(self):
        if self._queue is None:
            self._queue = cl.CommandQueue(
                self.engine.context, self.engine.device,
                properties=cl.command_queue_properties.PROFILING_ENABLE)
        return self._queue

    def _bind(self, work: LayerWork, call: LayerCall, outputs, keep: list) -> list[tuple]:
        """Kernels with their arguments on scratch buffers: zeros for the inputs (the variants
        compute the same thing, so the values do not matter; zeros keep index inputs in
        bounds), the call's constants as they are. Every buffer made goes into `keep`
        (pyopencl's set_args does not keep them alive)."""
        eng = self.engine
        buffers: dict = {}
        keep.append(buffers)

        def buffer_for(ref):
            if ref in buffers:
                return buffers[ref]
            kind, which = ref
            value = None
            if kind == "in":
                desc = call.inputs[which]
                if which in call.consts:
                    value = np.asarray(call.consts[which], desc.np_dtype)
            elif kind == "out":
                desc = outputs[which]
            elif kind == "temp":
                desc = work.temps[which]
            else:
                value = np.asarray(work.consts[which])
                desc = TensorDesc(value.shape, value.dtype)
            if value is None or value.nbytes != desc.nbytes:
                value = np.zeros(max(desc.nbytes, 1), np.uint8)
            buf = cl.Buffer(eng.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                            hostbuf=np.ascontiguousarray(value))
            buffers[ref] = buf
            return buf

        bound = []
        for stage in work.stages:
            scratch: dict[int, cl.Buffer] = {}
            for launch in stage.launches:
                program = eng.cache.build(eng.context, eng.device, launch.source,
                                          launch.options, line_map=launch.line_map,
                                          label=launch.label or stage.name)
                kernel = cl.Kernel(program, launch.entry)
                args = bind_args(launch.args, _TimingArgs(eng.context, stage, buffer_for,
                                                          scratch, keep), stage.name)
                set_kernel_args(kernel, args)
                bound.append((kernel, launch.global_size, launch.local_size))
            keep += list(scratch.values())
        return bound


class _TimingArgs(ArgumentSource):
    """What the timer binds one launch of `stage` to: its tensors to the timing buffers of
    `buffer_for` (shared by the stages), its constants to uploads of their own (kept in `keep`),
    its scratch to buffers of the stage (`scratch`: index -> buffer, shared by its launches)."""

    def __init__(self, context, stage, buffer_for, scratch: dict, keep: list):
        self.context, self.stage, self.buffer_for = context, stage, buffer_for
        self.buffers, self.keep = scratch, keep

    def input(self, arg, position):
        return self.buffer_for(self.stage.inputs[arg.index])

    def output(self, arg, position):
        return self.buffer_for(self.stage.outputs[arg.index])

    def const(self, arg, position):
        buf = cl.Buffer(self.context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR,
                        hostbuf=arg.value if arg.value.nbytes else np.zeros(1))
        self.keep.append(buf)
        return buf

    def scratch(self, arg, position):
        if arg.index not in self.buffers:
            self.buffers[arg.index] = cl.Buffer(self.context, cl.mem_flags.READ_WRITE,
                                                max(arg.nbytes, 1))
        return self.buffers[arg.index]

    def local(self, arg, position):
        return cl.LocalMemory(arg.nbytes)


def time_bound_kernel(bound, engine, runs: int) -> tuple[float, str]:
    """Median seconds per run over `runs` runs: device time from profiling events when a
    profiling queue can be made, else host time around each finished run."""
    mf = cl.mem_flags
    ctx = engine.context
    ins = [cl.Buffer(ctx, mf.READ_WRITE, max(d.nbytes, 1)) for d in bound.inputs]
    outs = [cl.Buffer(ctx, mf.READ_WRITE, max(d.nbytes, 1)) for d in bound.outputs]
    try:
        queue = cl.CommandQueue(ctx, engine.device,
                                properties=cl.command_queue_properties.PROFILING_ENABLE)
        profiled = True
    except cl.Error:
        queue, profiled = engine.queue, False
    bound.enqueue(queue, ins, outs).wait()          # warm-up (first-run costs)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        event = bound.enqueue(queue, ins, outs)
        event.wait()
        if profiled:
            times.append((event.profile.end - event.profile.start) * 1e-9)
        else:
            times.append(time.perf_counter() - start)
    return statistics.median(times), "device" if profiled else "host"
