"""Concat in place against the copy path, on the light models that concatenate: the same model
compiled twice (Network(concat_in_place=True/False), tuning off so both run the same kernels),
timed in one run, interleaved round by round, so that a noisy shared machine slows both alike.
Also: how many Concats went in place, the launches per inference, the planned device memory,
and the device time the copy path spends in its Concat kernels (from profiling events).

    python bench/concat_in_place.py [--device GPU] [--models inception_v1,densenet121] [--runs 20]
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from customlayers.runtime import profile  # noqa: E402
from customlayers.runtime.device.device import Engine  # noqa: E402
from customlayers.runtime.compile.network import Network  # noqa: E402
from models import light_ir  # noqa: E402  (tests/models.py)

# bench/models.py's timing, under another name than tests/models.py
_spec = importlib.util.spec_from_file_location("bench_models", ROOT / "bench" / "models.py")
bench_models = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_models)

CONCAT_MODELS = ("inception_v1", "inception_v2", "densenet121", "squeezenet", "shufflenet")


def concat_device_ms(path, engine, feed, runs: int = 5) -> tuple[float, float]:
    """(ms in Concat kernels, ms in all kernels) per inference of the copy path."""
    net = Network(path, None, engine, tuning="off", concat_in_place=False, profiling=True)
    req = net.create_request()
    rows = []
    for _ in range(runs):
        req.infer(feed)
        rows.append(profile.collect(req))
    merged = profile.merge(rows)
    return (sum(r.ns for r in merged if r.type == "Concat") / runs / 1e6,
            sum(r.ns for r in merged) / runs / 1e6)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--device", default=None)
    ap.add_argument("--models", default=",".join(CONCAT_MODELS))
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    engine = Engine(args.device)
    print(f"device: {engine.device.name.strip()}; sub-buffer alignment "
          f"{int(engine.device.mem_base_addr_align) // 8} bytes; median of {args.runs} "
          f"interleaved rounds")
    head = (f"{'model':<13} {'in place':>9} {'launches':>10} {'in-place ms':>12} {'copy ms':>8} "
            f"{'saved':>7} {'concat kernels ms':>18} {'planned MiB':>12}")
    print(head)
    print("-" * len(head))
    for name in args.models.split(","):
        path = light_ir(name)
        fast, copy = (Network(path, None, engine, tuning="off", concat_in_place=flag)
                      for flag in (True, False))
        shapes = {p.name: p.outputs[0].shape for p in fast.graph.parameters}
        feed = {n: np.random.default_rng(0).standard_normal(s).astype(np.float32)
                for n, s in shapes.items()}
        reqs = [fast.create_request(), copy.create_request()]
        t_fast, t_copy = bench_models.interleaved_medians(
            [lambda r=r: r.infer(feed) for r in reqs], args.runs)
        placed = sum(why is None for why in fast.plan.in_place.values())
        launches = [sum(len(s.launches) for s in n.plan.steps) for n in (fast, copy)]
        cat_ms, all_ms = concat_device_ms(path, engine, feed)
        mib = [n.plan.memory.planned_bytes / 2**20 for n in (fast, copy)]
        print(f"{name:<13} {f'{placed}/{len(fast.plan.in_place)}':>9} "
              f"{f'{launches[0]}/{launches[1]}':>10} {t_fast * 1e3:>12.2f} {t_copy * 1e3:>8.2f} "
              f"{(t_copy - t_fast) / t_copy:>7.1%} {f'{cat_ms:.2f} of {all_ms:.1f}':>18} "
              f"{f'{mib[0]:.1f}/{mib[1]:.1f}':>12}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
