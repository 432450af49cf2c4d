"""Throughput of a model with custom layers through Ray with one actor per GPU (or per share of
the CPU cores), the efficiency per added GPU, and where the time goes, measured in one run.

    python bench/ray_scaling.py --gpu --model resnet50 --batch 32    # a node with GPUs
    python bench/ray_scaling.py --model demo                         # CPU (PoCL)

The model is compiled once, into a package (customlayers compile), by a Ray task on one GPU;
every actor loads that package (no build, no tuning per actor). The rows lie in Ray's object
store as numpy blocks, one Ray batch each (`--per-call` model batches of `--batch` rows): an
actor cuts a Ray batch into requests of the model's batch and runs them with `--nireq` in flight,
so one request's upload overlaps another's compute. The dataset is a few distinct blocks
repeated (a union of one materialized dataset), so the object store holds them once.

Two paths (--path): Ray Data (map_batches with an actor pool, `--tasks-per-actor` batches queued
per actor) and Ray Core (the predictor as a plain actor, called with ObjectRefs of the numpy
batches, two calls in flight per actor). GPU cases: 1, 2, 4, ... actors with one GPU each (as
many as the node has), with pageable uploads and with pinned ones (--uploads;
CustomLayersPredictor(pinned=True)). CPU cases: 1 actor on half the cores, 2 actors on half each
(the ideal is 2x), 1 actor on all the cores.

Figures:
  * steady rows/s: while every actor works, from batch times stamped inside the actors (actor
    start-up and Ray's start are left out; the end-to-end rate, which includes them, is shown);
  * efficiency: rows/s of n actors / (n x rows/s of 1 actor) of the same path and upload kind
    (the CPU's reference row, one actor on every core, has none: it shows what one process
    does with the cores the two actors share; "e2e": end-to-end rows/s, start-up included);
  * where the time goes, per actor, as shares of the steady window: `device` (requests in
    flight: uploads, kernels, read-backs), `host` (cutting the batch into requests, padding,
    joining the outputs), `ray` (waiting for Ray's next batch: scheduling, object
    transfers, the call's own overhead in the actor); and, outside Ray, one GPU's own
    ceiling from a probe task: rows/s with the input already on the device, with pageable
    uploads and with pinned ones;
  * actor start-up: the predictor's construction (the package loaded, the device set up), with
    the driver's compiled-code cache cold (a fresh CUDA_CACHE_PATH: the probe) and warm (the
    actors of the timed runs).
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

from customlayers.integrations.ray import CustomLayersPredictor  # noqa: E402
# the figures of a pass, and the models with their rows: sibling modules in bench/
from ray_figures import figures  # noqa: E402
from ray_models import (BERT_SEQ, MODELS, block_dataset, make_block,  # noqa: E402
                        model_items, model_path)


class TimedPredictor(CustomLayersPredictor):
    """The predictor, stamping each batch with its start, the end of the host's cutting, the
    end of its requests and its end (wall clock: one node, one clock), the actor's pid, its
    construction time and its device; it returns the top class per row, not the logits."""

    def __init__(self, *args, cuda_cache: str | None = None, **kwargs):
        started = time.perf_counter()
        if cuda_cache:           # before OpenCL starts in this process: NVIDIA reads it then
            os.environ["CUDA_CACHE_PATH"] = cuda_cache
        super().__init__(*args, **kwargs)
        self.init_s = time.perf_counter() - started
        info = self.device_info
        where = f", PCI {info['pci']}, CUDA_VISIBLE_DEVICES=" \
            f"{os.environ.get('CUDA_VISIBLE_DEVICES', '-')}" if "pci" in info else ""
        self.device = f"{info['name']} ({info['compute_units']} CU{where})"

    def __call__(self, batch):
        from customlayers.integrations.batches import BatchPlan, split_columns
        t0 = time.time()
        feeds, _ = split_columns(batch, self.inputs)
        plan = BatchPlan.of(feeds, self.inputs)
        requests = plan.requests()
        t_cut = time.time()
        results = self.run_requests(requests)
        t_run = time.time()
        out = plan.join(results)
        first = next(iter(out.values()))
        top = first.reshape(len(first), -1).argmax(axis=1)
        t1 = time.time()
        n = len(top)
        return {"top": top, "t0": np.full(n, t0), "t_cut": np.full(n, t_cut),
                "t_run": np.full(n, t_run), "t1": np.full(n, t1),
                "pid": np.full(n, os.getpid()), "init_s": np.full(n, self.init_s),
                "device": np.full(n, self.device)}


def compile_package(model: str, configs: list, device: str, shapes: dict | None,
                    tuning: str | None, out: str, cuda_cache: str) -> dict:
    """(A Ray task on one GPU.) The model compiled for `shapes` and written as a package."""
    os.environ["CUDA_CACHE_PATH"] = cuda_cache
    from customlayers.integrations.placement import choose_device, ray_share
    from customlayers.runtime.compile.network import Network
    from customlayers.runtime.compile.packaged import save_package
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.layers.registry import Registry
    started = time.perf_counter()
    engine = Engine(choose_device(device, ray_share().gpu_ids))
    registry = Registry(engine)
    for c in configs:
        registry.load(c)
    # shapes None: the model's own (a plan for its declared input shapes)
    net = Network(model, registry, engine, input_shapes=shapes,
                  **({"tuning": tuning} if tuning else {}))
    manifest = save_package(net, out, model=model)
    return {"seconds": time.perf_counter() - started, "programs": len(manifest["programs"]),
            "bytes": sum(p["size"] for p in manifest["parts"])}


def probe(package: str, device: str, rows: dict, nireq: int, cuda_cache: str) -> dict:
    """(A Ray task on one GPU.) Outside Ray Data: the actor's construction time with the
    driver's code cache as `cuda_cache` left it, then this GPU's rows/s on `rows` (whole Ray
    batches, run 3 times) with the input already on the device, with pageable uploads and with
    pinned ones."""
    os.environ["CUDA_CACHE_PATH"] = cuda_cache
    started = time.perf_counter()
    actor = TimedPredictor(model=package, device=device, nireq=nireq, cuda_cache=cuda_cache)
    init_s = time.perf_counter() - started
    pinned = TimedPredictor(model=package, device=device, nireq=nireq, pinned=True)
    out = {"init_s": init_s, "device": actor.device}
    for label, run in (("pageable", actor), ("pinned", pinned)):
        run(rows)                                 # first: requests and pinned memory made
        t = time.perf_counter()
        for _ in range(3):
            run(rows)
        # rows: {column: array}; its len() would count the columns, not the rows
        out[label] = 3 * len(next(iter(rows.values()))) / (time.perf_counter() - t)
    try:
        out["device_only"] = f"{device_only_rate(actor, rows, nireq):.0f}"
    except Exception as e:      # noqa: BLE001 - a figure the probe could not take, said so
        out["device_only"] = f"n/a ({type(e).__name__}: {e})"
    return out


def device_only_rate(actor, rows: np.ndarray, nireq: int) -> float:
    """Rows/s with each request's inputs set once as device buffers: no upload, the kernels
    and the outputs' read-back, `nireq` requests in flight, as many requests as the rows
    make, 3 times over."""
    import pyopencl as cl
    from customlayers.dtypes import numpy_of
    from customlayers.integrations.batches import BatchPlan
    network, inputs = actor.network, actor.inputs
    plan = BatchPlan.of(rows, inputs)
    items = plan.requests()
    requests = []
    for item in items[:nireq]:
        req = network.create_request({n: a.shape for n, a in item.items()})
        for name, key in req.plan.inputs:
            array = np.ascontiguousarray(item[name], numpy_of(req.plan.descs[key].dtype))
            buf = cl.Buffer(network.engine.context, cl.mem_flags.READ_WRITE, array.nbytes)
            cl.enqueue_copy(network.engine.queue, buf, array)
            req.set_tensor(name, buf)
        requests.append(req)
    network.engine.queue.finish()

    def once():
        for i in range(len(items)):
            req = requests[i % len(requests)]
            if req.busy:
                req.wait()
            req.start_async()
        for req in requests:
            if req.busy:
                req.wait()
    once()
    t = time.perf_counter()
    for _ in range(3):
        once()
    return 3 * plan.rows / (time.perf_counter() - t)


def run_pass(ray, ds, actors: int, kwargs: dict, ray_batch: int, resources: dict,
             expected_rows: int, tasks_per_actor: int | None) -> dict:
    """One Ray Data pass of `actors` actors; its figures (see the module's text)."""
    start = time.time()
    # zero_copy_batch: the batch is a read-only view of the block in the object store (the
    # predictor only reads it), not a copy of it per batch
    out = ds.map_batches(TimedPredictor, fn_constructor_kwargs=kwargs, batch_size=ray_batch,
                         batch_format="numpy", zero_copy_batch=True,
                         compute=ray.data.ActorPoolStrategy(
                             size=actors, max_tasks_in_flight_per_actor=tasks_per_actor),
                         **resources)
    parts = list(out.iter_batches(batch_size=None, batch_format="numpy"))
    end = time.time()
    rows = sum(len(p["t0"]) for p in parts)
    if rows != expected_rows:
        raise RuntimeError(f"{rows} rows came back of {expected_rows}")
    return figures(parts, rows, end - start)


def core_pass(ray, refs: list, actors: int, kwargs: dict, resources: dict, batches: int,
              depth: int) -> dict:
    """One pass through Ray Core instead of Ray Data: `actors` predictor actors, each called
    with ObjectRefs of numpy batches (read zero-copy from the object store), `depth` calls in
    flight per actor so the next batch is there when one ends; the same figures."""
    cls = ray.remote(**resources)(TimedPredictor)
    start = time.time()
    pool = [cls.remote(**kwargs) for _ in range(actors)]
    pending: dict = {}              # result ref -> actor index
    parts = []
    submitted = 0

    def submit(i):
        nonlocal submitted
        pending[pool[i].__call__.remote(refs[submitted % len(refs)])] = i
        submitted += 1
    for i in range(actors):
        for _ in range(depth):
            if submitted < batches:
                submit(i)
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        i = pending.pop(done[0])
        parts.append(ray.get(done[0]))
        if submitted < batches:
            submit(i)
    end = time.time()
    for actor in pool:
        ray.kill(actor)
    return figures(parts, sum(len(p["t0"]) for p in parts), end - start)


def gpu_count() -> int:
    """OpenCL GPUs of this node (what Ray is told to hand out)."""
    from customlayers.runtime.device.device import list_devices
    import pyopencl as cl
    return sum(1 for d in list_devices() if d.type & cl.device_type.GPU)


def compiled_at_start(package: str, folder: Path) -> str:
    """What the driver compiled while a case's actors started on an empty code cache folder:
    the files there that are not the package's machine code (none, where the actors' driver
    found all of it; the folder must be the one their OpenCL started with)."""
    from customlayers.runtime.package.container import read_package
    from customlayers.runtime.package.machine_code import PART_PREFIX
    ours = {name[len(PART_PREFIX):] for name in read_package(package).parts
            if name.startswith(PART_PREFIX)}
    found = {p.relative_to(folder).as_posix() for p in folder.rglob("*")
             if p.is_file() and p.name != "index"} if folder.exists() else set()
    if not found:
        return "the actors' code cache folder is empty: their driver did not read it"
    extra = found - ours
    return (f"driver cache: the package's {len(found & ours)} files; the driver compiled "
            f"{len(extra)} program(s) more" if extra else
            f"driver cache: only the package's {len(found)} files: the driver compiled nothing")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="demo")
    parser.add_argument("--gpu", action="store_true", help="one actor per GPU: 1, 2, 4, ...")
    parser.add_argument("--batch", type=int, default=None,
                        help="the model's batch, compiled into the package (default: the "
                             "model's own; 32 for resnet50)")
    parser.add_argument("--per-call", type=int, default=4,
                        help="model batches per Ray batch (requests an actor has in flight)")
    parser.add_argument("--rows", type=int, default=None,
                        help="rows per pass (default: 8192 on GPUs, 512 on the CPU)")
    parser.add_argument("--distinct", type=int, default=8,
                        help="distinct Ray batches in the object store (repeated to --rows)")
    parser.add_argument("--cpus", type=int, default=os.cpu_count(),
                        help="cores Ray may use (default: all)")
    parser.add_argument("--nireq", type=int, default=4, help="requests in flight per actor")
    parser.add_argument("--tuning", choices=("off", "fast", "full"), default=None)
    parser.add_argument("--uploads", choices=("pageable", "pinned", "both"), default="both",
                        help="GPU cases: uploads from Ray's pageable batches, from pinned "
                             "buffers (pinned=True), or each")
    parser.add_argument("--path", choices=("data", "core", "both"), default="both",
                        help="Ray Data's map_batches with an actor pool, Ray Core actors "
                             "called with ObjectRefs of the batches, or each")
    parser.add_argument("--tasks-per-actor", type=int, default=8,
                        help="Ray Data: tasks queued per actor (max_tasks_in_flight_per_actor; "
                             "default 8: with Ray's own, 0, ResNet-50's actors waited for "
                             "their next batch 41%% of the time); the Ray Core path keeps 2 "
                             "calls in flight per actor")
    parser.add_argument("--fresh-driver-cache", action="store_true",
                        help="GPU: each case's actors start with an empty NVIDIA code cache "
                             "folder of their own, as on a new node (the package's machine code "
                             "is all they find); by default they share one, warm after the "
                             "probes")
    parser.add_argument("--no-probe", action="store_true",
                        help="skip the probes (start-up, one GPU's ceiling outside Ray)")
    parser.add_argument("--package", default=None,
                        help="the package file: used if it exists (made for this model and "
                             "batch), else compiled and written there (default: a temporary)")
    parser.add_argument("--object-store-gb", type=float, default=None,
                        help="Ray's object store (default: 3x the distinct rows, at least "
                             "16 GiB with --gpu: Ray Data keeps fewer batches in flight when "
                             "it is small)")
    args = parser.parse_args(argv)

    import ray
    work = Path(tempfile.mkdtemp(prefix="ray-scaling-"))
    model = model_path(args.model, work)
    configs = [str(c) for c in MODELS[args.model][1]]
    # an open dimension: the encoder's sequence, else 4 (the reorg model's batch-like sizes)
    items, declared = model_items(model, configs, BERT_SEQ if args.model == "bert" else 4)
    batch = args.batch or (32 if args.model == "resnet50" else (declared or 8))
    shapes = {n: (batch,) + item for n, item in items.items()} \
        if (declared is None or batch != declared) else None
    ray_batch = batch * args.per_call
    rows_wanted = args.rows or (8192 if args.gpu else 512)
    copies = max(1, rows_wanted // (ray_batch * args.distinct))
    rows = ray_batch * args.distinct * copies
    gpus = gpu_count() if args.gpu else 0
    if args.gpu and gpus < 1:
        print("--gpu: OpenCL lists no GPU", file=sys.stderr)
        return 2
    rng = np.random.default_rng(0)
    blocks = [make_block(rng, ray_batch, items) for _ in range(args.distinct)]
    nbytes = sum(a.nbytes for b in blocks for a in b.values())
    device = "GPU" if args.gpu else "CPU"
    store = int(args.object_store_gb * 2**30) if args.object_store_gb else \
        max(16 << 30 if args.gpu else 400 << 20, 3 * nbytes)
    ray.init(num_cpus=args.cpus, num_gpus=gpus, include_dashboard=False,
             object_store_memory=store, log_to_driver=False,
             logging_level=logging.WARNING)
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    ray.data.DataContext.get_current().enable_progress_bars = False
    one_gpu = {"num_gpus": 1, "num_cpus": 1, "max_calls": 1} if args.gpu else {"num_cpus": 1}
    try:
        caches = {k: str(work / f"cuda-cache-{k}") for k in ("compile", "actors")}
        package = args.package or str(work / f"{args.model}.clpkg")
        if Path(package).exists():
            size = Path(package).stat().st_size / 2**20
            print(f"model {args.model}: the package {package} ({size:.0f} MiB)")
        else:
            made = ray.get(ray.remote(**one_gpu)(compile_package).remote(
                str(model), configs, device, shapes, args.tuning, package, caches["compile"]))
            print(f"model {args.model} ({model.name}) compiled for "
                  f"{ {n: [batch, *i] for n, i in items.items()} } in "
                  f"{made['seconds']:.1f} s: {made['programs']} programs, "
                  f"{made['bytes'] / 2**20:.0f} MiB package")
        print(f"{rows} rows per pass ({nbytes * copies / 2**30:.1f} GiB of "
              f"input; {args.distinct} distinct Ray batches of {ray_batch} rows = "
              f"{args.per_call} requests of {batch}), {args.nireq} requests in flight per "
              f"actor, {'GPU' if args.gpu else f'PoCL on {args.cpus} cores'}")
        sample = blocks[0]
        for cache, label in () if args.no_probe else ((caches["actors"], "cold"),
                                                      (caches["actors"], "warm")):
            p = ray.get(ray.remote(**one_gpu)(probe).remote(package, device, sample,
                                                             args.nireq, cache))
            what = f"{label} driver code cache" if args.gpu else "a fresh process"
            print(f"probe ({what}), outside Ray on {p['device']}: "
                  f"actor start-up {p['init_s']:.2f} s; rows/s with the input on the device "
                  f"{p['device_only']}, pageable uploads {p['pageable']:.0f}, pinned "
                  f"{p['pinned']:.0f}")
        base = block_dataset(ray, blocks)
        ds = base.union(*[base] * (copies - 1)) if copies > 1 else base
        if args.gpu:
            counts = [n for n in (1, 2, 4, 8, 16) if n <= gpus]
            cases = [(f"{n} actor(s), 1 GPU each{', pinned' if pinned else ''}", n, pinned,
                      {"num_gpus": 1, "num_cpus": 1})
                     for pinned in {"pageable": (False,), "pinned": (True,),
                                    "both": (False, True)}[args.uploads]
                     for n in counts]
        else:
            half = max(1, args.cpus // 2)
            cases = [(f"1 actor x {half} thread(s)", 1, False, {"num_cpus": half}),
                     (f"2 actors x {half} thread(s)", 2, False, {"num_cpus": half}),
                     (f"1 actor x {args.cpus} thread(s), as reference", 1, False,
                      {"num_cpus": args.cpus})]
        print(f"{'case':42} {'rows/s':>8} {'effic.':>7} {'e2e rows/s':>10} {'start-up s':>10}"
              f"  {'device':>6} {'host':>5} {'ray':>5}  devices")
        single = {}
        paths = {"data": ("data",), "core": ("core",), "both": ("data", "core")}[args.path]
        refs = [ray.put(b) for b in blocks] if "core" in paths else []
        for path in paths:
            for number, (label, actors, pinned, resources) in enumerate(cases):
                cache = str(work / f"cuda-cache-{path}-{number}") if args.fresh_driver_cache \
                    else caches["actors"]
                kwargs = dict(model=package, device=device, nireq=args.nireq, pinned=pinned,
                              cuda_cache=cache if args.gpu else None)
                if path == "data":
                    r = run_pass(ray, ds, actors, kwargs, ray_batch, resources, rows,
                                 args.tasks_per_actor if args.tasks_per_actor != 0 else None)
                else:
                    r = core_pass(ray, refs, actors, kwargs, resources, rows // ray_batch, 2)
                if actors == 1:
                    single.setdefault((path, pinned), r["steady"])
                reference = not args.gpu and resources["num_cpus"] == args.cpus
                eff = "-" if reference else \
                    f"{r['steady'] / (actors * single[path, pinned]):.0%}"
                s = r["shares"]
                print(f"{path + ': ' + label:42} {r['steady']:8.0f} {eff:>7} {r['total']:10.0f} "
                      f"{max(r['init_s']):10.2f}  {s['device']:6.0%} {s['host']:5.0%} "
                      f"{s['ray']:5.0%}  {'; '.join(r['devices'])}")
                if args.fresh_driver_cache and args.gpu:
                    print(f"  {compiled_at_start(package, Path(cache))}")
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
