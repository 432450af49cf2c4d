"""ONNX conformance: the real models the onnx wheel ships, with their inputs and expected outputs.

    python bench/onnx_conformance.py [--folders light,simple] [--only NAME] [-v]

onnx/backend/test/data/ holds four folders of whole-model cases:
  light/              light_<name>.onnx + light_<name>_output_0.pb; no input file: the onnx
                      backend runner feeds arange(n) / n in the input's shape (unknown dims = 1)
  simple/, pytorch-converted/, pytorch-operator/
                      <case>/model.onnx + test_data_set_N/{input_K.pb, output_K.pb}
Each case is read from ONNX, compiled with the built-in ops and run on the OpenCL device, and its
outputs are compared with the expected ones at the onnx backend test's tolerances (rtol 1e-3,
atol 1e-7, or the case's data.json). A case is `pass`, `fail` (max abs error or the exception
message) or `skip` (an op we do not implement, named; or input types we do not take).

Prints for each folder how many cases passed, failed and were skipped, then the failures and the
unsupported ops with counts. tests/conformance/test_onnx_backend.py uses the same classifier.
"""
from __future__ import annotations

import argparse
import collections
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from customlayers.errors import CustomLayersError, ModelError, UnsupportedLayersError  # noqa: E402

FOLDERS = ("light", "simple", "pytorch-converted", "pytorch-operator")
RTOL, ATOL = 1e-3, 1e-7                       # the onnx backend test's defaults
# element types a case's inputs may have (TensorProto codes): FLOAT, INT32, INT64, DOUBLE
INPUT_TYPES = {1: "float32", 6: "int32", 7: "int64", 11: "float64"}
# the reader's refusal of a standard op it has no translation for (a plain ModelError)
_NO_TRANSLATION = re.compile(r"the ONNX op (\S+) has no translation")


def data_root() -> Path:
    import onnx
    return Path(onnx.__file__).parent / "backend" / "test" / "data"


@dataclass
class Case:
    folder: str
    name: str
    model: Path
    rtol: float = RTOL
    atol: float = ATOL
    data_dirs: list[Path] = field(default_factory=list)   # test_data_set_N (not for light)

    @property
    def id(self) -> str:
        return f"{self.folder}/{self.name}"


@dataclass
class Outcome:
    status: str                 # "pass" | "fail" | "skip"
    detail: str = ""            # max error, exception text or skip reason
    ops: tuple[str, ...] = ()   # unsupported op types (skips for an op)


def list_cases(folder: str) -> list[Case]:
    base = data_root() / folder
    if folder == "light":
        return [Case(folder, p.stem[len("light_"):], p) for p in sorted(base.glob("light_*.onnx"))]
    cases = []
    for d in sorted(p for p in base.iterdir() if (p / "model.onnx").exists()):
        case = Case(folder, d.name, d / "model.onnx",
                    data_dirs=sorted(d.glob("test_data_set_*")))
        meta = d / "data.json"
        if meta.exists():
            data = json.loads(meta.read_text())
            case.rtol, case.atol = data.get("rtol", RTOL), data.get("atol", ATOL)
        cases.append(case)
    return cases


def find_case(case_id: str) -> Case:
    folder, _, name = case_id.partition("/")
    for case in list_cases(folder):
        if case.name == name:
            return case
    raise KeyError(f"no conformance case {case_id}")


def _read_tensor(path: Path) -> np.ndarray:
    import onnx
    from onnx import numpy_helper
    proto = onnx.TensorProto()
    proto.ParseFromString(path.read_bytes())
    return numpy_helper.to_array(proto)


def real_inputs(model) -> list:
    """The graph inputs that are not initializers (what a caller feeds), in order."""
    inits = {t.name for t in model.graph.initializer}
    return [vi for vi in model.graph.input if vi.name not in inits]


def light_input(vi) -> np.ndarray:
    """What the onnx backend runner feeds a light model: arange(n) / n, unknown dims as 1."""
    shape = tuple(d.dim_value if d.HasField("dim_value") else 1
                  for d in vi.type.tensor_type.shape.dim)
    n = int(np.prod(shape))
    return (np.arange(n).reshape(shape) / n).astype(np.float32)


