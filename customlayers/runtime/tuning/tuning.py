"""Kernel selection by timing (OpenPPL's runtime algorithm selection, TensorRT's tactics).

A layer implementation lists the kernel variants it can run for a call (LayerImpl.variants:
objects with a stable name, jit/variant.py; the heuristic's best first: for convolution and
MatMul a space of GEMM tilings and split-K factors, ops/nn/_variants.py; for a custom layer whose
descriptor leaves the local size open, a few local sizes). While the network compiles, the
Tuner times the first few of them (all of them with `full`) on the device, on scratch buffers,
with profiling events, and hands the fastest back through CompileContext.variant. The choice
(the variant's name) is kept on disk per device, driver and layer signature (tuning_cache.py,
next to the program cache), so a second load times nothing.

Nothing here knows a kind of layer or a kind of device: the same mechanism serves every
implementation that lists variants, on a GPU or a CPU.

Modes: "off" (the heuristic's first variant, nothing timed), "fast" (the default: the first
FAST_CANDIDATES; on a CPU device none, see FAST_CANDIDATES_CPU), "full" (every variant).
"""
from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, replace
from typing import Sequence

from ...errors import CustomLayersError, KernelBuildError
from ...jit.layer import LayerCall, LayerImpl, LayerWork
from ...jit.tensor import TensorDesc
from ...jit.variant import KernelVariant, variant_named
from ...settings import DEFAULT_TUNING, tuning_mode
from ..execute.launch_timing import LaunchTimer
from ..device.build_workers import worker_count
from ..device.limits import device_traits
from ..device.parallel_build import build_jobs, build_programs
from .tuning_cache import TuningCache

FAST_CANDIDATES = 4
# on a CPU device `fast` times none: PoCL compiles each candidate's kernels, 0.5-2 s apiece (a
# TCN's 51 candidates took 105 s), more than the best candidate's gain (1-2x on some layers)
# wins back in most runs; `full` times them, and its choices answer `fast` later
FAST_CANDIDATES_CPU = 1


def _fast_candidates(on_cpu: bool) -> int:
    """How many of a layer's candidates `fast` times (the first ones, in its heuristic's order)."""
    return FAST_CANDIDATES_CPU if on_cpu else FAST_CANDIDATES


# timed runs per candidate after one warm-up; a candidate slower than SLOW_NS runs once
REPEATS = 3
SLOW_NS = 20_000_000
# a record tuned with one of these modes answers a request for the mode (full answers fast)
_ANSWERS = {"fast": ("fast", "full"), "full": ("full",)}


@dataclass
class TuningStats:
    layers_timed: int = 0
    candidates_timed: int = 0
    from_cache: int = 0
    seconds: float = 0.0


