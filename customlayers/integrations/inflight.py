"""Run a list of requests' inputs with several in flight; the outputs come back in order.

With several requests on the device the upload of one overlaps the compute of another (each
request has its own queue). A window of `infer_async` calls does it with the network's own pool
of requests, which stays from one batch to the next. `Network.stream(inputs, nireq)` does the
same for one long stream, but makes requests of its own at each call: called once per Ray batch
(32 rows of the demo CNN on PoCL) it took 1.8x and 1.9x as long as this window (two runs, each
interleaved), the difference being the requests it makes again.
"""
from __future__ import annotations

import threading
from collections import deque
from typing import Iterable, Mapping, Sequence

from ..runtime.execute.stream import run_stream


def run_in_flight(network, inputs: Sequence[Mapping], nireq: int) -> list[dict]:
    """{output name: array} for each of `inputs`, in order, with up to `nireq` in flight."""
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


class PinnedRequests:
    """Requests of one network kept from batch to batch, each uploading from its own pinned
    host tensors: the batch's rows are copied into pinned memory (a host copy a core does at
    memory speed) and the device reads them by DMA, instead of the driver staging pageable
    memory itself. The requests stay, so their pinned memory is allocated once per input
    shape, not once per batch."""

    def __init__(self, network, nireq: int):
        self.network = network
        self.nireq = nireq
        # id(plan) -> the requests made for it (run_stream makes them as a batch's shapes
        # need them, at most nireq a plan; a request holds its plan, so the id stays its own)
        self._pools: dict = {}
        # one batch at a time: a request is marked busy only when it starts, after its rows
        # were copied into its pinned memory, so two batches at once (an actor with several
        # concurrent calls, a Serve replica) could pick the same request and mix their rows
        self._lock = threading.Lock()

    def run(self, inputs: Iterable[Mapping]) -> list[dict]:
        """{output name: array} for each of `inputs`, in order, up to `nireq` in flight. Each
        item is named (checked, converted) once, by run_stream."""
        with self._lock:
            # outputs are copied out of the pinned memory before a request runs again
            return [r.outputs for r in run_stream(self.network, inputs, self.nireq,
                                                  pinned=True, pools=self._pools)]
