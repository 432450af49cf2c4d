"""`check` (an OpenCL layer against its Python reference) and `run --check-with` (each custom
layer of a model against its reference, on the inputs the kernel got in the real run)."""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from customlayers.cli import main as cli_main
from customlayers.cli.model_commands.demo import find_examples

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ROOT / "examples" / "layers"
TEST_DEVICE = os.environ.get("CUSTOMLAYERS_TEST_DEVICE", "CPU")   # as conftest.py reads it
EXAMPLES = find_examples()
ROW = re.compile(r"^\s*(\d+)\s+(\S+)\s+(\w+)\s+(yes|no)\s+(\S+)\s+(\S+)\s+(\S+)\s+(.*)$")


def main(argv: list[str]) -> int:
    return cli_main(argv[:1] + ["-d", TEST_DEVICE] + argv[1:])


def rows(out: str) -> list[dict]:
    found = []
    for line in out.splitlines():
        m = ROW.match(line)
        if m:
            found.append(dict(zip(("case", "inputs", "format", "padded", "abs", "rel", "worst",
                                   "result"), m.groups())))
    return found


def check_args(example, case) -> list[str]:
    args = ["check", "-c", str(example.config), "-l",
            str(example.folder / f"{example.name}_reference.py"),
            "--shape", ",".join("x".join(map(str, s)) for s in case["inputs"])]
    for k, v in case.get("params", {}).items():
        args += ["--param", f"{k}={v}"]
    for k, v in case.get("data", {}).items():
        args += ["--data", f"{k}={'x'.join(map(str, v))}"]
    return args


def test_every_example_has_a_python_reference_layer():
    assert len(EXAMPLES) >= 7
    for ex in EXAMPLES:
        assert (ex.folder / f"{ex.name}_reference.py").is_file(), ex.name


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_check_passes_on_the_examples(example, capsys):
    """Each example's kernel against its @cpu_layer reference: plain, then padded in every
    format the descriptor allows."""
    case = example.reference.CASES[-1]
    assert main(check_args(example, case)) == 0
    out = capsys.readouterr().out
    found = rows(out)
    if example.kind == "MVCL":   # run in a one-layer network, which hands them dense BFYX
        assert len(found) == 1 and found[0]["format"] == "bfyx", out
        assert found[0]["result"] == "ok", out
        return
    any_format = all(f == "ANY" for f in re.findall(r'type="input"[^>]*format="(\w+)"',
                                                     example.config.read_text()))
    assert len(found) == (5 if any_format else 2), out
    if any_format:
        assert {r["format"] for r in found if r["padded"] == "yes"} == {"bfyx", "byxf", "yxfb",
                                                                        "fyxb"}
    assert all(r["result"] == "ok" for r in found), out
    assert out.rstrip().endswith(f"{len(found)} cases: every output matches the reference")


