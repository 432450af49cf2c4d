"""Fuzz campaign for the model readers: mutated IR and ONNX models, each read in a crash-isolating
worker process.

    python scripts/fuzz_models.py --count 10000 [--workers 2] [--seed S] [--compile | --infer]
                                  [--timeout 20] [--save DIR] [--kinds ir,onnx]

Case k of a run is model kind ("ir" / "onnx") k % 2 with mutation seed S + k // 2, made by the
mutators the property tests use (tests/model_mutators.py); one seed reproduces one case:
`python scripts/fuzz_models.py --replay onnx:1234`.

Each worker reads one model at a time through the public reader (customlayers.graph.load
.read_model). A worker killed by a signal is a crash, one past --timeout a hang: both are
counted, the worker replaced, and the input saved under --save for reproduction, as are the
first inputs of every other failure. Counted apart:
  read OK, project errors by class (CustomLayersError subclasses: the model was refused with a
  message), unchecked (a ModelError made by graph/guard.py from an exception no explicit check
  foresaw: a missing check), other exceptions (outside the project's types), crashes, hangs.
With --compile, each model that reads OK is also compiled into a Network on the default OpenCL
device (PoCL here); compiler exceptions outside CustomLayersError are counted as failures too.
With --infer, each model that compiles also runs one inference on random inputs, whose outputs
must come back in the shapes the plan gives them.
Exit status 1 when any unchecked error, other exception, crash or hang was seen.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import sys
import tempfile
import time
import traceback
from collections import Counter
from multiprocessing.connection import wait
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))          # the shared mutators live with the tests

import model_mutators as mm  # noqa: E402

KINDS = ("ir", "onnx")
MEMORY_LIMIT = 4 * 2**30    # address space of a worker reading only: runaway allocations fail


def make_case(kind: str, seed) -> dict[str, bytes]:
    """File name -> contents of one mutated model (or, kind "arity", of an arity probe)."""
    if kind == "arity":
        op, count, rank = (str(seed).split("/") + ["4"])[:3]
        return {"model.xml": arity_ir(op, int(count), int(rank)), "model.bin": b""}
    if kind == "ir":
        xml, weights = mm.mutated_ir(seed)
        return {"model.xml": xml, "model.bin": weights}
    return {"model.onnx": mm.mutated_onnx(seed)}


def arity_ir(op_type: str, inputs: int, rank: int = 4) -> bytes:
    """An IR whose one `op_type` layer has `inputs` inputs, all fed by one f32 Parameter of
    `rank` dims ([1,2,4,4] at rank 4), and one output of that shape: the IR reader accepts it
    (it knows no op's arity), so it probes the compiler's checks of each built-in op's input
    count and rank (SpaceToDepth of rank 3 once unpacked four dims: ValueError)."""
    shape = (1, 2, 4, 4, 3, 2)[:rank]
    text = ",".join(map(str, shape))
    dims = "".join(f"<dim>{d}</dim>" for d in shape)
    ports = "".join(f'<port id="{k}" precision="FP32">{dims}</port>' for k in range(inputs))
    edges = "".join(f'<edge from-layer="0" from-port="0" to-layer="1" to-port="{k}"/>'
                    for k in range(inputs))
    return (f'<net name="arity" version="11"><layers>'
            f'<layer id="0" name="x" type="Parameter" version="opset1"><data shape="{text}" '
            f'element_type="f32"/><output><port id="0" precision="FP32">{dims}</port></output>'
            f'</layer><layer id="1" name="probe" type="{op_type}" version="opset1">'
            + (f"<input>{ports}</input>" if inputs else "")
            + f'<output><port id="{inputs}" precision="FP32">{dims}</port></output></layer>'
            f'<layer id="2" name="y" type="Result" version="opset1"><input><port id="0" '
            f'precision="FP32">{dims}</port></input></layer></layers><edges>{edges}'
            f'<edge from-layer="1" from-port="{inputs}" to-layer="2" to-port="0"/></edges>'
            f'</net>').encode()


def arity_cases(max_inputs: int = 4, ranks=(1, 3, 4, 5)):
    """("arity", "Op/n/rank") for every built-in op, input count 0..max_inputs and rank."""
    from customlayers.ops import OPS
    return [("arity", f"{op}/{n}/{r}") for op in sorted(OPS) for n in range(max_inputs + 1)
            for r in ranks]


# -- worker ------------------------------------------------------------------------------------
INFER = 2                  # compile_models level: compile, then run one inference


def _infer_once(net) -> None:
    """One inference on inputs drawn for the plan's input shapes and types; the outputs must
    come back as arrays of the shapes the plan gives them."""
    import numpy as np
    rng = np.random.default_rng(0)
    plan = net.plan
    feed = {}
    for name, key in plan.inputs:
        desc = plan.descs[key]
        values = rng.standard_normal(desc.shape) * 2
        feed[name] = (values if desc.np_dtype.kind == "f" else np.abs(values)).astype(
            desc.np_dtype)
    outputs = net.infer(feed)
    for name, key in plan.outputs:
        got = outputs[name]
        if tuple(got.shape) != tuple(plan.descs[key].shape):
            raise AssertionError(f"output '{name}' came back as {got.shape}, the plan says "
                                 f"{plan.descs[key].shape}")


def _worker(conn, compile_models: int) -> None:
    if not compile_models:        # OpenCL drivers reserve much address space: no limit then
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    from customlayers.errors import CustomLayersError
    from customlayers.graph.guard import is_unchecked
    from customlayers.graph.load import read_model
    engine = None
    folder = Path(tempfile.mkdtemp(prefix="fuzz-models-"))
    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        if task is None:
            return
        for old in folder.iterdir():
            old.unlink()
        for name, data in task["files"].items():
            (folder / name).write_bytes(data)
        main = next(n for n in task["files"] if not n.endswith(".bin"))
        stage = "read"
        try:
            graph = read_model(folder / main)
            result = {"status": "ok"}
            if compile_models:
                stage = "compile"
                if engine is None:
                    from customlayers.runtime.device.device import Engine
                    engine = Engine()
                from customlayers.errors import ModelError
                from customlayers.runtime.compile.network import Network
                net = Network(graph, None, engine)       # compiles when the shapes are static
                try:
                    net.plan
                    result["compiled"] = True
                except ModelError:                       # open shapes: compiled per input
                    result["compiled"] = False
                if result["compiled"] and compile_models == INFER:
                    stage = "infer"
                    _infer_once(net)
                    result["inferred"] = True
        except CustomLayersError as e:
            status = "unchecked" if is_unchecked(e) else "project"
            cause = e.__cause__ if status == "unchecked" else None
            result = {"status": status, "stage": stage, "class": type(e).__name__,
                      "message": str(e).replace(str(folder), "<dir>")[:500],
                      "traceback": "".join(traceback.format_exception(cause)) if cause else ""}
        except Exception as e:             # noqa: BLE001 - what the campaign looks for
            result = {"status": "other", "stage": stage, "class": type(e).__name__,
                      "message": str(e)[:500], "traceback": traceback.format_exc()}
        conn.send(result)


class _Worker:
    def __init__(self, compile_models: int):
        self.conn, child = mp.Pipe()
        self.proc = mp.Process(target=_worker, args=(child, compile_models), daemon=True)
        self.proc.start()
        child.close()
        self.case = None           # (kind, seed, files) in flight
        self.started = 0.0

    def send(self, case) -> None:
        self.case, self.started = case, time.monotonic()
        self.conn.send({"files": case[2]})

    def stop(self, kill: bool = False) -> None:
        if kill:
            self.proc.kill()
        else:
            try:
                self.conn.send(None)
            except (BrokenPipeError, OSError):
                pass
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()


# -- campaign ----------------------------------------------------------------------------------
class Tally:
    SHOWN = 5                       # tracebacks / messages shown per failing class

    def __init__(self, save: Path):
        self.counts: Counter = Counter()
        self.project: Counter = Counter()
        self.compile: Counter = Counter()
        self.samples: dict[tuple, list] = {}
        self.save = save

    def keep(self, key: tuple, kind: str, seed: int, files, text: str) -> None:
        """Remember the first few cases of a failure class and save their inputs."""
        shown = self.samples.setdefault(key, [])
        if len(shown) >= self.SHOWN:
            return
        folder = self.save / f"{key[0]}-{kind}-{seed}".replace("/", "_")
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (folder / name).write_bytes(data)
        shown.append((kind, seed, folder, text))

    def add(self, kind: str, seed: int, files, result: dict) -> None:
        self.counts["inputs"] += 1
        status = result["status"]
        if status == "ok":
            self.counts["read OK"] += 1
            if "compiled" in result:
                self.counts["compiled" if result["compiled"] else "compile skipped (open "
                            "shapes)"] += 1
            self.counts["inferred"] += bool(result.get("inferred"))
            return
        if status == "project":
            if result["stage"] == "read":
                self.counts["project errors"] += 1
                self.project[result["class"]] += 1
            else:
                self.counts["read OK"] += 1
                stage = "" if result["stage"] == "compile" else f"({result['stage']}) "
                self.compile[stage + result["class"]] += 1
            return
        if result["stage"] in ("compile", "infer"):
            self.counts["read OK"] += 1
        label = f"{status} ({result['stage']})" if status in ("unchecked", "other") else status
        self.counts[label] += 1
        text = result.get("traceback") or result.get("message", "")
        if status in ("unchecked", "other"):
            text = f"{result['class']}: {result['message']}\n{result.get('traceback', '')}"
        key = (status, result["stage"], result.get("class", ""),
               (result.get("message") or "")[:60])
        self.keep(key, kind, seed, files, text)

    def report(self, elapsed: float) -> str:
        c = self.counts
        lines = [f"inputs: {c['inputs']} in {elapsed:.0f} s",
                 f"read OK: {c['read OK']}",
                 f"project errors (model refused with a message): {c['project errors']}"]
        lines += [f"    {name}: {n}" for name, n in self.project.most_common()]
        if self.compile or c["compiled"] or c["compile skipped (open shapes)"]:
            lines.append(f"compiled into a Network: {c['compiled']}; not compiled, open shapes: "
                         f"{c['compile skipped (open shapes)']}; compile refused with a project "
                         f"error: {sum(self.compile.values())}")
            lines += [f"    {name}: {n}" for name, n in self.compile.most_common()]
        if c["inferred"]:
            lines.append(f"compiled and ran one inference: {c['inferred']}")
        for label in ("unchecked (read)", "other (read)", "unchecked (compile)", "other (compile)",
                      "unchecked (infer)", "other (infer)", "crash", "hang"):
            lines.append(f"{label}: {c[label]}")
        for key, shown in self.samples.items():
            lines.append(f"\n== {key[0]} at {key[1]}: {key[2]} {key[3]!r}")
            for kind, seed, folder, text in shown:
                lines.append(f"-- {kind}:{seed} (input saved in {folder})")
                lines.append(text.rstrip()[-2500:])
        return "\n".join(lines)

    @property
    def failures(self) -> int:
        return sum(n for k, n in self.counts.items()
                   if k.startswith(("unchecked", "other")) or k in ("crash", "hang"))


def campaign(count: int, workers: int, seed: int, timeout: float, compile_models: bool,
             save: Path, kinds=KINDS, progress: bool = True, cases=None) -> Tally:
    """Run `count` cases (or the given (kind, seed) cases) through the workers."""
    tally = Tally(save)
    if cases is None:
        cases = [(kinds[k % len(kinds)], seed + k // len(kinds)) for k in range(count)]
    count = len(cases)
    cases = iter(cases)
    pool = [_Worker(compile_models) for _ in range(workers)]
    done, start, last = 0, time.monotonic(), time.monotonic()
    try:
        pending = True
        while True:
            for w in pool:
                if w.case is None and pending:
                    try:
                        kind, s = next(cases)
                    except StopIteration:
                        pending = False
                        break
                    w.send((kind, s, make_case(kind, s)))
            busy = [w for w in pool if w.case is not None]
            if not busy:
                break
            deadline = min(w.started for w in busy) + timeout
            ready = wait([w.conn for w in busy] + [w.proc.sentinel for w in busy],
                         max(0.0, deadline - time.monotonic()))
            for i, w in enumerate(pool):
                if w.case is None:
                    continue
                kind, s, files = w.case
                if w.conn in ready or w.conn.poll():
                    try:
                        result = w.conn.recv()
                    except EOFError:
                        result = None
                    if result is not None:
                        tally.add(kind, s, files, result)
                        w.case = None
                        done += 1
                        continue
                    w.proc.join(5)                   # the pipe closed: the worker is dying
                if not w.proc.is_alive() or w.proc.sentinel in ready:
                    w.proc.join()
                    code = w.proc.exitcode
                    tally.add(kind, s, files, {"status": "crash", "stage": "",
                                               "message": f"worker exit code {code}"})
                elif time.monotonic() - w.started > timeout:
                    w.stop(kill=True)
                    tally.add(kind, s, files, {"status": "hang", "stage": "",
                                               "message": f"no answer in {timeout} s"})
                else:
                    continue
                done += 1
                pool[i] = _Worker(compile_models)
            if progress and time.monotonic() - last > 10:
                last = time.monotonic()
                print(f"  {done}/{count} ({done / (last - start):.0f}/s), failures "
                      f"{tally.failures}", file=sys.stderr, flush=True)
    finally:
        for w in pool:
            w.stop(kill=w.case is not None)
    return tally


def replay(spec: str, compile_models: bool) -> int:
    """Read one case in this process, with its traceback: `--replay onnx:1234`."""
    kind, _, seed = spec.partition(":")
    files = make_case(kind, seed if kind == "arity" else int(seed))
    folder = Path(tempfile.mkdtemp(prefix="fuzz-replay-"))
    for name, data in files.items():
        (folder / name).write_bytes(data)
    from customlayers.graph.load import read_model
    main = next(n for n in files if not n.endswith(".bin"))
    print(f"case written to {folder / main}")
    graph = read_model(folder / main)
    print(f"read OK: {len(graph)} nodes")
    if compile_models:
        from customlayers.runtime.compile.network import Network
        Network(graph)
        print("compiled OK")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--count", type=int, default=1000, help="models to read (default 1000)")
    p.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--seed", type=int, default=0, help="first mutation seed (default 0)")
    p.add_argument("--timeout", type=float, default=20.0,
                   help="seconds per model before it counts as a hang (default 20)")
    p.add_argument("--compile", action="store_true",
                   help="also compile each model that reads OK into a Network on PoCL")
    p.add_argument("--infer", action="store_true",
                   help="also run one inference of each model that compiles (implies --compile)")
    p.add_argument("--kinds", default="ir,onnx", help="model kinds, comma-separated")
    p.add_argument("--save", type=Path, default=Path("fuzz-findings"),
                   help="folder for the inputs of crashes, hangs and failures")
    p.add_argument("--replay", metavar="KIND:SEED", help="read one case here, with a traceback")
    p.add_argument("--arity", action="store_true",
                   help="instead: compile every built-in op in an IR with 0 to 4 inputs of rank "
                        "1, 3, 4 or 5, to list the input counts and ranks the compiler does not "
                        "check (implies --compile)")
    args = p.parse_args(argv)
    if args.replay:
        return replay(args.replay, args.compile)
    kinds = tuple(k for k in args.kinds.split(",") if k)
    if not set(kinds) <= set(KINDS) or not kinds:
        p.error(f"--kinds: expected some of {', '.join(KINDS)}")
    mm.onnx_seeds()                                   # fail here if a seed model is invalid
    start = time.monotonic()
    cases = arity_cases() if args.arity else None
    tally = campaign(args.count, max(1, args.workers), args.seed, args.timeout,
                     INFER if args.infer else bool(args.compile or args.arity), args.save,
                     kinds, cases=cases)
    print(tally.report(time.monotonic() - start))
    return 1 if tally.failures else 0


if __name__ == "__main__":
    if "fork" in mp.get_all_start_methods():
        mp.set_start_method("fork")   # workers share the parsed mutators; OpenCL starts after
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
