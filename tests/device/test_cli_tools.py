"""`jit`, `devices` and `layers` through the CLI entry point."""
from __future__ import annotations

from pathlib import Path

from customlayers.cli import main

RELU = str(Path(__file__).resolve().parents[2] / "examples" / "layers" / "relu" / "relu.xml")


def test_jit_prints_the_program_and_the_work_sizes(capsys):
    rc = main(["jit", "-c", RELU, "--layer", "ReLU", "--input",
               "1x3x224x224:f32:bfyx:pad=0,0,1,1/0,0,1,1", "--param", "negative_slope=3e-08"])
    out, err = capsys.readouterr()
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == "#define NUM_INPUTS 1"
    assert "#define INPUT0_DIMS (int []){ 1,3,224,224, }" in lines
    # padded by one row and column on each side: Y'=226, X'=226
    assert "#define INPUT0_PITCHES (int []){ 153228,51076,226,1, }" in lines
    assert "#define INPUT0_OFFSET 227" in lines
    assert "#define OUTPUT0_OFFSET 0" in lines          # outputs are not padded by default
    assert "#define neg_slope 3e-08" in lines           # the attribute text, exactly
    assert "__kernel void example_relu_kernel(" in out
    assert "global work size: 224,224,3" in err         # global X,Y,B*F evaluated


def test_jit_errors_are_messages(capsys):
    rc = main(["jit", "-c", RELU, "--layer", "NoSuch", "--input", "1x3x8x8"])
    assert rc != 0
    err = capsys.readouterr().err
    assert "NoSuch" in err and "ReLU" in err and "Traceback" not in err


def test_devices_lists_the_test_device(capsys, test_device):
    assert main(["devices"]) == 0
    out = capsys.readouterr().out
    assert test_device.name.strip()[:20] in out
    assert "max WG" in out


def test_layers_lists_bindings_and_places(capsys):
    assert main(["layers", "-c", RELU]) == 0
    out = capsys.readouterr().out
    assert "ReLU" in out and "example_relu_kernel" in out and "relu.xml:3" in out


def test_jit_refuses_dims_over_int(capsys):
    rc = main(["jit", "-c", RELU, "--layer", "ReLU", "--input", "1x2147483648"])
    out, err = capsys.readouterr()
    assert rc == 1 and out == ""
    assert "INPUT0_DIMS would hold 2147483648, over 2147483647" in err
    assert "Traceback" not in err


def test_jit_refuses_a_param_that_would_inject_a_line(capsys):
    rc = main(["jit", "-c", RELU, "--layer", "ReLU", "--input", "1x3x8x8",
               "--param", "negative_slope=0.1\n#error injected"])
    out, err = capsys.readouterr()
    assert rc == 1 and out == ""
    assert "layer 'ReLU', define 'neg_slope'" in err and "negative_slope=" in err
    assert "control character '\\n'" in err and "\n#error" not in err
