"""Built-in and user defines, golden text (SPEC section 3)."""
from __future__ import annotations

import pytest

from customlayers.config.diagnostics import Location
from customlayers.config.simplegpu.spec import DefineSpec, LayerSpec, TensorBinding, WorkSizesSpec
from customlayers.errors import DefineError
from customlayers.jit.defines import (builtin_defines, check_define_value, render_define,
                                      user_defines)
from customlayers.jit.tensor import TensorDesc

HERE = Location("layers.xml", 4, 9)


def spec_with(*defines: DefineSpec) -> LayerSpec:
    return LayerSpec(
        name="MyLayer", type="SimpleGPU", version="1", entry="k", sources=(), defines=defines,
        tensors=(TensorBinding(0, "input", 0, "BFYX", HERE),
                 TensorBinding(1, "output", 0, "BFYX", HERE)),
        data=(), compiler_options=(), work_sizes=WorkSizesSpec(None, None, ("output", 0), HERE),
        location=HERE)


def define(name, param=None, type=None, default=None) -> DefineSpec:
    return DefineSpec(name, param, type, default, HERE)


def text(pairs) -> str:
    return "\n".join(render_define(n, v) for n, v in pairs)


SPEC_EXAMPLE = """\
#define NUM_INPUTS 1
#define GLOBAL_WORKSIZE_SIZE 3
#define GLOBAL_WORKSIZE (ulong []){ 224,224,3, }
#define GLOBAL_WORKSIZE_INIT { 224,224,3, }
#define LOCAL_WORKSIZE_SIZE 0
#define LOCAL_WORKSIZE (ulong []){  }
#define LOCAL_WORKSIZE_INIT {  }
#define INPUT0_DIMS_SIZE 4
#define INPUT0_DIMS (int []){ 1,3,224,224, }
#define INPUT0_DIMS_INIT { 1,3,224,224, }
#define INPUT0_TYPE float
#define INPUT0_FORMAT_BFYX
#define INPUT0_LOWER_PADDING_SIZE 4
#define INPUT0_LOWER_PADDING (int []){ 0,0,0,0, }
#define INPUT0_LOWER_PADDING_INIT { 0,0,0,0, }
#define INPUT0_UPPER_PADDING_SIZE 4
#define INPUT0_UPPER_PADDING (int []){ 0,0,0,0, }
#define INPUT0_UPPER_PADDING_INIT { 0,0,0,0, }
#define INPUT0_PITCHES_SIZE 4
#define INPUT0_PITCHES (int []){ 150528,50176,224,1, }
#define INPUT0_PITCHES_INIT { 150528,50176,224,1, }
#define INPUT0_OFFSET 0"""


def test_spec_example_golden():
    t = TensorDesc((1, 3, 224, 224))
    got = text(builtin_defines([t], [t], (224, 224, 3), None))
    output_part = [line.replace("INPUT0", "OUTPUT0") for line in SPEC_EXAMPLE.splitlines()[7:]]
    assert got == SPEC_EXAMPLE + "\n" + "\n".join(output_part)


# padded 1x2x3x4, lower 0,1,1,2 upper 0,0,2,1 -> padded sizes B'=1 F'=3 Y'=6 X'=7
PADDED = dict(shape=(1, 2, 3, 4), lower_pad=(0, 1, 1, 2), upper_pad=(0, 0, 2, 1))


@pytest.mark.parametrize("fmt, pitches, offset", [
    ("BFYX", "126,42,7,1", 42 + 7 + 2),
    ("BYXF", "126,1,21,3", 1 + 21 + 6),
    ("YXFB", "1,1,21,3", 1 + 21 + 6),
    ("FYXB", "1,42,7,1", 42 + 7 + 2),
])
def test_padded_tensor_golden_in_every_format(fmt, pitches, offset):
    t = TensorDesc(dtype="f16", format=fmt, **PADDED)
    got = text(builtin_defines([t], [], (8,), (4,))).split("\n")
    assert got[:7] == [
        "#define NUM_INPUTS 1",
        "#define GLOBAL_WORKSIZE_SIZE 1",
        "#define GLOBAL_WORKSIZE (ulong []){ 8, }",
        "#define GLOBAL_WORKSIZE_INIT { 8, }",
        "#define LOCAL_WORKSIZE_SIZE 1",
        "#define LOCAL_WORKSIZE (ulong []){ 4, }",
        "#define LOCAL_WORKSIZE_INIT { 4, }",
    ]
    assert got[7:] == [
        "#define INPUT0_DIMS_SIZE 4",
        "#define INPUT0_DIMS (int []){ 1,2,3,4, }",
        "#define INPUT0_DIMS_INIT { 1,2,3,4, }",
        "#define INPUT0_TYPE half",
        f"#define INPUT0_FORMAT_{fmt}",
        "#define INPUT0_LOWER_PADDING_SIZE 4",
        "#define INPUT0_LOWER_PADDING (int []){ 0,1,1,2, }",
        "#define INPUT0_LOWER_PADDING_INIT { 0,1,1,2, }",
        "#define INPUT0_UPPER_PADDING_SIZE 4",
        "#define INPUT0_UPPER_PADDING (int []){ 0,0,2,1, }",
        "#define INPUT0_UPPER_PADDING_INIT { 0,0,2,1, }",
        "#define INPUT0_PITCHES_SIZE 4",
        f"#define INPUT0_PITCHES (int []){{ {pitches}, }}",
        f"#define INPUT0_PITCHES_INIT {{ {pitches}, }}",
        f"#define INPUT0_OFFSET {offset}",
    ]


