"""Issue 18, item 5: a SimpleGPU layer's WorkSizes and shape formulas may name its parameters
(the `param` of its Defines), so the descriptor ties a parameter to the work sizes, and a value
that gives no positive size (a negative stride) is an error naming the layer, the formula and
the values, before anything is built or launched."""
from __future__ import annotations

import pytest

from customlayers.config import load_config_string
from customlayers.errors import FormulaError, TensorError
from customlayers.jit.bindings import kernel_tensors
from customlayers.jit.program import generate_program
from customlayers.jit.tensor import TensorDesc

REORG = """<CustomLayer name="Reorg" type="SimpleGPU" version="1">
  <Kernel entry="reorg">
    <Source filename="reorg.cl"/>
    <Define name="STRIDE" type="int" param="stride" default="2"/>
  </Kernel>
  <Buffers>
    <Tensor arg-index="0" type="input" port-index="0"/>
    <Tensor arg-index="1" type="output" port-index="0"
            shape="{shape}"/>
  </Buffers>
  <WorkSizes dim="input,0" global="{glob}"/>
</CustomLayer>
"""
SOURCES = {"reorg.cl": "__kernel void reorg(__global const float* x, __global float* y) { }\n"}
X = TensorDesc((1, 4, 6, 8))


def _spec(shape="B,F*stride*stride,Y/stride,X/stride", glob="X/stride,Y/stride,B*F"):
    configs = load_config_string(REORG.format(shape=shape, glob=glob), SOURCES, name="r.xml")
    assert not configs.diagnostics.errors, configs.diagnostics.to_json()
    return configs.layers["Reorg"]


def test_formulas_take_the_attribute_else_the_defines_default():
    spec = _spec()
    _, (out,) = kernel_tensors(spec, [X])
    assert out.shape == (1, 16, 3, 4)
    program = generate_program(spec, [X], [out])
    assert program.global_size == (4, 3, 4)
    _, (out,) = kernel_tensors(spec, [X], params={"stride": "3"})
    assert out.shape == (1, 36, 2, 2)
    assert generate_program(spec, [X], [out], {"stride": "3"}).global_size == (2, 2, 4)


def test_a_negative_stride_is_refused_with_the_layer_formula_and_values():
    spec = _spec()
    with pytest.raises(TensorError, match=r"layer type 'Reorg': output shape formula "
                                          r"'B,F\*stride\*stride,Y/stride,X/stride' gives "
                                          r"\[1, 4, -6, -8\] for input dims \[1, 4, 6, 8\], "
                                          r"stride=-1"):
        kernel_tensors(spec, [X], params={"stride": "-1"})
    out = TensorDesc((1, 4, 6, 8))           # an output given: the work sizes still refuse
    with pytest.raises(FormulaError) as e:
        generate_program(spec, [X], [out], {"stride": "-1"})
    assert (e.value.layer, e.value.attribute, e.value.formula) == ("Reorg", "global",
                                                                   "X/stride")
    assert "the result is -8 with X=8, stride=-1; expected a positive integer" in str(e.value)
    with pytest.raises(FormulaError, match="division by zero with X=8, stride=0"):
        generate_program(spec, [X], [out], {"stride": "0"})


def test_a_name_that_is_no_parameter_is_a_validation_error():
    configs = load_config_string(REORG.format(shape="B,F,Y/strid,X", glob="X,Y,B*F"), SOURCES,
                                 name="r.xml")
    (error,) = configs.diagnostics.errors
    assert error.code == "CL060" and "unknown token 'strid'" in error.message
    assert "and the layer's parameters stride" in error.message
    # a layer without parameters keeps the words it had
    plain = REORG.replace('<Define name="STRIDE" type="int" param="stride" default="2"/>', "")
    configs = load_config_string(plain.format(shape="B,F,Y,X", glob="X/stride,Y,B*F"), SOURCES,
                                 name="r.xml")
    (error,) = configs.diagnostics.errors
    assert error.message.endswith("the variables are B, F, Y, X (either case)")


def test_a_parameter_without_a_number_says_so():
    spec = _spec()
    with pytest.raises(FormulaError, match="'stride' is 'two', not a number in formula "
                                           "'F\\*stride\\*stride'"):
        kernel_tensors(spec, [X], params={"stride": "two"})
