"""The command line with MVCL configs: validate reports their notes and exits 0, jit prints each
stage's program with its sizes and arguments."""
from __future__ import annotations

from pathlib import Path

from customlayers.cli import main

EXAMPLES = Path(__file__).resolve().parent.parent.parent / "examples" / "layers"


def test_validate_the_mvcl_examples(capsys):
    configs = sorted(str(p) for p in EXAMPLES.glob("*/*.xml"))
    assert main(["validate", *configs]) == 0
    out = capsys.readouterr().out
    assert "info[CL101]: source 'reorg.bin' is an offline VPU binary" in out
    assert out.strip().endswith("0 errors, 0 warnings")


def test_jit_prints_every_stage_of_an_mvcl_layer(capsys):
    status = main(["jit", "-c", str(EXAMPLES / "mvn_two_stage" / "mvn_two_stage.xml"),
                   "--layer", "MVN", "--input", "2x4x3x7", "--output", "2x4x3x7",
                   "--param", "normalize_variance=1", "--param", "eps=0.001"])
    captured = capsys.readouterr()
    assert status == 0
    assert captured.out.count("// Custom layer MVN (MVCL), stage ") == 2
    assert "// stage 0: global work size 4,2,1, local work size (driver chooses)\n" \
           "// arguments: src:InputTensorArg, mean:BufferArg, variance:BufferArg, plane=3, " \
           "width=7" in captured.err
    assert "normalize_variance=1, eps=0.0010000000474974513" in captured.err


def _misspelt_scalar(tmp_path: Path) -> Path:
    """mvn_two_stage.xml with the eps Scalar written <Scala1r>: a warning alone (an unknown
    element), which left kernel parameter 'eps' bound by nothing."""
    source = EXAMPLES / "mvn_two_stage"
    text = (source / "mvn_two_stage.xml").read_text()
    old = '<Scalar arg-name="eps"                type="float"        source="eps"/>'
    assert old in text
    (tmp_path / "mvn_two_stage.cl").write_text((source / "mvn_two_stage.cl").read_text())
    path = tmp_path / "mvn.xml"
    path.write_text(text.replace(old, '<Scala1r arg-name="eps" type="float" source="eps"/>'))
    return path


def test_a_misspelt_scalar_leaves_its_parameter_unbound_and_says_so(tmp_path, capsys):
    """validate said one warning and exit 0; then jit, run-layer and validate --compile died
    with an AttributeError in jit/mvcl_program.py."""
    path = _misspelt_scalar(tmp_path)
    assert main(["validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"{path}:23:5: error[CL110]: parameter 5 of kernel 'mvn_normalize' ('float eps') is " \
           f"bound by nothing; expected a <Tensor>, <Scalar> or <Data> with arg-name=\"eps\"; " \
           f"<Scala1r> at line 29 names it, but only <Tensor>, <Scalar> and <Data> bind " \
           f"parameters (did you mean 'Scalar'?) (layer MVN)" in out
    assert main(["jit", "-c", str(path), "--input", "1x2x3x4", "--output", "1x2x3x4",
                 "--param", "normalize_variance=1", "--param", "eps=0.1"]) == 2
    err = capsys.readouterr().err
    assert "error[CL110]" in err and err.endswith(
        f"customlayers jit: error: no valid layer 'MVN' in {path} (valid layers: none)\n")


def test_an_infinite_attribute_in_a_formula_is_a_formula_error(tmp_path, capsys):
    """--param stride=1e999 reached math.fmod(inf, ...) in the formula evaluator: ValueError."""
    source = EXAMPLES / "reorg_nhwc"
    (tmp_path / "reorg.cl").write_text((source / "reorg.cl").read_text())
    text = (source / "reorg_nhwc.xml").read_text().replace('global="(Y+7)/8*8,1,1"',
                                                            'global="Y%stride+8,1,1"')
    path = tmp_path / "r.xml"
    path.write_text(text.replace("reorg.bin", "reorg.cl"))
    base = ["jit", "-c", str(path), "--input", "1x4x4x4", "--output", "1x16x2x2"]
    assert main([*base, "--param", "stride=2"]) == 0
    # 5,000 leading zeros: int() counts them against its limit of 4,300 digits (ValueError)
    assert main([*base, "--param", "stride=" + "0" * 5000 + "2"]) == 0
    assert "stride=2" in capsys.readouterr().err
    for value, shown in (("1e999", "inf"), ("9" * 5000, "inf"), ("-1e300", "-1e+300")):
        assert main([*base, "--param", f"stride={value}"]) == 1
        err = capsys.readouterr().err
        assert err.endswith(f"attribute 'global of stage 0': 'stride' is {shown}; a value in a "
                            f"formula is finite and at most 9223372036854775808 in magnitude in "
                            f"formula 'Y%stride+8' at column 3\n"), err[-500:]
