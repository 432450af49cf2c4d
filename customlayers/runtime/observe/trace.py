"""Profiles people can look at: a Chrome trace (the trace event format that Perfetto and
chrome://tracing open) of the kernels a request ran, and the per-layer table as JSON (like
benchmark_app's report).

Each kernel is one complete event ("ph": "X") on the device's timeline, at the start and for the
duration its OpenCL profiling event gives, named by the model's own node name, with the op, the
kernel entry, the variant (the launch's label: the tiling the tuner chose), the tensors' shapes
and the time in its args. One track (tid) per request.
"""
from __future__ import annotations

import json
from pathlib import Path

from ...files import atomic_writer, user_file_mode
from .profile import LayerTime

# a benchmark runs thousands of inferences: the trace keeps the first this many
MAX_TRACED_RUNS = 20


class TraceRecorder:
    def __init__(self, device_name: str, max_runs: int = MAX_TRACED_RUNS):
        self.device_name = device_name
        self.max_runs = max_runs
        self.runs = 0
        self.events: list[dict] = []
        self._tracks: dict[int, int] = {}

    def add(self, request) -> None:
        """The kernels of the request's last run (it ran with profiling)."""
        if self.runs >= self.max_runs:
            return
        self.runs += 1
        tid = self._tracks.setdefault(id(request), len(self._tracks))
        launch_of: dict[int, int] = {}
        for step, event in request.events:
            j = launch_of.get(id(step), 0)
            launch_of[id(step)] = j + 1
            launch = step.launches[j] if j < len(step.launches) else None
            start, end = event.profile.start, event.profile.end
            self.events.append({
                "name": step.name, "cat": step.impl, "ph": "X", "pid": 0, "tid": tid,
                "ts": start / 1e3, "dur": (end - start) / 1e3,
                "args": {"op": step.type,
                         "kernel": launch.entry if launch is not None else step.entry,
                         "variant": launch.label if launch is not None else "",
                         "inputs": [list(d.shape) for d in step.input_descs],
                         "outputs": [list(d.shape) for d in step.output_descs],
                         "global": list(launch.global_size) if launch is not None else [],
                         "local": list(launch.local_size or ()) if launch is not None else [],
                         "time_us": round((end - start) / 1e3, 3)}})

    def trace(self) -> dict:
        meta = [{"name": "process_name", "ph": "M", "pid": 0,
                 "args": {"name": f"OpenCL device: {self.device_name}"}}]
        meta += [{"name": "thread_name", "ph": "M", "pid": 0, "tid": tid,
                  "args": {"name": f"request {tid} (in-order queue)"}}
                 for tid in sorted(self._tracks.values())]
        # timestamps relative to the first kernel: the device clock's epoch means nothing
        origin = min((e["ts"] for e in self.events), default=0.0)
        events = [dict(e, ts=round(e["ts"] - origin, 3), dur=round(e["dur"], 3))
                  for e in self.events]
        return {"traceEvents": meta + events, "displayTimeUnit": "ms",
                "otherData": {"device": self.device_name, "runs": self.runs}}

    def write(self, path) -> None:
        write_json(path, self.trace())


def report(rows: list[LayerTime], runs: int, device_name: str) -> dict:
    """The per-layer table as data: execution order, times averaged over the runs."""
    total = sum(r.ns for r in rows) or 1
    return {"device": device_name, "runs": runs,
            "total_us": round(total / runs / 1e3, 3),
            "layers": [{"name": r.name, "type": r.type, "impl": r.impl, "kernel": r.entry,
                        "launches": r.launches // max(runs, 1),
                        "time_us": round(r.ns / runs / 1e3, 3),
                        "share": round(r.ns / total, 5)} for r in rows]}


def write_json(path, data) -> None:
    """The trace or report the user asked for, whole or not at all, with the permissions
    open() would give it (not mkstemp's 0600)."""
    with atomic_writer(Path(path), mode=user_file_mode()) as f:
        f.write(json.dumps(data, indent=1).encode("utf-8"))
