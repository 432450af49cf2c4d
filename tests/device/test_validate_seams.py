"""`validate --compile` where a new user hit seams: GitHub annotations name the .cl sources as
they name the configs, relative to the current folder (GitHub cannot annotate an absolute
path), and two files that define one layer both get built, so that the earlier one's build
errors are reported too."""
from __future__ import annotations

import os
from pathlib import Path

from customlayers.cli import main

ROOT = Path(__file__).resolve().parents[2]
RELU = ROOT / "examples" / "layers" / "relu"
TEST_DEVICE = os.environ.get("CUSTOMLAYERS_TEST_DEVICE", "CPU")


def _layer(folder: Path, name: str, source: str, broken: bool = False,
           extra: str = "") -> Path:
    """The example ReLU as `folder/name.xml` with its kernel in `source` (a `;` missing in
    it when `broken`); `extra` goes inside <CustomLayer>."""
    folder.mkdir(parents=True, exist_ok=True)
    text = (RELU / "relu.cl").read_text()
    if broken:
        text = text.replace("get_global_id(0) * 4;", "get_global_id(0) * 4", 1)
        assert "get_global_id(0) * 4\n" in text
    (folder / source).write_text(text)
    config = (RELU / "relu.xml").read_text().replace('filename="relu.cl"',
                                                     f'filename="{source}"')
    config = config.replace("</CustomLayer>", f"{extra}</CustomLayer>")
    (folder / f"{name}.xml").write_text(config)
    return folder / f"{name}.xml"


def _validate(capsys, *args) -> tuple[int, str, str]:
    code = main(["validate", "--compile", "-d", TEST_DEVICE, *map(str, args)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_github_annotations_name_cl_sources_relative_to_the_current_folder(tmp_path, capsys,
                                                                          monkeypatch):
    config = _layer(tmp_path / "layers", "relu", "relu.cl", broken=True, extra="<Colour/>")
    monkeypatch.chdir(tmp_path)
    for given in (config.relative_to(tmp_path), config):    # relative or absolute argument
        code, out, _ = _validate(capsys, "--format", "github", given)
        lines = out.splitlines()
        files = {line.split("file=")[1].split(",")[0] for line in lines}
        assert code == 1
        assert files == {"layers/relu.xml", "layers/relu.cl"}, out   # the CL010 and CL080
        assert any("title=CL080" in line and "file=layers/relu.cl,line=" in line
                   for line in lines)


def test_a_layer_defined_in_two_files_has_both_definitions_built(tmp_path, capsys):
    folder = tmp_path / "layers"
    _layer(folder, "a_relu", "broken.cl", broken=True)   # read first, replaced by b_relu.xml
    _layer(folder, "b_relu", "relu.cl")
    code, out, _ = _validate(capsys, folder)
    assert code == 1, out
    assert "b_relu.xml:3:1: warning[CL070]: layer 'ReLU' is defined again" in out
    assert "broken.cl:18:" in out and "error[CL080]" in out       # was: exit 0, no error


def test_a_valid_layer_replaced_by_a_broken_definition_is_still_built(tmp_path, capsys):
    folder = tmp_path / "layers"
    _layer(folder, "a_relu", "broken.cl", broken=True)
    later = _layer(folder, "b_relu", "relu.cl")
    later.write_text(later.read_text().replace('format="ANY"/>', 'format="Bogus"/>', 1))
    code, out, _ = _validate(capsys, folder)
    assert code == 1
    assert "error[CL023]: format 'Bogus'" in out                  # the later file's error
    assert "broken.cl:18:" in out and "error[CL080]" in out       # and the earlier's build
