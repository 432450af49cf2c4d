"""The ONNX backend node suite: every single-op case of the installed onnx package, generated in
memory by the package's own case generator (`onnx.backend.test.case.node.collect_testcases`; the
wheel ships no node data), run on the OpenCL device and compared with the case's expected
outputs, by the classifier of bench/onnx_conformance.py.

    python bench/onnx_node_suite.py [--only SUBSTRING] [-v] [--write-passing FILE]

A case is `pass`, `fail` (a wrong number, a missing output, an error that is not a refusal) or
`skip` (a refusal: an op we do not have, an element type or form we do not take, each with its
reason). tests/conformance/test_onnx_node_suite.py runs it against the checked-in list of the
cases expected to pass (tests/conformance/node_suite_passing.txt); `--write-passing` rewrites
that list from this run.
"""
from __future__ import annotations

import argparse
import collections
import importlib.util
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from customlayers.errors import (BindingError, CustomLayersError, DeviceError,  # noqa: E402
                                 ModelError, TensorError)

# errors at inference that refuse an input's form (a zero-size tensor, ...) with a clear message:
# a refusal, not a wrong result. DeviceError: what the device cannot do (half tensors without
# cl_khr_fp16), said when a plan is compiled at the first infer (a model with value inputs) as
# it is at load for the others
_REFUSALS_AT_RUN = (ModelError, TensorError, BindingError, DeviceError)


def _conformance():
    """bench/onnx_conformance.py, loaded by path (bench/ is not a package)."""
    name = "onnx_conformance"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@dataclass
class NodeCase:
    name: str
    model: object              # onnx.ModelProto
    data_sets: list            # [(inputs, expected outputs)] as the generator made them
    rtol: float
    atol: float


@dataclass
class Outcome:
    status: str                # "pass" | "fail" | "skip"
    detail: str = ""
    ops: tuple[str, ...] = ()


def collect() -> list[NodeCase]:
    """Every node case of the installed onnx package, in name order (a few seconds)."""
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # the generators' own overflow warnings
        cases = [c for c in collect_testcases() if c.kind == "node"]
    return sorted((NodeCase(c.name, c.model, list(c.data_sets), c.rtol, c.atol) for c in cases),
                  key=lambda c: c.name)


def _as_array(value, what: str):
    """A generated value as a numpy array, or the reason it cannot be fed."""
    from onnx import TensorProto, numpy_helper
    if value is None:
        return None, ""
    if isinstance(value, TensorProto):
        kind = TensorProto.DataType.Name(value.data_type)
        try:
            array = numpy_helper.to_array(value)
        except Exception:                      # noqa: BLE001 - an encoding numpy lacks
            return None, f"{what} has element type {kind}"
        if array.dtype.kind not in "biuf" or array.dtype.itemsize > 8:
            return None, f"{what} has element type {kind}"
        if kind not in ("FLOAT", "DOUBLE", "FLOAT16", "INT8", "INT16", "INT32", "INT64",
                        "UINT8", "UINT16", "UINT32", "UINT64", "BOOL"):
            return None, f"{what} has element type {kind}"
        return array, ""
    if isinstance(value, (list, tuple)):
        return None, f"{what} is a sequence"
    if isinstance(value, dict):
        return None, f"{what} is a map"
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        return None, f"{what} has numpy type {array.dtype}"
    return array, ""


def _feeds(case: NodeCase, inputs) -> tuple[dict, str]:
    """{input name: array} for one data set, or the reason it cannot be fed."""
    names = [vi.name for vi in _conformance().real_inputs(case.model)]
    feeds = {}
    for name, value in zip(names, inputs):
        array, why = _as_array(value, f"input '{name}'")
        if why:
            return {}, why
        if array is not None:
            feeds[name] = array
    return feeds, ""


