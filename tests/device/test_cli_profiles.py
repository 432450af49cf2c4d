"""`-pc --trace FILE.json` (a Chrome trace) and `--report FILE.json` (the per-layer table) on
run and benchmark, `-pcsort`'s orders, and `--tuning` through the CLI."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from customlayers.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[2]
DEMO = str(ROOT / "examples" / "models" / "demo_cnn_builtin.xml")
TEST_DEVICE = os.environ.get("CUSTOMLAYERS_TEST_DEVICE", "CPU")


def main(argv):
    return cli_main(argv[:1] + ["-d", TEST_DEVICE] + argv[1:])


def _check_trace(path: Path, runs: int):
    data = json.loads(path.read_text())
    spans = [e for e in data["traceEvents"] if e["ph"] == "X"]
    meta = [e for e in data["traceEvents"] if e["ph"] == "M"]
    assert meta[0]["args"]["name"].startswith("OpenCL device: ")
    assert data["otherData"]["runs"] == runs
    assert spans and min(e["ts"] for e in spans) == 0.0
    for e in spans:
        assert e["dur"] >= 0 and e["name"] and e["args"]["kernel"] and e["args"]["op"]
        assert e["args"]["outputs"] and e["args"]["time_us"] == pytest.approx(e["dur"], abs=1e-3)
    # one run's kernels on one in-order queue never overlap
    first = sorted((e for e in spans if e["tid"] == 0), key=lambda e: e["ts"])
    per_run = len(spans) // runs
    for a, b in zip(first[:per_run], first[1:per_run]):
        assert a["ts"] + a["dur"] <= b["ts"] + 1e-3
    return spans


def test_run_writes_a_chrome_trace_and_a_report(tmp_path, capsys):
    trace, report = tmp_path / "t.json", tmp_path / "r.json"
    assert main(["run", "-m", DEMO, "-pc", "--trace", str(trace), "--report", str(report)]) == 0
    err = capsys.readouterr().err
    assert f"trace of 1 run(s) written to {trace}" in err
    assert f"per-layer report written to {report}" in err
    spans = _check_trace(trace, 1)
    rows = json.loads(report.read_text())
    assert rows["runs"] == 1 and rows["layers"]
    names = {r["name"] for r in rows["layers"]}
    assert {e["name"] for e in spans} == names        # the model's own node names
    assert rows["total_us"] == pytest.approx(sum(r["time_us"] for r in rows["layers"]), rel=1e-3)
    assert not list(tmp_path.glob(".*.tmp"))          # written atomically, no leftovers
    # the permissions open() gives (0666 less the umask), not the temporary file's 0600
    mask = os.umask(0o022)
    os.umask(mask)
    for path in (trace, report):
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask, path


def test_benchmark_traces_every_run_of_every_request(tmp_path, capsys):
    trace, report = tmp_path / "t.json", tmp_path / "r.json"
    assert main(["benchmark", "-m", DEMO, "-niter", "4", "-nireq", "2", "-pc", "--trace",
                 str(trace), "--report", str(report), "--tuning", "off"]) == 0
    spans = _check_trace(trace, 4)
    assert {e["tid"] for e in spans} == {0, 1}
    assert json.loads(report.read_text())["runs"] == 4


@pytest.mark.parametrize("argv, says", [
    (["run", "-m", DEMO, "--trace", "t.json"], "--trace t.json: the times come from profiling "
                                               "events; add -pc"),
    (["run", "-m", DEMO, "-pc", "--report", "r.txt"], "--report r.txt: name the file .json"),
    (["run", "-m", DEMO, "--tuning", "max"], "argument --tuning: invalid choice: 'max'"),
])
def test_profile_and_tuning_usage_errors(capsys, argv, says):
    try:
        code = main(argv)
    except SystemExit as e:                   # argparse's own errors exit
        code = e.code
    assert code == 2
    assert says in capsys.readouterr().err


def _table_rows(out: str) -> list[tuple[str, float]]:
    """(layer, time in us) of each row of the -pc table in `out`."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("layer ")) + 2
    rows = []
    for line in lines[start:]:
        if line.startswith("total device time"):
            return rows
        parts = line.split()
        rows.append((parts[0], float(parts[-2])))
    raise AssertionError(f"no end of the table in:\n{out}")


@pytest.mark.parametrize("command", [["run"], ["benchmark", "-niter", "2"]])
def test_pcsort_no_sort_lists_the_layers_in_execution_order(tmp_path, capsys, command):
    # was: listed in --help, then refused ("execution order is not available")
    trace = tmp_path / "t.json"
    assert main(command + ["-m", DEMO, "-pcsort", "no_sort", "--trace", str(trace)]) == 0
    rows = _table_rows(capsys.readouterr().out)
    spans = [e for e in json.loads(trace.read_text())["traceEvents"]
             if e["ph"] == "X" and e["tid"] == 0]
    executed = list(dict.fromkeys(e["name"] for e in sorted(spans, key=lambda e: e["ts"])))
    assert [name for name, _ in rows] == executed
    assert main(command + ["-m", DEMO, "-pcsort", "sort"]) == 0
    times = [t for _, t in _table_rows(capsys.readouterr().out)]
    assert times == sorted(times, reverse=True) and len(times) == len(rows)


def test_names_with_control_characters_are_escaped_in_the_table(tmp_path, capsys):
    """A node name with an escape sequence reached the terminal raw in the -pc table, and a
    newline in one split its row in two."""
    from onnx import TensorProto, helper, save
    nodes = [helper.make_node("Relu", ["x"], ["t"], name="evil\x1b[2J\x1b]0;owned\x07name"),
             helper.make_node("Sigmoid", ["t"], ["y"], name="two\nlines\r")]
    graph = helper.make_graph(nodes, "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    model = tmp_path / "evil.onnx"
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), model)
    for command in (["run", "-m", str(model), "-pc"],
                    ["benchmark", "-m", str(model), "-pc", "-niter", "2"]):
        assert main(command) == 0
        out, err = capsys.readouterr()
        assert not any(c in out + err for c in "\x1b\x07\r"), repr(out + err)
        rows = [line.split()[:2] for line in out.splitlines()
                if line.startswith(("evil", "two"))]
        assert sorted(rows) == [["evil\\x1b[2J\\x1b]0;owned\\x07name", "ReLU"],
                                ["two\\nlines\\r", "Sigmoid"]]  # whatever order of time
