"""benchmark_app habits in `run` and `benchmark` (issue 8, class 7), through the CLI entry point
on the test device: single-dash options are never misread, OpenVINO's options work with their
meaning or answer with our equivalent (exit 2), device index names, input shapes checked against
the model before compiling, and benchmark's summary and progress line."""
from __future__ import annotations

import io
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from customlayers.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[2]
DEMO = str(ROOT / "examples" / "models" / "demo_cnn_builtin.xml")     # input 'data' 1x3x32x32
DYNAMIC = str(ROOT / "examples" / "models" / "reorg_dynamic.onnx")    # input 'x' [N,4,6,8]
REORG = str(ROOT / "examples" / "layers" / "reorg" / "reorg.xml")
TEST_DEVICE = os.environ.get("CUSTOMLAYERS_TEST_DEVICE", "CPU")


def main(argv: list[str]) -> int:
    if "-d" not in argv:
        argv = argv[:1] + ["-d", TEST_DEVICE] + argv[1:]
    return cli_main(argv)


def usage_fails(argv, capsys) -> str:
    """An argparse refusal: SystemExit(2), the message on stderr, nothing on stdout."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    out, err = capsys.readouterr()
    assert exit_info.value.code == 2, err
    assert out == "" and "Traceback" not in err
    return err


def fails(argv, capsys, code: int) -> str:
    status = main(argv)
    err = capsys.readouterr().err
    assert status == code, err
    assert "Traceback" not in err
    return err


def stats(text: str) -> dict[str, float]:
    """Every figure of benchmark's summary."""
    figures = {}
    for key, pattern in [("first", r"first inference: ([\d.]+) ms"),
                         ("count", r"count:\s+(\d+) inferences in ([\d.]+) m?s"),
                         ("median", r"median ([\d.]+) ms"), ("p90", r"p90 ([\d.]+) ms"),
                         ("min", r"min ([\d.]+) ms"), ("max", r"max ([\d.]+) ms"),
                         ("average", r"average ([\d.]+) ms"), ("p95", r"p95 ([\d.]+) ms"),
                         ("p99", r"p99 ([\d.]+) ms"),
                         ("fps", r"throughput: ([\d.]+) inferences/s \(FPS\)")]:
        m = re.search(pattern, text)
        assert m, f"{key} missing in:\n{text}"
        figures[key] = float(m.group(1))
    m = re.search(r"inferences in ([\d.]+) (m?s)", text)
    figures["seconds"] = float(m.group(1)) * (1e-3 if m.group(2) == "ms" else 1.0)
    return figures


# -- never misparse ----------------------------------------------------------------------------
def test_hint_latency_runs_one_request_instead_of_printing_help(capsys):
    # was: -hint read as -h, the help printed, exit 0
    assert main(["benchmark", "-m", DEMO, "-hint", "latency", "-niter", "3"]) == 0
    out, err = capsys.readouterr()
    assert "usage:" not in out
    assert "1 request(s) in flight" in err
    assert stats(out)["count"] == 3


def test_hint_throughput_and_an_explicit_nireq(capsys):
    assert main(["benchmark", "-m", DEMO, "-hint", "throughput", "-niter", "8"]) == 0
    assert "4 request(s) in flight" in capsys.readouterr().err
    assert main(["benchmark", "-m", DEMO, "-hint", "throughput", "-nireq", "3",
                 "-niter", "8"]) == 0
    assert "3 request(s) in flight" in capsys.readouterr().err      # -nireq wins