def run_case(case: NodeCase, engine, workdir: Path) -> Outcome:
    """Read, compile, run every data set, compare: see the module docstring."""
    import onnx
    from customlayers.graph.onnx.reader import read_onnx
    from customlayers.runtime.compile.network import Network
    conf = _conformance()
    missing = conf.unsupported_ops(case.model)
    if missing:
        return Outcome("skip", "unsupported op: " + ", ".join(missing), tuple(missing))
    prepared = []
    for inputs, expected in case.data_sets:
        feeds, why = _feeds(case, inputs)
        if why:
            return Outcome("skip", why)
        outs = []
        for k, value in enumerate(expected):
            array, why = _as_array(value, f"output {k}")
            if why:
                return Outcome("skip", why)
            outs.append(array)
        prepared.append((feeds, outs))
    path = workdir / f"{case.name}.onnx"
    onnx.save(case.model, str(path))
    try:
        net = Network(read_onnx(path), engine=engine)
    except ModelError as e:
        ops = conf.ops_of_error(e)
        if ops:
            return Outcome("skip", "unsupported op: " + ", ".join(ops), tuple(ops))
        return Outcome("skip", f"refused: {e}")
    except CustomLayersError as e:
        return Outcome("skip", f"refused: {type(e).__name__}: {e}")
    out_names = [o.name for o in case.model.graph.output]
    for k, (feeds, expected) in enumerate(prepared):
        try:
            got = net.infer(feeds)
        except _REFUSALS_AT_RUN as e:
            return Outcome("skip", f"refused at run: {type(e).__name__}: {e}")
        except CustomLayersError as e:
            return Outcome("fail", f"data set {k}: {type(e).__name__}: {e}")
        problem = conf.output_problem(got, out_names, expected, k, case.rtol, case.atol)
        if problem:
            return Outcome("fail", problem)
    return Outcome("pass")


# cases whose expected outputs hold one rounding order among several a type allows, where ours
# lands a rounding step away (tests/conformance/node_suite_known_differences.txt: name, reason)
KNOWN_DIFFERENCES_FILE = ROOT / "tests" / "conformance" / "node_suite_known_differences.txt"


def known_differences() -> dict[str, str]:
    """case name -> why its outputs may differ from the expected ones by rounding."""
    found = {}
    for line in KNOWN_DIFFERENCES_FILE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, why = line.strip().partition(" ")
            found[name] = why.strip()
    return found


def classify(case: NodeCase, engine, workdir: Path) -> Outcome:
    """run_case, with an unexpected exception (a bug of ours) reported as a failure; a wrong
    number in a case of the known-differences file is a refusal with that file's reason (a
    wrong number anywhere else stays a failure)."""
    try:
        outcome = run_case(case, engine, workdir)
    except Exception as e:                    # noqa: BLE001 - a bug is a failure, not a crash
        return Outcome("fail", f"unexpected {type(e).__name__}: {e}")
    why = known_differences().get(case.name)
    if outcome.status == "fail" and why and "values off" in outcome.detail:
        return Outcome("skip", f"known rounding difference: {why} ({outcome.detail})")
    return outcome


def run_all(cases, engine=None, progress=None) -> dict[str, Outcome]:
    from customlayers.runtime.device.device import Engine
    engine = engine or Engine()
    results = {}
    with tempfile.TemporaryDirectory(prefix="node-suite-") as tmp:
        for case in cases:
            results[case.name] = classify(case, engine, Path(tmp))
            if progress:
                progress(case.name, results[case.name])
    return results


def summary(results: dict[str, Outcome], verbose: bool = False) -> str:
    counts = collections.Counter(o.status for o in results.values())
    lines = [f"node suite: {counts['pass']} passed, {counts['fail']} failed, "
             f"{counts['skip']} refused (of {len(results)})"]
    for name, o in results.items():
        if o.status == "fail":
            lines.append(f"  FAIL {name}: {o.detail.splitlines()[0][:300]}")
    ops = collections.Counter(op for o in results.values() if o.status == "skip" for op in o.ops)
    if ops:
        lines.append("  refused for an op we do not have: " + ", ".join(
            f"{op} ({n})" for op, n in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))))
    reasons = collections.Counter(o.detail.split(":")[0] if not o.ops else "unsupported op"
                                  for o in results.values() if o.status == "skip")
    lines.append("  refusals by kind: " + ", ".join(f"{r} ({n})" for r, n in reasons.most_common()))
    if verbose:
        for name, o in results.items():
            if o.status == "skip":
                lines.append(f"  skip {name}: {o.detail.splitlines()[0][:200]}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run only cases whose name contains this")
    parser.add_argument("-v", "--verbose", action="store_true", help="list every refusal")
    parser.add_argument("--write-passing", metavar="FILE",
                        help="write the names of the passing cases to FILE, one per line")
    args = parser.parse_args(argv)
    cases = [c for c in collect() if args.only in c.name]
    results = run_all(cases, progress=lambda n, o: print(f"{o.status:4} {n}", file=sys.stderr,
                                                          flush=True))
    print(summary(results, args.verbose))
    if args.write_passing:
        passing = sorted(n for n, o in results.items() if o.status == "pass")
        Path(args.write_passing).write_text("".join(f"{n}\n" for n in passing))
    return 0


if __name__ == "__main__":
    sys.exit(main())