def test_check_default_shapes_and_header(capsys):
    relu = LAYERS / "relu"
    assert main(["check", "-c", str(relu / "relu.xml"), "-l", str(relu / "relu_reference.py"),
                 "--param", "negative_slope=0.1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"check ReLU ({relu / 'relu.xml'}:3) against ReLU.execute "
                          f"({relu / 'relu_reference.py'}:16); rtol 1e-05, atol 1e-05, seed 0")
    assert [r["inputs"] for r in rows(out)] == ["1x4x6x8", "2x8x4x10", "1x16x2x2"] + \
        ["1x4x6x8"] * 4


WRONG_RELU_CL = """__kernel void example_relu_kernel(const __global INPUT0_TYPE* input0,
                                  __global OUTPUT0_TYPE* output0)
{
    const uint y = get_global_id(1), bf = get_global_id(2);
    const uint f = bf % OUTPUT0_DIMS[1], b = bf / OUTPUT0_DIMS[1];
    for (uint x = get_global_id(0) * 4; x < get_global_id(0) * 4 + 4 && x < OUTPUT0_DIMS[3];
         ++x) {
        const INPUT0_TYPE value = input0[INPUT0_OFFSET + b * INPUT0_PITCHES[0]
                                         + f * INPUT0_PITCHES[1] + y * INPUT0_PITCHES[2]
                                         + x * INPUT0_PITCHES[3]];
        const float bug = (b == 0 && f == 1 && y == 2 && x == 3) ? 0.5f : 0.0f;
        output0[OUTPUT0_OFFSET + b * OUTPUT0_PITCHES[0] + f * OUTPUT0_PITCHES[1]
                + y * OUTPUT0_PITCHES[2] + x * OUTPUT0_PITCHES[3]] =
            (value < 0 ? value * (INPUT0_TYPE)(neg_slope) : value) + bug;
    }
}
"""


def wrong_relu(folder: Path) -> Path:
    """The ReLU example's descriptor (4 neighbours along x per work item) with a kernel that is
    wrong at one element, (b,f,y,x) = (0,1,2,3)."""
    shutil.copy(LAYERS / "relu" / "relu.xml", folder / "relu.xml")
    (folder / "relu.cl").write_text(WRONG_RELU_CL)
    return folder / "relu.xml"


def test_check_fails_on_a_wrong_kernel_and_locates_the_element(tmp_path, capsys):
    config = wrong_relu(tmp_path)
    assert main(["check", "-c", str(config), "-l", str(LAYERS / "relu" / "relu_reference.py"),
                 "--shape", "1x3x5x7", "--seed", "4"]) == 1
    out = capsys.readouterr().out
    found = rows(out)
    assert len(found) == 5
    for r in found:        # every layout, padded or not: the same logical element
        assert r["result"] == "DIFFERS", out
        assert r["worst"] == "B,F,Y,X=(0,1,2,3)"
        assert float(r["abs"]) == pytest.approx(0.5, rel=1e-6)
    assert out.rstrip().endswith("5 of 5 cases differ (cases 1, 2, 3, 4, 5)")


def test_check_usage_errors(tmp_path, capsys):
    relu = LAYERS / "relu"
    assert main(["check", "-c", str(relu / "relu.xml")]) == 2
    assert "give the Python reference with -l reference.py" in capsys.readouterr().err
    assert main(["check", "-c", str(relu / "relu.xml"), "-l",
                 str(LAYERS / "grn" / "grn_reference.py")]) == 2
    assert "has no Python layer of type 'ReLU' (it defines GRN)" in capsys.readouterr().err
    shift = LAYERS / "scale_shift"
    assert main(["check", "-c", str(shift / "scale_shift.xml"), "-l",
                 str(shift / "scale_shift_reference.py")]) == 2
    assert ("layer 'ScaleShift' binds Data weights, biases: give --data weights=SHAPE"
            in capsys.readouterr().err)


# -- run --check-with ----------------------------------------------------------------------------
def grn_relu_grn(path: Path) -> Path:
    """x -> GRN g1 -> ReLU r1 -> GRN g2 -> y, all custom nodes."""
    shape = [1, 4, 5, 6]
    nodes = [helper.make_node("GRN", ["x"], ["a"], name="g1", domain="com.example", bias=0.5),
             helper.make_node("ReLU", ["a"], ["b"], name="r1", domain="com.example"),
             helper.make_node("GRN", ["b"], ["y"], name="g2", domain="com.example")]
    graph = helper.make_graph(nodes, "checked",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                      helper.make_opsetid("com.example", 1)]),
              path)
    return path


def check_with_args(model, relu_config) -> list[str]:
    return ["run", "-m", str(model), "-c", str(LAYERS / "grn" / "grn.xml"), str(relu_config),
            "--check-with", str(LAYERS / "grn" / "grn_reference.py"),
            "--check-with", str(LAYERS / "relu" / "relu_reference.py")]


def test_run_check_with_passes_when_every_layer_matches(tmp_path, capsys):
    model = grn_relu_grn(tmp_path / "m.onnx")
    assert main(check_with_args(model, LAYERS / "relu" / "relu.xml")) == 0
    out = capsys.readouterr().out
    names = [line.split()[0] for line in out.splitlines() if line.startswith("  ")]
    assert names == ["g1", "r1", "g2"]
    assert "3 custom layer(s) checked: every output matches its reference" in out