def test_data_shape_is_a_shape_not_a_device(capsys):
    # was: read as -d 'ata_shape'; now OpenVINO's syntax for our input shape
    assert main(["run", "-m", DYNAMIC, "-c", REORG, "-data_shape", "x[3,4,6,8]"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"shape \[3, 16, 3, 4\]", out), out
    assert main(["run", "-m", DYNAMIC, "-c", REORG, "-shape", "[2,4,6,8]"]) == 0
    assert re.search(r"shape \[2, 16, 3, 4\]", capsys.readouterr().out)


@pytest.mark.parametrize("word, says", [
    ("-dGPU", "unknown option '-dGPU' (an option and its value are written apart: -d GPU)"),
    ("-nitr", "unknown option '-nitr'; did you mean -niter?"),
    ("-hints", "unknown option '-hints'; did you mean -hint?"),
])
def test_an_unknown_single_dash_word_is_named_never_split(capsys, word, says):
    err = usage_fails(["benchmark", "-m", DEMO, word, "3"], capsys)
    assert says in err


def test_no_abbreviations(capsys):
    err = usage_fails(["run", "-m", DEMO, "--outp", "x.npz"], capsys)
    assert "unrecognized arguments: --outp" in err


@pytest.mark.parametrize("argv, says", [
    (["benchmark", "-report_type", "average_counters"],
     "-report_type: benchmark_app's option has no equivalent here: the summary is printed on "
     "stdout; -pc adds each layer's device time, and -pc --report FILE.json writes"),
    (["benchmark", "-json_stats"], "-json_stats: benchmark_app's option has no equivalent"),
    (["benchmark", "-nstreams", "2"], "use -nireq N"),
    (["run", "-niter", "5"], "-niter: `run` runs the model once; to measure, use "
                             "`customlayers benchmark`"),
    (["run", "-hint", "latency"], "-hint: `run` runs the model once"),
    (["run", "-layout", "[NCHW]"], "a CustomLayer <Tensor format=...>"),
    (["benchmark", "-api", "sync", "-nireq", "2"], "-api sync runs one request at a time"),
    (["benchmark", "-inference_only", "false"], "-inference_only false: inputs are always "
                                                "filled once"),
])
def test_options_we_do_not_have_name_our_equivalent(capsys, argv, says):
    full = argv[:1] + ["-m", DEMO] + argv[1:]
    try:
        status = main(full)
    except SystemExit as e:          # refused by the parser
        status = e.code
    out, err = capsys.readouterr()
    assert status == 2 and says in err, err
    assert "Traceback" not in err and "inferences" not in out


def test_progress_line_only_when_asked_or_on_a_terminal(monkeypatch, capsys):
    assert main(["benchmark", "-m", DEMO, "-niter", "2"]) == 0
    assert "done" not in capsys.readouterr().err      # stderr is no terminal here
    assert main(["benchmark", "-m", DEMO, "-niter", "2", "-progress"]) == 0
    assert re.search(r"\[#{30}\] 100% 2 done", capsys.readouterr().err)

    class Terminal(io.StringIO):
        def isatty(self):
            return True
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    assert main(["benchmark", "-m", DEMO, "-niter", "2", "-progress", "false"]) == 0
    assert "done" not in term.getvalue()


def test_benchmark_summary_has_benchmark_apps_figures(capsys):
    assert main(["benchmark", "-m", DEMO, "-niter", "6", "-nireq", "2",
                 "-latency_percentile", "75"]) == 0
    out = capsys.readouterr().out
    s = stats(out)
    assert s["count"] == 6 and s["first"] > 0
    assert 0 < s["min"] <= s["median"] <= s["p90"] <= s["p95"] <= s["p99"] <= s["max"]
    assert s["min"] <= s["average"] <= s["max"]
    assert s["fps"] > 0
    p75 = float(re.search(r"p75 ([\d.]+) ms", out).group(1))
    assert s["median"] <= p75 <= s["p90"]


def test_a_short_run_prints_its_duration_in_digits_it_has(capsys):
    # was: "20 inferences in 0.00 s" for a run of milliseconds; one request in flight runs its
    # inferences one after another, so the run lasts at least their latencies' sum
    assert main(["benchmark", "-m", DEMO, "-niter", "20", "-nireq", "1"]) == 0
    s = stats(capsys.readouterr().out)
    assert s["seconds"] * 1e3 >= 0.9 * 20 * s["min"] > 0
    assert s["fps"] == pytest.approx(20 / s["seconds"], rel=0.05)


def test_batch_sets_the_first_dimension_and_frames_per_second(capsys):
    assert main(["benchmark", "-m", DYNAMIC, "-c", REORG, "-b", "2", "-niter", "2"]) == 0
    out = capsys.readouterr().out
    fps = stats(out)["fps"]
    frames = float(re.search(r"([\d.]+) frames/s at batch 2", out).group(1))
    assert frames == pytest.approx(2 * fps, rel=0.01)
    assert main(["run", "-m", DYNAMIC, "-c", REORG, "-b", "5"]) == 0
    assert "shape [5, 16, 3, 4]" in capsys.readouterr().out


# -- shapes checked against the model ----------------------------------------------------------
def test_a_wrong_input_shape_is_named_as_such(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 16, 16), np.float32))
    err = fails(["run", "-m", DEMO, "-i", str(tmp_path / "x.npy")], capsys, code=2)
    assert f"input 'data' has shape [1, 3, 16, 16] ({tmp_path / 'x.npy'}, given with -i); the " \
           "model expects [1, 3, 32, 32]" in err
    assert "output port" not in err
    err = fails(["run", "-m", DEMO, "-b", "2"], capsys, code=2)
    assert "input 'data' has shape [2, 3, 32, 32] (-b 2); the model expects [1, 3, 32, 32]" in err
    err = fails(["run", "-m", DYNAMIC, "-c", REORG, "--shape", "x=2x4x6"], capsys, code=2)
    assert "input 'x' has shape [2, 4, 6] (shape 'x=2x4x6'); the model expects " \
           "[?, 4, 6, 8]" in err


