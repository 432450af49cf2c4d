"""Fuzz campaign for the descriptor loader and the formula language, with crash isolation.

    python scripts/fuzz_configs.py --configs 100000 --formulas 100000 [--workers 2] [--seed S]
                                   [--timeout 10] [--out fuzz-findings]

Inputs come from tests/fuzz_inputs.py (the generators and checks the hypothesis tests use),
input i of a kind from random.Random(f"{seed}:{kind}:{i}"), so any input is reproduced from its
number. Each worker process handles a chunk of inputs and reports each result as it finishes; a
worker that dies (a crash) or takes longer than --timeout on one input (a hang) is replaced, and
that input is saved under --out for reproduction. Printed: inputs, OK, project errors by class,
other exceptions (the first tracebacks), crashes, hangs, and the time taken. Exit 1 when any
input gave another exception, a crash or a hang.
"""
from __future__ import annotations

import argparse
import collections
import json
import multiprocessing as mp
import os
import random
import sys
import time
import traceback
from multiprocessing.connection import wait
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import fuzz_inputs  # noqa: E402  (after the path is set)

KINDS = {
    "config": (fuzz_inputs.mutated_config, fuzz_inputs.check_config),
    "formula": (fuzz_inputs.random_formula, fuzz_inputs.check_formula),
}
CHUNK = 200


def make_input(seed: str, kind: str, i: int):
    return KINDS[kind][0](random.Random(f"{seed}:{kind}:{i}"))


def _outcome(seed: str, kind: str, i: int) -> tuple[str, str | None]:
    from customlayers.errors import CustomLayersError
    try:
        KINDS[kind][1](make_input(seed, kind, i))
        return "ok", None
    except CustomLayersError as e:
        return "project " + type(e).__name__, None
    except Exception as e:  # what the campaign is looking for
        return "other " + type(e).__name__, traceback.format_exc(limit=-6)


def _worker(conn, seed: str) -> None:
    while True:
        job = conn.recv()
        if job is None:
            return
        kind, numbers = job
        for i in numbers:
            conn.send((i,) + _outcome(seed, kind, i))


class Worker:
    def __init__(self, seed: str):
        self.conn, child = mp.Pipe()
        self.proc = mp.Process(target=_worker, args=(child, seed), daemon=True)
        self.proc.start()
        child.close()
        self.kind: str | None = None
        self.pending: list[int] = []
        self.since = time.monotonic()

    def give(self, kind: str, numbers: list[int]) -> None:
        self.kind, self.pending, self.since = kind, list(numbers), time.monotonic()
        self.conn.send((kind, numbers))

    def stop(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join()
        self.conn.close()


def _save(out: Path, seed: str, kind: str, i: int, why: str) -> Path:
    """The input, as files that reproduce it without this script."""
    out.mkdir(parents=True, exist_ok=True)
    item = make_input(seed, kind, i)
    stem = out / f"{kind}-{seed}-{i}-{why}"
    if kind == "config":
        data = item.data if isinstance(item.data, bytes) else \
            item.data.encode("utf-8", "surrogatepass")
        stem.with_suffix(".xml").write_bytes(data)
        sources = {k: (v.decode("latin-1") if isinstance(v, bytes) else v)
                   for k, v in item.sources.items()}
        stem.with_suffix(".sources.json").write_text(json.dumps(sources, indent=1))
    else:
        stem.with_suffix(".json").write_text(json.dumps(
            {"text": item.text, "functions": item.functions, "env": item.env}, indent=1))
    return stem


def run_campaign(counts: dict[str, int], workers: int, seed: str, timeout: float,
                 out: Path) -> dict:
    todo = collections.deque((kind, list(range(a, min(a + CHUNK, n))))
                             for kind, n in counts.items() for a in range(0, n, CHUNK))
    results = {kind: collections.Counter() for kind in counts}
    tracebacks: list[str] = []
    pool = [Worker(seed) for _ in range(workers)]
    done, total, last_report = 0, sum(counts.values()), time.monotonic()

    def lost(w: Worker, why: str) -> None:
        i = w.pending.pop(0)
        results[w.kind][why] += 1
        path = _save(out, seed, w.kind, i, why)
        print(f"  {why}: {w.kind} input {i} (saved as {path}.*)", flush=True)
        if w.pending:
            todo.appendleft((w.kind, w.pending))
        w.stop()

    while todo or any(w.pending for w in pool):
        for n, w in enumerate(pool):
            if not w.proc.is_alive() and not w.pending:
                pool[n] = w = Worker(seed)
            if not w.pending and todo:
                w.give(*todo.popleft())
        busy = [w for w in pool if w.pending]
        now = time.monotonic()
        wait_s = max(0.0, min(w.since + timeout - now for w in busy))
        ready = wait([w.conn for w in busy], timeout=wait_s)
        for w in busy:
            if w.conn in ready:
                try:
                    message = w.conn.recv()
                except (EOFError, OSError):
                    message = None
                if message is None:  # outside the except: a new worker would fork inside it
                    lost(w, "crash")
                    pool[pool.index(w)] = Worker(seed)
                    done += 1
                    continue
                i, outcome, tb = message
                w.pending.remove(i)
                w.since = time.monotonic()
                results[w.kind][outcome] += 1
                done += 1
                if tb and len(tracebacks) < 5:
                    tracebacks.append(f"{w.kind} input {i}:\n{tb}")
            elif time.monotonic() - w.since > timeout:
                lost(w, "hang")
                pool[pool.index(w)] = Worker(seed)
                done += 1
        if time.monotonic() - last_report > 30:
            last_report = time.monotonic()
            print(f"  ... {done}/{total} inputs", flush=True)
    for w in pool:
        if w.proc.is_alive():
            w.conn.send(None)
        w.stop()
    return {"results": results, "tracebacks": tracebacks}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--configs", type=int, default=1000, help="mutated descriptors to load")
    p.add_argument("--formulas", type=int, default=1000, help="random formulas to evaluate")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", default="0", help="campaign seed (inputs are numbered under it)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds one input may take")
    p.add_argument("--out", default="fuzz-findings", help="where crashing or hanging inputs go")
    args = p.parse_args(argv)
    start = time.monotonic()
    report = run_campaign({"config": args.configs, "formula": args.formulas},
                          max(1, args.workers), args.seed, args.timeout, Path(args.out))
    elapsed = time.monotonic() - start
    bad = 0
    for kind, counter in report["results"].items():
        n = sum(counter.values())
        project = {k[8:]: v for k, v in counter.items() if k.startswith("project ")}
        other = {k[6:]: v for k, v in counter.items() if k.startswith("other ")}
        bad += sum(other.values()) + counter["crash"] + counter["hang"]
        print(f"{kind}s: {n} inputs, {counter['ok']} OK, project errors {project or 0}, "
              f"other exceptions {other or 0}, crashes {counter['crash']}, "
              f"hangs {counter['hang']}")
    for tb in report["tracebacks"]:
        print("----", tb, sep="\n")
    print(f"seed {args.seed}, {args.workers} workers, {elapsed:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
