"""Ray Data batch inference with custom layers: a callable class for `Dataset.map_batches`.

    import ray
    from customlayers.integrations.ray import CustomLayersPredictor

    ds = ray.data.from_numpy(np.array_split(images, 64))   # several blocks: several actors
    out = ds.map_batches(CustomLayersPredictor,
                         fn_constructor_kwargs=dict(model="m.onnx", configs=["layers.xml"],
                                                    device="GPU"),
                         batch_size=128, num_gpus=1,
                         compute=ray.data.ActorPoolStrategy(
                             size=4, max_tasks_in_flight_per_actor=8))

Ray makes one instance per actor, so the network (its configs loaded, its programs built
through the on-disk cache) is built once per actor and reused for every batch. With
`num_gpus=1` each actor runs on the GPU Ray assigned it; on a CPU-only node each actor's PoCL
gets as many threads as the actor has CPUs (`num_cpus`), so actors do not oversubscribe the
cores (placement.py). Batches are cut into requests as the model's batch dimension requires
(batches.py) and run with several in flight (inflight.py). The class needs nothing of Ray
itself, so it also runs in a plain process or as a Ray Core actor (`pip install
customlayers[ray]` brings Ray). `model` may be a compiled package (.clpkg): nothing is built or
tuned per actor, and rows are cut into requests of the package's compiled batch. Queue several
batches per actor (max_tasks_in_flight_per_actor): a GPU actor otherwise waits for Ray's next
batch (bench/ray_scaling.py: 71% efficiency at 4 GPUs with Ray's default, 97% with 8).
"""
from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Sequence

from ..errors import CustomLayersError
from .batches import BatchPlan, model_inputs, split_columns
from .inflight import PinnedRequests, run_in_flight
from .network_setup import build_network
from .placement import choose_device, device_report, limit_pocl_threads, ray_share, threads_for

# requests in flight per actor: enough to overlap one request's upload with another's compute
DEFAULT_NIREQ = 4


class CustomLayersPredictor:
    """Runs a model with custom layers on batches of rows; returns its outputs as columns.

    model: an OpenVINO IR (.xml) or ONNX model; use absolute paths (or paths on a file system
        every node mounts): an actor's working directory is not the driver's on a cluster.
    configs: CustomLayer descriptor files (`-c`). python_layers: .py files of CPU layers (`-l`).
    device: a selector (CPU, GPU, GPU.1, part of a name); None or "GPU" with GPUs assigned by
        Ray: the actor's own GPU.
    tuning: the Network's kernel tuning, "off" | "fast" | "full" (None: its default).
    cache_dir: the on-disk program cache; a directory on a shared file system lets one node's
        builds serve the whole cluster (default: CUSTOMLAYERS_CACHE_DIR, else the user's).
    nireq: requests in flight per batch. cpu_threads: PoCL's threads in this actor (default:
        the CPUs Ray assigned the actor, or PoCL's own choice outside Ray).
    pinned: upload from pinned host memory: each request's rows are copied into pinned
        buffers the actor keeps (allocated once per input shape), which the device reads by
        DMA, instead of the driver staging the batch's pageable memory itself. It pays where
        uploads are large against the compute (bench/ray_scaling.py measures both); the
        outputs are the same either way.

    A batch is a dict of numpy arrays (columns named after the model's inputs, or one column
    for a model of one input) or one array; columns that are not inputs pass through. The
    result holds one column per model output, one row per input row.
    """

    def __init__(self, model, configs: Sequence | str | None = (),
                 python_layers: Sequence | str | None = (), device: str | None = None,
                 tuning=None, cache_dir: str | Path | None = None,
                 nireq: int = DEFAULT_NIREQ, cpu_threads: int | None = None,
                 pinned: bool = False):
        if not isinstance(nireq, int) or nireq < 1:
            raise ValueError(f"nireq must be a whole number of at least 1, found {nireq!r}")
        self.model = str(model)
        self.nireq = nireq
        share = ray_share()
        # before anything touches OpenCL in this process: PoCL reads it once, at its start
        threads = cpu_threads if cpu_threads is not None else threads_for(share.cpus)
        if threads is not None:
            limit_pocl_threads(threads)
        try:
            chosen = choose_device(device, share.gpu_ids)
            self.network = build_network(model, configs, python_layers, chosen, tuning,
                                         cache_dir)
        except CustomLayersError as e:
            self._place(e, building=True)
            raise
        package = self.network.package
        # a package runs only the input shapes it was compiled for (its manifest lists them)
        self.inputs = model_inputs(self.network.graph, [] if package is None else
                                   package.manifest["input_shapes"])
        self._pinned = PinnedRequests(self.network, nireq) if pinned else None
        # what this actor runs on, for logs and benchmarks (which GPU; PoCL's thread count)
        self.device_info = device_report(chosen)

    def run_requests(self, requests: list[dict]) -> list[dict]:
        """The outputs of a batch's requests ({input name: array} each), in order, with up to
        `nireq` in flight, through pinned buffers or not as the predictor was made."""
        if self._pinned is not None:
            return self._pinned.run(requests)
        return run_in_flight(self.network, requests, self.nireq)

    def _place(self, error: CustomLayersError, building: bool = False) -> None:
        """Record on the error where it arose: an actor's error reaches the driver far from the
        node and directory that explain it (a relative path is read from the actor's
        working directory)."""
        if error.context is None:
            where = f"CustomLayersPredictor for model '{self.model}' on {socket.gethostname()}"
            if building and not Path(self.model).is_absolute():
                where += f" (working directory {os.getcwd()})"
            error.context = where

    def __call__(self, batch) -> dict:
        try:
            feeds, passthrough = split_columns(batch, self.inputs)
            plan = BatchPlan.of(feeds, self.inputs)
            return plan.join(self.run_requests(plan.requests()), passthrough)
        except CustomLayersError as e:
            self._place(e)
            raise