def data_sets(case: Case, model) -> list[tuple[dict, list[np.ndarray]]]:
    """[(inputs by name, expected outputs in graph order)] for each data set of the case."""
    names = [vi.name for vi in real_inputs(model)]
    if case.folder == "light":
        feeds = {vi.name: light_input(vi) for vi in real_inputs(model)}
        prefix = case.model.with_suffix("")
        outs = [_read_tensor(Path(f"{prefix}_output_{i}.pb"))
                for i in range(len(model.graph.output))]
        return [(feeds, outs)]
    result = []
    for d in case.data_dirs:
        ins = sorted(d.glob("input_*.pb"), key=lambda p: int(p.stem.split("_")[1]))
        outs = sorted(d.glob("output_*.pb"), key=lambda p: int(p.stem.split("_")[1]))
        result.append(({n: _read_tensor(p) for n, p in zip(names, ins)},
                       [_read_tensor(p) for p in outs]))
    return result


def unsupported_ops(model) -> list[str]:
    """Standard ONNX op types of the model the reader has no translation for (sorted)."""
    from customlayers.graph.onnx.table import TRANSLATIONS
    known = set(TRANSLATIONS)
    return sorted({n.op_type for n in model.graph.node
                   if n.domain in ("", "ai.onnx") and n.op_type not in known})


def ops_of_error(error: Exception) -> list[str]:
    """The op types an unsupported-op error names: the Network's UnsupportedLayersError lists
    its layers; the reader's refusal of an untranslated op says it in text."""
    if isinstance(error, UnsupportedLayersError):
        return sorted({layer_type for _, layer_type, _ in error.layers})
    return sorted(set(_NO_TRANSLATION.findall(str(error))))


# the most spatial axes each built-in convolution/pooling takes
SPATIAL_OPS = {"Conv": 3, "ConvTranspose": 2, "MaxPool": 3, "AveragePool": 3, "LpPool": 3}


def input_problem(model) -> str:
    """Why the case cannot run here though its ops are translated (input types we do not feed,
    a convolution with more spatial axes than its built-in takes), or ''."""
    inits = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type not in SPATIAL_OPS:
            continue
        kernel = next((list(a.ints) for a in node.attribute if a.name == "kernel_shape"), None)
        weights = inits.get(node.input[1]) if len(node.input) > 1 else None
        k = len(kernel) if kernel else (len(weights.dims) - 2 if weights is not None else 0)
        if k > SPATIAL_OPS[node.op_type]:
            return (f"{k}-D {node.op_type}: the built-in takes at most "
                    f"{SPATIAL_OPS[node.op_type]} spatial axes")
    for vi in real_inputs(model):
        t = vi.type.tensor_type
        if not vi.type.HasField("tensor_type"):
            return f"input '{vi.name}' is not a tensor ({vi.type.WhichOneof('value')})"
        if t.elem_type not in INPUT_TYPES:
            import onnx
            kind = onnx.TensorProto.DataType.Name(t.elem_type)
            return (f"input '{vi.name}' has element type {kind}; fed types: "
                    f"{', '.join(INPUT_TYPES.values())}")
    return ""