def test_inputs_then_outputs_and_types():
    ins = [TensorDesc((2, 3), "i8"), TensorDesc((5,), "i64")]
    outs = [TensorDesc((2, 3), "u8"), TensorDesc((1,), "i32")]
    names = [n for n, _ in builtin_defines(ins, outs, (6,), None)]
    assert names[0] == "NUM_INPUTS"
    order = [n.split("_")[0] for n in names if n.endswith("_TYPE")]
    assert order == ["INPUT0", "INPUT1", "OUTPUT0", "OUTPUT1"]
    values = dict(builtin_defines(ins, outs, (6,), None))
    assert (values["NUM_INPUTS"], values["INPUT0_TYPE"], values["INPUT1_TYPE"],
            values["OUTPUT0_TYPE"], values["OUTPUT1_TYPE"]) == ("2", "char", "long", "uchar", "int")
    assert values["INPUT1_DIMS"] == "(int []){ 5,1,1,1, }"     # rank < 4 padded with 1 at the end


# -- user defines ------------------------------------------------------------------------------

def test_attribute_text_is_kept_exactly():
    spec = spec_with(define("eps", "epsilon", "float", "1e-5"), define("slope", "s", "float"))
    assert user_defines(spec, {"epsilon": "3e-08", "s": "0.1000000001"}) == [
        ("eps", "3e-08"), ("slope", "0.1000000001")]
    assert user_defines(spec, {})[0] == ("eps", "1e-5")        # default when no attribute


def test_rules_of_user_defines():
    spec = spec_with(define("NUM 3"), define("flag", "f", "int"), define("tiles", "tiles"),
                     define("dims", "d", "int[]", "1,2"), define("w", "w", "float[]"),
                     define("raw", "r", None))
    got = user_defines(spec, {"f": "true", "w": "0.5, 1e-7,2.0f", "r": "foo(1)"})
    assert got == [("NUM 3", ""), ("flag", "1"), ("tiles", ""), ("dims", "(int[]) {1,2}"),
                   ("w", "(float[]) {0.5, 1e-7,2.0f}"), ("raw", "foo(1)")]
    lines = [render_define(n, v, user=True) for n, v in got]
    assert lines[0] == "#define NUM 3 "
    assert lines[2] == "#define tiles "      # no value, as OpenVINO: Tile relies on it


@pytest.mark.parametrize("value, type", [
    ("1.0f", "float"), ("1e-7", "float"), ("0x10", "int"), ("-3", "int"), ("+2.5F", "float"),
    ("10u", "int"), ("3", "float"), (".5", "float"), ("1.", "float"), ("false", "int"),
    ("1,2,3", "int[]"), ("anything", None), ("anything", "string"),
])
def test_values_that_fit(value, type):
    assert check_define_value(value, type) is None


@pytest.mark.parametrize("value, type, problem", [
    ("1f", "float", "'1f' is not a float literal of OpenCL C (for example 0.5, 1.0f, 1e-7, -3, "
                    "+2.5F)"),
    ("1.5", "int", "'1.5' is not an int literal of OpenCL C (for example 3, -3, 0x10, 10u)"),
    ("", "int", "an empty value is not an int"),
    ("1,,3", "int[]", "element 2 of 3: an empty value is not an int"),
])
def test_values_that_do_not_fit(value, type, problem):
    assert check_define_value(value, type) == problem


