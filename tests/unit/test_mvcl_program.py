"""jit/mvcl_program.py on the four MVCL examples: program text and line map, arguments in
the kernel's order, evaluated work sizes and byte sizes; and its errors, located and named."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from customlayers.config import load_config_string, load_configs
from customlayers.jit.mvcl_program import (BufferArg, InputTensorArg, LocalMemoryArg,
                                           OutputTensorArg, ScalarArg, buffer_sizes,
                                           generate_mvcl_program, generate_mvcl_stages)
from customlayers.jit.program import GeneratedProgram
from customlayers.jit.tensor import TensorDesc
from customlayers.errors import BindingError, FormulaError

EXAMPLES = Path(__file__).resolve().parent.parent.parent / "examples" / "layers"


def layer(folder: str):
    configs = load_configs([EXAMPLES / folder / f"{folder}.xml"])
    assert not configs.diagnostics.errors
    (found,) = configs.layers.values()
    return found


def values(program):
    return [(type(a).__name__, a.arg_name,
             a.value.item() if isinstance(a, ScalarArg) else getattr(a, "nbytes", None))
            for a in program.args]


def test_reorg_nhwc_program():
    attrs = {"stride": "2"}
    (program,) = generate_mvcl_stages(layer("reorg_nhwc").select(attrs), attrs,
                                      [TensorDesc((1, 8, 6, 10))],
                                      [TensorDesc((1, 32, 3, 5))])
    path = str(EXAMPLES / "reorg_nhwc" / "reorg.cl")
    lines = program.text.split("\n")
    assert lines[:3] == ["// Custom layer ReorgYoloNHWC (MVCL), stage 0, entry reorg_nhwc",
                         "// Source: reorg.cl", f'#line 1 "{path}"']
    assert "#define" not in program.text           # sizes come as Scalars, not defines
    assert program.origin(4) == (path, 1) and program.origin(3) is None
    assert len(program.line_map) == len(lines) - 1
    assert (program.entry, program.options, program.stage) == ("reorg_nhwc", "", 0)
    assert (program.global_size, program.local_size) == ((8, 1, 1), (8, 1, 1))
    assert program.args[:2] == (InputTensorArg("src", 0, "BYXF"),
                                OutputTensorArg("out", 0, "BYXF"))
    assert values(program)[2:] == [("ScalarArg", "w", 10), ("ScalarArg", "h", 6),
                                   ("ScalarArg", "c", 8), ("ScalarArg", "stride", 2)]
    assert all(type(a.value) is np.int32 for a in program.args[2:])
    assert program.uses_half is False


def test_a_stage_program_is_a_generated_program_over_tensor_descs():
    """One pipeline: MVCL's stages are GeneratedPrograms (what the runtime's build step takes,
    as SimpleGPU's program is), generated from the same TensorDescs the network holds; only the
    B,F,Y,X dims and element type count (the adapter hands the kernel dense tensors in its
    declared layout), so a padded BYXF input gives the program of its plain twin."""
    attrs = {"stride": "2"}
    stages = layer("reorg_nhwc").select(attrs)
    padded = TensorDesc((1, 8, 6, 10), "f32", "BYXF", (0, 0, 1, 1), (0, 0, 1, 1))
    (program,) = generate_mvcl_stages(stages, attrs, [padded], [TensorDesc((1, 32, 3, 5))])
    (plain,) = generate_mvcl_stages(stages, attrs, [TensorDesc((1, 8, 6, 10))],
                                    [TensorDesc((1, 32, 3, 5))])
    assert isinstance(program, GeneratedProgram) and program.layer == "ReorgYoloNHWC"
    assert program == plain


def test_grn_local_memory_and_float_scalar():
    attrs = {"bias": "0.5"}
    (program,) = generate_mvcl_stages(layer("grn_local").select(attrs), attrs,
                                      [(2, 3, 7, 5)], [(2, 3, 7, 5)])
    assert (program.global_size, program.local_size) == ((5, 7, 2), (5, 1, 1))
    assert values(program) == [("InputTensorArg", "src_data", None),
                               ("OutputTensorArg", "dst_data", None),
                               ("LocalMemoryArg", "line", 5 * 3 * 4),
                               ("ScalarArg", "C", 3), ("ScalarArg", "bias", 0.5)]
    assert type(program.args[4].value) is np.float32


def test_two_stage_mvn_passes_its_buffers():
    attrs = {"normalize_variance": "true", "eps": "1e-9"}
    stages = layer("mvn_two_stage").select(attrs)
    first, second = generate_mvcl_stages(stages, attrs, [(2, 4, 3, 7)], [(2, 4, 3, 7)])
    assert (first.entry, first.global_size, first.local_size) == ("mvn_statistics", (4, 2, 1),
                                                                  None)
    assert values(first) == [("InputTensorArg", "src", None), ("BufferArg", "mean", 32),
                             ("BufferArg", "variance", 32), ("ScalarArg", "plane", 3),
                             ("ScalarArg", "width", 7)]
    assert [(a.port, a.writes, a.name) for a in first.args if isinstance(a, BufferArg)] == \
        [(0, True, "buffer0"), (1, True, "buffer1")]
    assert (second.entry, second.stage, second.global_size) == ("mvn_normalize", 1, (7, 3, 8))
    assert values(second)[2:] == [("BufferArg", "mean", 32), ("BufferArg", "variance", 32),
                                  ("ScalarArg", "normalize_variance", 1),
                                  ("ScalarArg", "eps", pytest.approx(1e-9))]
    assert not any(a.writes for a in second.args if isinstance(a, BufferArg))
    assert buffer_sizes([first, second]) == {0: 32, 1: 32}
    assert "// Custom layer MVN (MVCL), stage 1, entry mvn_normalize" in second.text


def test_where_variants_give_different_programs():
    act = layer("activation_where")
    shapes = ([(1, 4, 2, 6)], [(1, 4, 2, 6)])
    (relu,) = generate_mvcl_stages(act.select({"mode": "relu"}), {"mode": "relu"}, *shapes)
    attrs = {"mode": "clamp", "range": "-0.5, 0.75"}
    (clamp,) = generate_mvcl_stages(act.select(attrs), attrs, *shapes)
    assert (relu.entry, clamp.entry) == ("act_relu", "act_clamp")
    assert relu.global_size == clamp.global_size == (12, 4, 1)
    assert values(relu) == [("InputTensorArg", "src", None), ("OutputTensorArg", "dst", None)]
    assert values(clamp)[2:] == [("ScalarArg", "lo", -0.5), ("ScalarArg", "hi", 0.75)]


# -- formulas and scalars from attributes ------------------------------------------------------
KERNEL = ("#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n"
          "__kernel void k(__global const half* src, __global half* dst, __local half* tmp,\n"
          "                int n, float scale) { }\n")


def custom(scalars: str, work='global="ceil(X/8.0)*8,Y,B*F" local="8,1,1"', size="X*2",
           fmt="BFYX"):
    xml = f"""<CustomLayer name="Half" type="MVCL" version="1">
  <Kernel entry="k"><Source filename="k.cl"/></Kernel>
  <Parameters>
    <Tensor arg-name="src" type="input" port-index="0" format="{fmt}"/>
    <Tensor arg-name="dst" type="output" port-index="0" format="{fmt}"/>
    <Data arg-name="tmp" type="local_data" dim="output,0" size="{size}"/>
    {scalars}
  </Parameters>
  <WorkSizes dim="input,0" {work}/>
