"""`jit`, `devices` and `layers` through the CLI entry point."""
from __future__ import annotations

from pathlib import Path

import numpy as np

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
    assert "global work size: 56,224,3" in err   # global (X+3)/4,Y,B*F evaluated


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


UP_XML = """<CustomLayer name="Up" type="SimpleGPU" version="1">
  <Kernel entry="up"><Source filename="up.cl"/></Kernel>
  <Buffers>
    <Tensor arg-index="0" type="input" port-index="0" format="ANY"/>
    <Data name="weights" arg-index="1"/>
    <Tensor arg-index="2" type="output" port-index="0" format="BYXF" shape="B,F,Y*2,X*2"/>
  </Buffers>
  <WorkSizes dim="output" global="X,Y,B*F"/>
</CustomLayer>
"""
UP_CL = """__kernel void up(__global const INPUT0_TYPE* in, __global const INPUT1_TYPE* w,
                 __global OUTPUT0_TYPE* out)
{
    const int x = get_global_id(0), y = get_global_id(1), f = get_global_id(2);
    out[OUTPUT0_OFFSET + f * OUTPUT0_PITCHES[1] + y * OUTPUT0_PITCHES[2] + x * OUTPUT0_PITCHES[3]]
        = in[INPUT0_OFFSET + f * INPUT0_PITCHES[1] + (y / 2) * INPUT0_PITCHES[2]
             + (x / 2) * INPUT0_PITCHES[3]] * w[0];
}
"""


def test_jit_prints_the_program_the_runtime_runs(capsys, tmp_path, cl_env):
    from customlayers.jit.tensor import TensorDesc
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.layers.registry import Registry
    (tmp_path / "up.xml").write_text(UP_XML)
    (tmp_path / "up.cl").write_text(UP_CL)
    rc = main(["jit", "-c", str(tmp_path / "up.xml"), "--layer", "Up",
               "--input", "1x3x4x4:bfyx:pad=0,0,1,1/0,0,1,1", "--input", "2x2:yxfb"])
    out, _ = capsys.readouterr()
    assert rc == 0
    # the output's shape formula, in its format; the Data blob 1-D and plain, as SPEC section 2
    assert "#define OUTPUT0_DIMS (int []){ 1,3,8,8, }" in out.splitlines()
    assert "#define OUTPUT0_FORMAT_BYXF" in out.splitlines()
    assert "#define INPUT1_DIMS (int []){ 4,1,1,1, }" in out.splitlines()
    assert "#define INPUT1_FORMAT_BFYX" in out.splitlines()

    registry = Registry(Engine(cl_env[2]))
    registry.load(tmp_path / "up.xml")
    bound = registry.bind("Up", [TensorDesc((1, 3, 4, 4), lower_pad=(0, 0, 1, 1),
                                            upper_pad=(0, 0, 1, 1))],
                          data={"weights": [2.0, 0, 0, 0]})
    assert bound.source.text == out
    x = np.arange(48, dtype=np.float32).reshape(1, 3, 4, 4)
    np.testing.assert_array_equal(bound(x), 2 * x.repeat(2, axis=2).repeat(2, axis=3))


def test_layers_takes_several_configs_after_one_c(capsys):
    grn = str(Path(RELU).parents[1] / "grn" / "grn.xml")
    assert main(["layers", "-c", RELU, grn]) == 0          # as the README writes it
    out = capsys.readouterr().out
    assert "relu.xml:3" in out and "grn.xml:" in out
    assert main(["layers", "-c", RELU, "-c", grn]) == 0    # and repeated
    assert capsys.readouterr().out == out


NHWC_XML = """<CustomLayer name="Nhwc" type="SimpleGPU" version="1">
  <Kernel entry="nhwc"><Source filename="nhwc.cl"/></Kernel>
  <Buffers>
    <Tensor arg-index="0" type="input" port-index="0" format="BYXF"/>
    <Tensor arg-index="1" type="output" port-index="0" format="BYXF"/>
  </Buffers>
  <WorkSizes global="B*F*Y*X"/>
</CustomLayer>
"""


def test_jit_says_when_a_tensors_format_is_replaced_by_the_layers(capsys, tmp_path):
    """The runtime reorders a tensor into the format its <Tensor> asks for, so jit prints the
    program for that format; it said nothing when the --input named another."""
    (tmp_path / "nhwc.cl").write_text("__kernel void nhwc(__global const float* a, "
                                      "__global float* b) { b[get_global_id(0)] = a[0]; }")
    config = tmp_path / "nhwc.xml"
    config.write_text(NHWC_XML)
    assert main(["jit", "-c", str(config), "--input", "1x3x8x8:f32:bfyx",
                 "--output", "1x3x8x8:f32:yxfb"]) == 0
    out, err = capsys.readouterr()
    assert "#define INPUT0_FORMAT_BYXF" in out and "#define OUTPUT0_FORMAT_BYXF" in out
    assert (f'note: input 0 is given as bfyx; its <Tensor format="BYXF"> ({config}:4:5) makes '
            f"the runtime reorder it: the program is for byxf") in err
    assert f'note: output 0 is given as yxfb; its <Tensor format="BYXF"> ({config}:5:5)' in err
    assert main(["jit", "-c", str(config), "--input", "1x3x8x8:f32:byxf"]) == 0
    assert "note:" not in capsys.readouterr().err
