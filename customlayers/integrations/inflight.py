"""Run a list of requests' inputs with several in flight; the outputs come back in order.

With several requests on the device the upload of one overlaps the compute of another (each
request has its own queue). `Network.stream(inputs, nireq)` does exactly this where the runtime
has it; otherwise a window of `infer_async` requests does the same with the network's own pool.
"""
from __future__ import annotations

from collections import deque
from typing import Mapping, Sequence


def run_in_flight(network, inputs: Sequence[Mapping], nireq: int) -> list[dict]:
    """{output name: array} for each of `inputs`, in order, with up to `nireq` in flight."""
    stream = getattr(network, "stream", None)
    if callable(stream):
        return [dict(outputs) for outputs in stream(inputs, nireq)]
    results: list[dict] = []
    pending: deque = deque()
    try:
        for item in inputs:
            if len(pending) == nireq:
                results.append(pending.popleft().wait())
            pending.append(network.infer_async(item))
        while pending:
            results.append(pending.popleft().wait())
    finally:
        # a failure mid-way: let no request run on into buffers that are reused next batch
        for request in pending:
            try:
                request.wait()
            except Exception:   # noqa: BLE001 - the error that stopped the loop is the one raised
                pass
    return results
