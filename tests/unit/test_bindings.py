"""kernel_tensors: the one description of what a custom layer's kernel receives (SPEC sections 2
and 5), shared by the jit command, validate --compile, the registry and the network."""
from __future__ import annotations

from dataclasses import replace

import pytest

from customlayers.config import load_config_string
from customlayers.errors import BindingError, TensorError
from customlayers.jit.bindings import kernel_tensors
from customlayers.jit.tensor import TensorDesc

CONFIG = """<CustomLayer name="Up" type="SimpleGPU" version="1">
  <Kernel entry="up"><Source filename="up.cl"/></Kernel>
  <Buffers>
    <Tensor arg-index="0" type="input" port-index="0" format="BFYX"/>
    <Tensor arg-index="1" type="input" port-index="1" format="ANY"/>
    <Data name="weights" arg-index="2"/>
    <Tensor arg-index="3" type="output" port-index="0" format="BYXF" shape="B,F,Y*2,X*2"/>
    <Tensor arg-index="4" type="output" port-index="1" format="ANY"/>
  </Buffers>
  <WorkSizes dim="input,1" global="X,Y,B*F"/>
</CustomLayer>
"""
SOURCE = {"up.cl": "__kernel void up(__global float* a, __global float* b, __global float* w, "
                   "__global float* o, __global float* p) { }"}


@pytest.fixture(scope="module")
def spec():
    return load_config_string(CONFIG, SOURCE).raise_if_errors().layers["Up"]


def test_inputs_blobs_and_default_outputs(spec):
    a = TensorDesc((1, 2, 4, 4), "f16", "YXFB", lower_pad=(0, 0, 1, 1))
    b = TensorDesc((1, 2, 3, 5), "f32", "FYXB")
    ins, outs = kernel_tensors(spec, [a, b], data=[TensorDesc((3, 4), "f16")])
    assert ins == [a.with_format("BFYX"),                 # asked for BFYX: re-expressed
                   b,                                     # ANY: as given
                   TensorDesc((12,), "f16")]              # Data: 1-D, plain, its count
    # output 0: its shape formula over the dim input (input 1), input 0's type, its format
    assert outs[0] == TensorDesc((1, 2, 6, 10), "f16", "BYXF")
    # output 1: ANY takes input 0's format as bound (BFYX), unpadded, input 0's shape
    assert outs[1] == TensorDesc((1, 2, 4, 4), "f16", "BFYX")


def test_given_outputs_are_re_expressed_in_their_format(spec):
    a = TensorDesc((1, 2, 4, 4))
    out0 = TensorDesc((1, 2, 8, 8), "f32", "FYXB", upper_pad=(0, 0, 1, 1))
    out1 = TensorDesc((2, 2), "i32", "YXFB")
    _, outs = kernel_tensors(spec, [a, a], [out0, out1], [TensorDesc((1,))])
    assert outs == [out0.with_format("BYXF"), out1]


@pytest.mark.parametrize("args, message", [
    (([TensorDesc((1, 2))], None, [TensorDesc((1,))]), "has 2 input port(s), 1 tensor(s) were given"),
    (([TensorDesc((1, 2))] * 2, None, []), "binds 1 Data blob(s) (weights), 0 were given"),
    (([TensorDesc((1, 2))] * 2, [TensorDesc((1, 2))], [TensorDesc((1,))]),
     "has 2 output port(s), 1 description(s) were given"),
    (([TensorDesc((1, 2)), (1, 2)], None, [TensorDesc((1,))]),
     "input 1 must be a TensorDesc, found tuple"),
])
def test_counts_and_types_are_binding_errors(spec, args, message):
    with pytest.raises(BindingError) as info:
        kernel_tensors(spec, *args)
    assert message in str(info.value) and "'Up'" in str(info.value)


def test_a_shape_formula_giving_zero_is_refused(spec):
    """...saying why: an empty input, else the formula."""
    tensors = tuple(replace(t, shape="B,F,Y-1,X") if t.shape else t for t in spec.tensors)
    with pytest.raises(TensorError, match=r"output shape formula 'B,F,Y-1,X' gives \[1, 1, 0\] "
                                          r".*; every dim of an output is at least 1: check the "
                                          r"formula"):
        kernel_tensors(replace(spec, tensors=tensors), [TensorDesc((1, 1))] * 2,
                       data=[TensorDesc((1,))])
    tensors = tuple(replace(t, shape="B,F,Y,X") if t.shape else t for t in spec.tensors)
    with pytest.raises(TensorError, match=r"gives \[0, 1\] for input dims \[0, 1, 1, 1\]; an "
                                          r"input dim of 0 \(an empty batch or sequence\)"):
        kernel_tensors(replace(spec, tensors=tensors), [TensorDesc((0, 1))] * 2,
                       data=[TensorDesc((1,))])
