"""Building a network's programs in parallel: pyopencl releases the GIL in clBuildProgram, and
drivers compile independent programs on as many threads as they are given (a cold ResNet-50 is
dozens of programs); a driver that compiles one at a time per process (NVIDIA's, PoCL's) gets
the programs not yet cached compiled in worker processes first (build_workers.py), and its
threads then load them. Each distinct (source, options) is built once; a failed build comes back
as its exception, so the caller raises the first in its own order (the layer a sequential build
would have named)."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Iterable

from ...errors import CustomLayersError
from .build_workers import build_in_workers

# more threads than this gain nothing on the drivers we know and multiply their memory use
MAX_THREADS = 8


def build_jobs(stages: Iterable) -> list[tuple]:
    """What build_programs takes for every launch of `stages`: (source, options, line_map,
    label), the label the stage's name where the launch has none."""
    return [(launch.source, launch.options, launch.line_map, launch.label or stage.name)
            for stage in stages for launch in stage.launches]


def build_programs(engine, wanted: Iterable[tuple]) -> dict[tuple, object]:
    """{(source, options): program, or the CustomLayersError its build raised} for `wanted`:
    (source, options, line_map, label) tuples."""
    unique: dict[tuple, tuple] = {}
    for source, options, line_map, label in wanted:
        unique.setdefault((source, options), (line_map, label))
    if not unique:
        return {}
    build_in_workers(engine, [(*key, *unique[key]) for key in unique])

    def build(key):
        line_map, label = unique[key]
        try:
            return engine.cache.build(engine.context, engine.device, key[0], key[1],
                                      line_map=line_map, label=label)
        except CustomLayersError as e:
            return e

    threads = min(MAX_THREADS, os.cpu_count() or 1, len(unique))
    if threads <= 1:
        return {key: build(key) for key in unique}
    with ThreadPoolExecutor(threads, thread_name_prefix="cl-build") as pool:
        futures = {key: pool.submit(build, key) for key in unique}
        return {key: future.result() for key, future in futures.items()}
