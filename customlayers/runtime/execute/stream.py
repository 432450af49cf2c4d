"""Streaming: many inputs through a few requests in flight, the outputs in input order.

The TCN deployment notes' threaded pipeline in one loop: while up to `nireq` requests are on the
device, the host takes the next input from the caller's iterable and enqueues its upload and
kernels on a free request (each request has its own queue, so the upload of one overlaps the
compute of another); then it waits for the oldest request, the one whose output comes next.
Network.stream and `customlayers benchmark -nireq N` both run on `run_stream`.
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Iterable, Iterator

import numpy as np

from ...errors import CustomLayersError, ModelError
from .user_tensors import host_array


@dataclass
class StreamResult:
    index: int              # the input's place in the stream
    outputs: dict           # output name -> array
    latency_ms: float       # from the request's start to its outputs on the host
    request: object         # the InferRequest that ran it (its profiling events, until the
                            # next item is taken)


def run_stream(network, inputs: Iterable, nireq: int = 4, *, pinned: bool = False,
               reuse_outputs: bool = False, requests=(),
               pools: dict | None = None) -> Iterator[StreamResult]:
    """Run every input of `inputs` (arrays in input order, or dicts by name) with up to
    `nireq` requests in flight; yield a StreamResult per input, in input order.

    The yielded arrays are the caller's: a later step never writes them.
    pinned: each input is copied into its request's pinned host tensor (host_tensor) and the
    outputs are read back into pinned ones (on a CPU device the kernels write them there).
    Those tensors are the request's and its next run rewrites them, so each output is copied
    out of them before it is yielded, unless
    reuse_outputs: the caller opts out of that copy: the yielded arrays are then the requests'
    pinned memory, valid only until the next item is taken (for a caller that reads each
    result at once and keeps none, such as a throughput measurement).
    requests: requests made beforehand (a benchmark makes them outside its measured time);
    more are made as the inputs' plans need them.
    pools: the requests by plan of a caller that runs stream after stream (PinnedRequests);
    the stream takes idle ones from it and adds those it makes, so the next stream has them."""
    if not isinstance(nireq, int) or nireq < 1:
        raise ModelError(f"nireq must be a whole number of at least 1, found {nireq!r}")
    pools = {} if pools is None else pools    # id(plan) -> the requests for that plan
    for request in requests:
        pools.setdefault(id(request.plan), []).append(request)
    in_flight: deque = deque()            # (index, request, start time), oldest first
    keep = pinned and not reuse_outputs   # copy the outputs out of the request's host tensors
    try:
        for index, item in enumerate(inputs):
            try:
                arrays = network._named_inputs(item)
            except CustomLayersError as e:
                yield from _after_the_items_before(e, index, in_flight, keep)
            if len(in_flight) == nireq:         # (an earlier item's own error stays its own)
                yield _finish(in_flight.popleft(), keep)
            try:
                request = _idle_request(network, pools, arrays)
                started = time.perf_counter()
                if pinned:
                    _start_pinned(request, arrays)
                else:
                    request.start(arrays)
            except CustomLayersError as e:
                yield from _after_the_items_before(e, index, in_flight, keep)
            in_flight.append((index, request, started))
        while in_flight:
            yield _finish(in_flight.popleft(), keep)
    finally:
        # the caller stopped early, or a run failed: let nothing run on into freed memory
        for _, request, _ in in_flight:
            try:
                request.wait()
            except Exception:   # noqa: BLE001 - the error that stopped the stream is reported
                pass


def _after_the_items_before(error: CustomLayersError, index: int, in_flight: deque,
                            keep: bool) -> Iterator[StreamResult]:
    """An item that cannot run: the items before it still come out, in order, then `error`,
    naming the item's place (the results in flight were lost, and the error said only what was
    wrong: a new user's trial)."""
    if error.context is None:
        error.context = f"item {index} of the stream"
    while in_flight:
        yield _finish(in_flight.popleft(), keep)
    raise error


def _idle_request(network, pools: dict, arrays: dict):
    shapes = {n: tuple(a.shape) for n, a in arrays.items()}
    # compiling a plan and uploading its constants are not safe from two threads: the
    # network's lock, as infer_async takes it
    with network._lock:
        plan = network.plan_for(shapes, arrays)
        pool = pools.setdefault(id(plan), [])
        for request in pool:
            if not request.busy:
                return request
        request = network.create_request(shapes, arrays)
    pool.append(request)
    return request


def _start_pinned(request, arrays: dict) -> None:
    for name, key in request.plan.inputs:
        array = host_array(name, "input", arrays[name], request.plan.descs[key])
        np.copyto(request.host_tensor(name), array, casting="unsafe")   # as infer converts
    for name, _ in request.plan.outputs:
        request.host_tensor(name)
    request.start_async()


def _finish(entry, keep: bool) -> StreamResult:
    index, request, started = entry
    outputs = request.wait()
    latency_ms = (time.perf_counter() - started) * 1e3
    if keep:         # the pinned arrays stay the request's; the caller gets its own
        outputs = {name: array.copy() for name, array in outputs.items()}
    return StreamResult(index, outputs, latency_ms, request)