def compare(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> str:
    """'' when `got` matches `want` (numpy.isclose semantics), else what differs."""
    got = np.asarray(got)
    if got.shape != want.shape:
        return f"shape {list(got.shape)}, expected {list(want.shape)}"
    if want.dtype.kind in "iub":
        bad = int(np.count_nonzero(got.astype(want.dtype) != want))
        return f"{bad} of {want.size} values differ" if bad else ""
    g, w = got.astype(np.float64), want.astype(np.float64)
    close = np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    if close.all():
        return ""
    err = np.abs(g - w)
    return (f"{int((~close).sum())} of {want.size} values off, max abs error "
            f"{float(np.nanmax(err)):.3g} (rtol {rtol:g}, atol {atol:g})")


def output_problem(got: dict, out_names, expected, k: int, rtol: float, atol: float) -> str:
    """'' when data set `k`'s outputs `got` (by name) match `expected` (in graph order; an entry
    None is not checked), else the first difference."""
    for name, want in zip(out_names, expected):
        if want is None:
            continue
        if name not in got:
            return f"data set {k}: no output '{name}' (got {sorted(got)})"
        diff = compare(got[name], want, rtol, atol)
        if diff:
            return f"data set {k}, output '{name}': {diff}"
    return ""


def run_case(case: Case, engine=None) -> Outcome:
    """Classify one case: read, compile, run every data set, compare."""
    import onnx
    from customlayers.graph.onnx.reader import read_onnx
    from customlayers.runtime.compile.network import Network

    model = onnx.load(str(case.model))
    missing = unsupported_ops(model)
    if missing:
        return Outcome("skip", "unsupported op: " + ", ".join(missing), tuple(missing))
    problem = input_problem(model)
    if problem:
        return Outcome("skip", problem)
    try:
        net = Network(read_onnx(case.model), engine=engine)
    except ModelError as e:
        ops = ops_of_error(e)
        if ops:
            return Outcome("skip", "unsupported op: " + ", ".join(ops), tuple(ops))
        return Outcome("fail", f"{type(e).__name__}: {e}")
    except CustomLayersError as e:
        return Outcome("fail", f"{type(e).__name__}: {e}")
    out_names = [o.name for o in model.graph.output]
    for k, (feeds, expected) in enumerate(data_sets(case, model)):
        try:
            got = net.infer(feeds)
        except CustomLayersError as e:
            return Outcome("fail", f"data set {k}: {type(e).__name__}: {e}")
        problem = output_problem(got, out_names, expected, k, case.rtol, case.atol)
        if problem:
            return Outcome("fail", problem)
    return Outcome("pass")


def classify(case: Case, engine=None) -> Outcome:
    """run_case, with an unexpected exception (a bug of ours) reported as a failure."""
    try:
        return run_case(case, engine)
    except Exception as e:                    # noqa: BLE001 - a bug is a failure, not a crash
        return Outcome("fail", f"unexpected {type(e).__name__}: {e}")


def report(results: dict[str, list[tuple[Case, Outcome]]], verbose: bool) -> str:
    lines = []
    for folder, pairs in results.items():
        counts = collections.Counter(o.status for _, o in pairs)
        lines.append(f"{folder}: {counts['pass']} passed, {counts['fail']} failed, "
                     f"{counts['skip']} skipped (of {len(pairs)})")
        for case, o in pairs:
            if o.status == "fail":
                lines.append(f"  FAIL {case.name}: {o.detail.splitlines()[0][:300]}")
            elif verbose and o.status == "pass":
                lines.append(f"  pass {case.name}")
        ops = collections.Counter(op for _, o in pairs if o.status == "skip" for op in o.ops)
        if ops:
            lines.append("  skipped for unsupported op: " + ", ".join(
                f"{op} ({n})" for op, n in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))))
        other = [(c, o) for c, o in pairs if o.status == "skip" and not o.ops]
        for case, o in other:
            lines.append(f"  skip {case.name}: {o.detail}")
        if verbose:
            for case, o in pairs:
                if o.status == "skip" and o.ops:
                    lines.append(f"  skip {case.name}: {o.detail}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folders", default=",".join(FOLDERS),
                        help="comma-separated folders of onnx/backend/test/data")
    parser.add_argument("--only", default="", help="run only cases whose name contains this")
    parser.add_argument("-v", "--verbose", action="store_true", help="list every case")
    args = parser.parse_args(argv)
    from customlayers.runtime.device.device import Engine
    engine = Engine()
    results: dict[str, list] = {}
    for folder in args.folders.split(","):
        pairs = []
        for case in list_cases(folder):
            if args.only and args.only not in case.name:
                continue
            outcome = classify(case, engine)
            pairs.append((case, outcome))
            print(f"{outcome.status:4} {case.id}", file=sys.stderr, flush=True)
        results[folder] = pairs
    print(report(results, args.verbose))
    return 0


if __name__ == "__main__":
    sys.exit(main())
