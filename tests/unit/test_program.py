"""Program assembly and work sizes (SPEC sections 3 and 4), from a real config."""
from __future__ import annotations

from dataclasses import replace

import pytest

from customlayers.config import load_config_string
from customlayers.errors import DefineError, FormulaError
from customlayers.jit.program import generate_program
from customlayers.jit.tensor import TensorDesc
from customlayers.jit.worksizes import compute_work_sizes

CONFIG = """<CustomLayer name="Scale" type="SimpleGPU" version="1">
  <Kernel entry="scale">
    <Source filename="a.cl"/>
    <Source filename="b.cl"/>
    <Define name="alpha" type="float" param="alpha" default="1.0f"/>
    <Define name="NUM 3"/>
  </Kernel>
  <Buffers>
    <Tensor arg-index="0" type="input" port-index="0"/>
    <Data name="weights" arg-index="1"/>
    <Tensor arg-index="2" type="output" port-index="0" format="byxf"/>
  </Buffers>
  <CompilerOptions options="-cl-mad-enable"/>
  <CompilerOptions options="-cl-fast-relaxed-math"/>
  <WorkSizes dim="input,0" global="X,Y,B*F" local="1,1,1"/>
</CustomLayer>
"""
SOURCES = {"a.cl": "// a\nfloat twice(float v) { return 2 * v; }\n",
           "b.cl": "__kernel void scale(__global const INPUT0_TYPE* x,\n"
                   "                    __global const INPUT1_TYPE* w,\n"
                   "                    __global OUTPUT0_TYPE* y) { }"}


def layer(xml=CONFIG, sources=SOURCES):
    configs = load_config_string(xml, sources, name="scale.xml")
    assert not configs.diagnostics.errors, configs.diagnostics.to_json()
    return next(iter(configs.layers.values()))


IN = TensorDesc((1, 2, 3, 4))
BLOB = TensorDesc((2,))
OUT = TensorDesc((1, 2, 3, 4), format="BYXF")


def test_order_of_the_program_text():
    program = generate_program(layer(), [IN, BLOB], [OUT], {"alpha": "3e-08"})
    lines = program.text.split("\n")
    assert lines[0] == "#define NUM_INPUTS 2"        # the Data blob counts as INPUT1
    assert "#define GLOBAL_WORKSIZE (ulong []){ 4,3,2, }" in lines
    assert "#define LOCAL_WORKSIZE (ulong []){ 1,1,1, }" in lines
    assert "#define INPUT1_DIMS (int []){ 2,1,1,1, }" in lines
    assert "#define OUTPUT0_FORMAT_BYXF" in lines
    start = lines.index("// Custom layer Scale (SimpleGPU), entry scale")
    assert lines[start - 1] == "#define OUTPUT0_OFFSET 0"
    assert lines[start + 1:start + 8] == [
        "#define alpha 3e-08",
        "#define NUM 3 ",
        "// Source: a.cl",
        '#line 1 "a.cl"',
        "// a",
        "float twice(float v) { return 2 * v; }",
        "// Source: b.cl",
    ]
    assert lines[start + 8] == '#line 1 "b.cl"'
    assert program.text.endswith("__global OUTPUT0_TYPE* y) { }\n")
    assert (program.entry, program.options) == ("scale", "-cl-mad-enable -cl-fast-relaxed-math")
    assert (program.global_size, program.local_size) == ((4, 3, 2), (1, 1, 1))


def test_line_map_points_into_the_user_files():
    program = generate_program(layer(), [IN, BLOB], [OUT])
    lines = program.text.split("\n")
    assert len(program.line_map) == len(lines) - 1      # the text ends with a newline
    n = lines.index("float twice(float v) { return 2 * v; }") + 1
    assert program.origin(n) == ("a.cl", 2)
    assert program.origin(n + 3) == ("b.cl", 1)
    assert program.origin(n + 5) == ("b.cl", 3)
    assert program.origin(1) is None and program.origin(10**6) is None


def test_default_global_is_the_output_element_count():
    xml = CONFIG.replace(' global="X,Y,B*F" local="1,1,1"', "")
    assert compute_work_sizes(layer(xml), [IN, BLOB], [TensorDesc((2, 5, 7))]) == ((70,), None)


@pytest.mark.parametrize("global_, local, message", [
    (("X/(Y-3)",), None, "layer 'Scale', attribute 'global': division by zero with X=4, Y=3 "
                         "in formula 'X/(Y-3)' at column 2"),
    (("X-4",), None, "layer 'Scale', attribute 'global': the result is 0 with X=4; expected a "
                     "positive integer in formula 'X-4'"),
    # the validator reports these at load time too; the JIT must not trust that it ran
    (("X", "Y"), ("1",), "layer 'Scale', attribute 'local': local has 1 entries but global has "
                         "2 in formula '1'"),
    (("X",), ("Q",), "layer 'Scale', attribute 'local': unknown token 'Q': the variables are "
                     "B, F, Y, X (either case), and the layer's parameters alpha in formula 'Q' "
                     "at column 1"),
])
def test_work_size_errors_name_layer_attribute_and_formula(global_, local, message):
    spec = layer()
    spec = replace(spec, work_sizes=replace(spec.work_sizes, global_=global_, local=local))
    with pytest.raises(FormulaError) as info:
        compute_work_sizes(spec, [IN, BLOB], [OUT])
    # at the <WorkSizes> element's line
    assert str(info.value) == f"{spec.work_sizes.location}, {message}"


def test_a_bad_attribute_is_a_define_error():
    with pytest.raises(DefineError, match=r"layer 'Scale', define 'alpha' \(type float\): "
                                          r"attribute alpha=\"fast\" does not fit"):
        generate_program(layer(), [IN, BLOB], [OUT], {"alpha": "fast"})


@pytest.mark.parametrize("global_, local, message", [
    (("9223372036854775807+1",), None,
     "layer 'Scale', attribute 'global': the result is 9223372036854775808; a work size "
     "is at most 4294967295 (2**32-1) in formula '9223372036854775807+1'"),
    (("X",), ("X*2147483648",),
     "layer 'Scale', attribute 'local': the result is 8589934592 with X=4; a work size is at most "
     "4294967295 (2**32-1) in formula 'X*2147483648'"),
])
def test_work_sizes_too_large_name_layer_attribute_formula_and_value(global_, local, message):
    spec = layer()
    spec = replace(spec, work_sizes=replace(spec.work_sizes, global_=global_, local=local))
    with pytest.raises(FormulaError) as info:
        compute_work_sizes(spec, [IN, BLOB], [OUT])
    # at the <WorkSizes> element's line
    assert str(info.value) == f"{spec.work_sizes.location}, {message}"


def test_default_global_too_large_is_refused():
    xml = CONFIG.replace(' global="X,Y,B*F" local="1,1,1"', "")
    with pytest.raises(FormulaError, match=r"layer 'Scale', attribute 'global': the default global "
                                           r"size, the element count of output 0 .* is 4294967296"):
        compute_work_sizes(layer(xml), [IN, BLOB], [TensorDesc((65536, 65536))])