def test_run_check_with_reports_the_first_wrong_layer(tmp_path, capsys):
    """r1's kernel is wrong: it is the first that differs. g2, checked on the inputs it really
    got (r1's wrong output), still matches its reference."""
    model = grn_relu_grn(tmp_path / "m.onnx")
    assert main(check_with_args(model, wrong_relu(tmp_path))) == 1
    out = capsys.readouterr().out
    status = {line.split()[0]: line.split()[-1] for line in out.splitlines()
              if line.startswith("  ")}
    assert status == {"g1": "ok", "r1": "DIFFERS", "g2": "ok"}
    last = out.rstrip().splitlines()[-1]
    assert last.startswith(f"first layer whose outputs differ: layer 'r1' (type ReLU) at "
                           f"{model}")
    assert "worst at B,F,Y,X=(0,1,2,3) of output 0" in last


def test_run_check_with_names_layers_without_a_reference(tmp_path, capsys):
    model = grn_relu_grn(tmp_path / "m.onnx")
    assert main(["run", "-m", str(model), "-c", str(LAYERS / "grn" / "grn.xml"),
                 str(LAYERS / "relu" / "relu.xml"), "--check-with",
                 str(LAYERS / "grn" / "grn_reference.py")]) == 0
    out = capsys.readouterr().out
    assert "not checked: layers of type ReLU (no Python layer of that type)" in out
    assert "2 custom layer(s) checked" in out


SWAPPED_SCALED_ADD = '''import numpy as np
from customlayers.api import Attr, cpu_layer


@cpu_layer("ScaledAdd")
class ScaledAdd:
    """The example's reference with its two inputs swapped: wrong unless a == b."""
    attributes = (Attr("weights", "floats", default=(1.0, 1.0)),)

    def output_shapes(self, input_shapes, attrs):
        return [input_shapes[0]]

    def execute(self, inputs, outputs, attrs):
        wa, wb = (np.float32(w) for w in attrs["weights"])
        np.copyto(outputs[0], inputs[1] * wa + inputs[0] * wb)
'''


@pytest.mark.parametrize("extra", [[], ["--shape", "1x3x4x5"], ["--seed", "7"]],
                         ids=["default-shapes", "one-shape-for-both", "seed-7"])
def test_check_gives_each_input_its_own_values(tmp_path, capsys, extra):
    """Two inputs of the same shape get different random values (issue 18): a reference that
    swaps them is a mismatch in every case, not 'every output matches'."""
    ref = tmp_path / "swapped_reference.py"
    ref.write_text(SWAPPED_SCALED_ADD)
    scaled_add = LAYERS / "scaled_add"
    args = ["check", "-c", str(scaled_add / "scaled_add.xml"), "-l", str(ref),
            "--param", "weights=0.5,-2.0", *extra]
    assert main(args) == 1
    out = capsys.readouterr().out
    found = rows(out)
    assert found and all(r["result"] == "DIFFERS" for r in found), out
    # still reproducible with the seed: the same errors again
    assert main(args) == 1
    assert rows(capsys.readouterr().out) == found


@pytest.mark.parametrize("name", ["onnxruntime", "openvino", "ort"])
def test_run_check_with_a_runtime_name_says_what_check_with_takes(tmp_path, capsys, name):
    """A transformer user tries `--check-with onnxruntime` to compare the model: one usage
    line (exit 2) saying that --check-with takes custom layers' Python references."""
    model = grn_relu_grn(tmp_path / "m.onnx")
    status = main(["run", "-m", str(model), "--check-with", name])
    out, err = capsys.readouterr()
    assert status == 2, out + err
    assert f"--check-with {name}: no such file; --check-with takes the Python references " \
           f"(REFERENCE.py, @cpu_layer classes) of custom layers" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
