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