class Tuner:
    """Chooses a variant per layer call by timing; see the module docstring."""

    def __init__(self, engine, mode: str = DEFAULT_TUNING, cache: TuningCache | None = None):
        self.engine = engine
        self.mode = tuning_mode(mode)      # ConfigError naming the argument
        self.cache = cache if cache is not None else TuningCache.for_device(
            engine.device, enabled=engine.cache.enabled, directory=engine.cache.directory,
            writable=engine.cache.writable)
        self.stats = TuningStats()
        self._timer = LaunchTimer(engine)
        self._collected: list | None = None     # build_ahead(): the candidates' build jobs

    def build_ahead(self, walk) -> None:
        """Where build workers compile (worth it: on NVIDIA each layer's 4 candidates alone
        took 0.5 s, ResNet-50's 100 at once a few seconds), `walk()` the layers once with
        choose() collecting the candidates it would time and choosing none, then build them
        all in one batch into the program cache, where the choices made next find them. An
        error in the walk ends it: the compile after meets it and reports it."""
        if not self._may_time() or worker_count(self.engine) < 2:
            return
        started = time.perf_counter()
        self._collected = []
        try:
            walk()
        except CustomLayersError:
            return
        finally:
            collected, self._collected = self._collected, None
        if collected:
            build_programs(self.engine, collected)
            self.stats.seconds += time.perf_counter() - started   # the tuning's own time

    def _may_time(self) -> bool:
        """Whether choose() times candidates on this device at all: not with "off", nor with
        "fast" on a CPU device (FAST_CANDIDATES_CPU), where the collecting walk of build_ahead
        would find nothing (a walk of every layer, folding weights again, for no build)."""
        if self.mode == "off":
            return False
        return self.mode == "full" or \
            _fast_candidates(device_traits(self.engine.device).kind == "CPU") >= 2

    def choose(self, impl: LayerImpl, call: LayerCall,
               outputs: Sequence[TensorDesc]) -> KernelVariant | None:
        """The variant `impl` should run for `call` (None: its heuristic's, nothing to choose)."""
        if self.mode == "off":
            return None
        variants = impl.variants(call, outputs)
        if len(variants) < 2:
            return None
        signature = layer_signature(impl, call, outputs, variants)
        record = self.cache.get(signature)
        cached = variant_named(variants, record.get("variant")) if record is not None else None
        if cached is not None and record.get("mode") in _ANSWERS[self.mode]:
            if self._collected is None:         # the collecting walk counts nothing
                self.stats.from_cache += 1
            return cached
        candidates = variants if self.mode == "full" else \
            variants[:_fast_candidates(call.context.on_cpu)]
        if len(candidates) < 2:
            return None
        started = time.perf_counter()
        works = {}
        for variant in candidates:
            try:
                works[variant] = impl.work(
                    replace(call, context=replace(call.context, variant=variant)), outputs)
            except KernelBuildError:          # a custom layer binds (builds) in work()
                continue
        jobs = build_jobs(stage for work in works.values() for stage in work.stages)
        if self._collected is not None:
            self._collected.extend(jobs)
            return None
        # the candidates' programs built at once, on as many threads as the driver takes
        build_programs(self.engine, jobs)
        times: dict[KernelVariant, float] = {}
        for variant, work in works.items():
            ns = self._time(work, call, outputs)
            if ns is not None:
                times[variant] = ns
        self.stats.seconds += time.perf_counter() - started
        self.stats.layers_timed += 1
        self.stats.candidates_timed += len(candidates)
        if not times:
            return None          # none ran: the heuristic's, whose build reports the error
        best = min(times, key=times.get)
        self.cache.put(signature, {
            "layer": call.name, "type": call.type, "variant": best.name, "mode": self.mode,
            "times_us": {v.name: round(t / 1e3, 3) for v, t in times.items()},
            "shapes": [list(d.shape) for d in call.inputs]})
        return best

    def summary(self) -> str:
        s = self.stats
        path = self.cache.path
        where = ("" if path is None else f" ({path})" if self.cache.keeps else
                 f" ({path}; this run's choices are not kept: its folder cannot be written)")
        return (f"tuning ({self.mode}): {s.layers_timed} layer(s) timed, {s.candidates_timed} "
                f"candidate(s), in {s.seconds:.2f} s; {s.from_cache} choice(s) from the "
                f"cache{where}")

    # -- timing ----------------------------------------------------------------------------
    def _time(self, work: LayerWork, call, outputs) -> float | None:
        """Device time of one run of a variant's work (ns, best of REPEATS), or None when it
        cannot build or launch on this device (a candidate the device refuses). The buffers,
        queue and events are execute/launch_timing.py's."""
        return self._timer.time_launches(work, call, outputs, repeats=REPEATS, slow_ns=SLOW_NS)


def layer_signature(impl: LayerImpl, call: LayerCall, outputs: Sequence[TensorDesc],
                    variants: Sequence[KernelVariant]) -> str:
    """What the timing depends on: the implementation, its tensors and attributes, the fused
    epilogue, the facts passes handed it, and the candidate list itself (a changed space is
    timed anew)."""
    parts = [impl.impl, impl.type,
             ";".join(_tensor_text(d) for d in call.inputs),
             ";".join(_tensor_text(d) for d in outputs),
             repr(sorted((k, repr(v)) for k, v in call.attrs.items())),
             repr(call.context.epilogue), ",".join(v.name for v in variants)]
    if call.context.facts:              # none: the signature of a layer as it always was
        parts.append(repr(call.context.facts))
    text = "|".join(parts)
    return f"{impl.type}:{hashlib.sha256(text.encode()).hexdigest()[:24]}"


def _tensor_text(d: TensorDesc) -> str:
    return f"{d.dtype}{list(d.shape)}{d.format}{list(d.lower_pad)}{list(d.upper_pad)}"