</CustomLayer>
"""
    configs = load_config_string(xml, {"k.cl": KERNEL}, name="half.xml")
    assert not configs.diagnostics.errors, [d.render() for d in configs.diagnostics]
    return configs.layers["Half"].specs[0]


SCALARS = ('<Scalar arg-name="n" type="int" port-index="1" source="kernel"/>\n'
           '<Scalar arg-name="scale" type="float" source="1e-3f"/>')


def test_attributes_and_functions_in_formulas_and_list_elements():
    spec = custom(SCALARS, work='global="ceil(X/8.0)*8,Y,group*2" local="8,1,1"',
                  size="X*group*2")
    shape = TensorDesc((1, 2, 3, 13), "f16")
    program = generate_mvcl_program(spec, {"kernel": "3,5", "group": "2"}, [shape], [shape])
    assert program.global_size == (16, 3, 4)
    assert values(program)[2:] == [("LocalMemoryArg", "tmp", 13 * 2 * 2),
                                   ("ScalarArg", "n", 5),
                                   ("ScalarArg", "scale", pytest.approx(1e-3))]
    assert program.uses_half is True


@pytest.mark.parametrize("attrs, message", [
    ({}, "half.xml:7:5: layer 'Half' stage 0: Scalar 'n' takes attribute 'kernel', which the "
         "layer does not have (its attributes: none)"),
    ({"kernel": "3"}, "half.xml:7:5: layer 'Half' stage 0: Scalar 'n' takes element 1 "
                      "(port-index) of attribute kernel=\"3\", which has 1 element"),
    ({"kernel": "3,x"}, "half.xml:7:5: layer 'Half' stage 0: Scalar 'n' of type int: 'x' (from "
                        "source 'kernel') is not a number"),
    ({"kernel": "3,2.5"}, "half.xml:7:5: layer 'Half' stage 0: Scalar 'n' of type int: '2.5' "
                          "(from source 'kernel') is not an integer"),
    ({"kernel": "3,3000000000"}, "does not fit a 32-bit int"),
])
def test_scalar_errors_name_the_layer_the_argument_and_the_place(attrs, message):
    spec = custom(SCALARS)
    shape = TensorDesc((1, 2, 3, 13), "f16")
    with pytest.raises(BindingError) as e:
        generate_mvcl_program(spec, attrs, [shape], [shape])
    assert message in str(e.value)


def test_formula_errors_carry_layer_attribute_and_location():
    spec = custom(SCALARS, work='global="X/(F-2),Y,1"')
    shape = TensorDesc((1, 2, 3, 13), "f16")
    with pytest.raises(FormulaError) as e:
        generate_mvcl_program(spec, {"kernel": "1,1"}, [shape], [shape])
    assert (e.value.layer, e.value.attribute) == ("Half", "global of stage 0")
    assert str(e.value.location) == "half.xml:10:3"
    assert str(e.value).startswith("half.xml:10:3, layer 'Half', attribute 'global of stage 0': "
                                   "division by zero with X=13, F=2")
    spec = custom(SCALARS, size="X*missing")
    with pytest.raises(FormulaError, match="'missing' has no value here") as e:
        generate_mvcl_program(spec, {"kernel": "1,1"}, [shape], [shape])
    assert e.value.attribute == "size of 'tmp' of stage 0"
    assert str(e.value.location) == "half.xml:6:5"


def test_shapes_that_do_not_fit_the_kernel_or_the_format():
    spec = custom(SCALARS)
    f32 = TensorDesc((1, 2, 3, 13), "f32")
    with pytest.raises(BindingError, match=r"'__global const half\* src' takes half, but input 0 "
                                           r"is f32 \(float\)"):
        generate_mvcl_program(spec, {"kernel": "1,1"}, [f32], [f32])
    spec = custom(SCALARS, fmt="FYX")
    two = TensorDesc((2, 2, 3, 13), "f16")
    with pytest.raises(BindingError, match="has format FYX, which needs B = 1; its dims are "
                                           "B,F,Y,X = 2,2,3,13"):
        generate_mvcl_program(spec, {"kernel": "1,1"}, [two], [two])
    with pytest.raises(BindingError, match="needs output 0, but 0 outputs are given"):
        generate_mvcl_program(spec, {"kernel": "1,1"}, [TensorDesc((1, 2, 3, 13), "f16")],
                              [])