@pytest.mark.parametrize("shape, says", [
    ("y[1,4,6,8]", "'y' is not an input of the model; its inputs: x"),
    ("x[?,4,6,8]", "dimension '?' is not a positive number"),
    ("x[1,4,6,8][2,4,6,8]", "a run takes one shape per input"),
    ("x[1,4,6,8", "is not NAME[1,3,224,224]"),
    ("1x4x6x8", "is not NAME=1x3x224x224"),
])
def test_bad_shapes_are_usage_errors(capsys, shape, says):
    err = fails(["run", "-m", DYNAMIC, "-c", REORG, "-data_shape", shape], capsys, code=2)
    assert says in err


# -- device index names ------------------------------------------------------------------------
def test_device_index_names(capsys, test_device):
    from customlayers.runtime.device.device import device_index_names, list_devices
    devices = list_devices()
    names = device_index_names(devices)
    mine = names[devices.index(test_device)]
    assert re.fullmatch(r"(CPU|GPU|ACCELERATOR|OTHER)\.\d+", mine)
    assert cli_main(["devices"]) == 0
    assert re.search(rf"^{re.escape(mine)}\*?\s+{re.escape(test_device.name.strip()[:20])}",
                     capsys.readouterr().out, re.M)
    assert main(["run", "-m", DEMO, "-d", mine.lower()]) == 0      # any case, as OpenVINO
    assert test_device.name.strip() in capsys.readouterr().err
    kind = mine.split(".")[0]
    missing = f"{kind}.{sum(n.startswith(kind + '.') for n in names)}"
    err = fails(["run", "-m", DEMO, "-d", missing], capsys, code=2)
    assert f"no OpenCL device '{missing}': the devices are {mine} '" in err
    err = fails(["run", "-m", DEMO, "-d", "MULTI:GPU.0,CPU.0"], capsys, code=2)
    assert "a model runs on one OpenCL device here" in err


def test_version(capsys):
    from importlib import metadata

    from customlayers import __version__
    try:
        installed = metadata.version("customlayers")
    except metadata.PackageNotFoundError:      # run from a source tree that was not installed
        installed = __version__
    with pytest.raises(SystemExit) as e:
        cli_main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out == f"customlayers {installed}\n"


def test_python_m_customlayers_is_the_cli():
    import subprocess
    done = subprocess.run([sys.executable, "-m", "customlayers", "benchmark", "-m", DEMO,
                           "-data_shape", "data[1,3,8,8]"], capture_output=True, text=True,
                          cwd=ROOT)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "input 'data' has shape [1, 3, 8, 8]" in done.stderr


def test_onnx_is_a_core_dependency():
    """`pip install customlayers` alone must read ONNX models: onnx without an extra marker."""
    import tomllib
    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    core = project["project"]["dependencies"]
    assert any(re.match(r"onnx\b", r) for r in core), core