def test_bad_attribute_names_layer_define_and_attribute():
    spec = spec_with(define("eps", "epsilon", "float", "1e-5"))
    with pytest.raises(DefineError) as info:
        user_defines(spec, {"epsilon": "small"})
    assert str(info.value) == (
        "layers.xml:4:9: layer 'MyLayer', define 'eps' (type float): attribute epsilon=\"small\" "
        "does not fit: 'small' is not a float literal of OpenCL C (for example 0.5, 1.0f, 1e-7, "
        "-3, +2.5F)")


@pytest.mark.parametrize("desc, name, value", [
    (TensorDesc((2147483648, 2)), "INPUT0_DIMS", 2147483648),
    (TensorDesc((2, 65536, 65536)), "INPUT0_PITCHES", 4294967296),
    # every pitch fits (b: 2**30), the offset of two padded batches does not
    (TensorDesc((1, 1, 32768, 32768), lower_pad=(2, 0, 0, 0)), "INPUT0_OFFSET", 2147483648),
    (TensorDesc((1, 2), lower_pad=(0, 0, 0, 2147483648)), "INPUT0_LOWER_PADDING", 2147483648),
])
def test_values_over_int_are_refused(desc, name, value):
    from customlayers.errors import TensorError
    from customlayers.jit.defines import tensor_defines
    with pytest.raises(TensorError) as info:
        tensor_defines("INPUT0", desc)
    assert str(info.value).startswith(f"tensor INPUT0 ({desc.describe()}): ")
    assert f"{name} would hold {value}, over 2147483647" in str(info.value)


def test_values_at_int_max_are_emitted():
    from customlayers.jit.defines import tensor_defines
    got = dict(tensor_defines("OUTPUT1", TensorDesc((2147483647,))))
    assert got["OUTPUT1_DIMS"] == "(int []){ 2147483647,1,1,1, }"


@pytest.mark.parametrize("value, problem", [
    ("0.1\n#error injected", "control character '\\n' at position 4 is not allowed"),
    ("0.1\r#error injected", "control character '\\r' at position 4 is not allowed"),
    ("1\x0b2", "control character '\\x0b' at position 2 is not allowed"),
    ("0.1 \\", "a final backslash is not allowed"),
])
def test_values_that_would_inject_program_text_are_refused(value, problem):
    for type_ in ("float", None, "string"):
        assert problem in check_define_value(value, type_)
    spec = spec_with(define("s", "s", None))
    with pytest.raises(DefineError) as info:
        user_defines(spec, {"s": value})
    message = str(info.value)
    assert message.startswith("layers.xml:4:9: layer 'MyLayer', define 's' (type None): "
                              "attribute s=\"")
    assert problem in message and "\n" not in message and "\r" not in message


def test_tabs_and_inner_backslashes_are_kept():
    spec = spec_with(define("s", "s", None))
    assert user_defines(spec, {"s": "a\tb \\ c"}) == [("s", "a\tb \\ c")]


@pytest.mark.parametrize("text", ["1e999", "-4e38", "3.5e38f", "0x1p200", "3.4028236e38"])
def test_a_float_past_floats_range_is_refused(text):
    """--param bias=1e999 ran with every output inf and a hint about out-of-bounds kernels (a
    new-user trial); the literal is refused where it is given."""
    from customlayers.config.simplegpu.define_values import check_define_value
    problem = check_define_value(text, "float")
    assert problem is not None and "is out of the range of float (at most 3.4028235e+38 in " \
                                   "magnitude)" in problem


@pytest.mark.parametrize("text", ["3.4e38", "-3.4028234e38", "1e-45", "0.0", "2",
                                  "3.4028235e38", "3.40282347e+38", "-3.4028235e+38f"])
def test_floats_in_range_pass(text):
    """FLT_MAX as numpy and ONNX print it (3.4028235e38, a "no clamp" value) rounds to FLT_MAX
    in OpenCL C: it is in range (a review found it refused)."""
    from customlayers.config.simplegpu.define_values import check_define_value
    assert check_define_value(text, "float") is None


def test_a_decimal_literal_longer_than_pythons_limit_is_infinity_not_a_traceback():
    """5,000 digits (a fuzzed config, stop 41): Python refuses decimal text past 4,300 digits
    with a ValueError; the value is past any double, so infinity, which the float check names."""
    from customlayers.config.simplegpu.define_values import check_define_value, numeric_value
    big = "9" * 5000
    assert numeric_value(big) == float("inf") and numeric_value("-" + big) == float("-inf")
    assert numeric_value("0" * 400 + "7") == 7                # leading zeros are not magnitude
    assert numeric_value("9" * 300) == int("9" * 300)         # exact where Python can be
    assert "out of the range of float" in check_define_value(big, "float")
