"""The one dtype table (customlayers/dtypes.py): every record agrees with numpy, OpenCL C and
ONNX, and every spelling of a type leads back to it."""
import numpy as np
import onnx
import pytest

from customlayers import dtypes
from customlayers.errors import TensorError
from customlayers.jit.tensor import TensorDesc, normalize_dtype

# sizes of OpenCL C scalar types (OpenCL C spec 6.1.1: fixed, unlike C's)
CL_SIZES = {"char": 1, "uchar": 1, "short": 2, "ushort": 2, "int": 4, "uint": 4, "long": 8,
            "ulong": 8, "half": 2, "float": 4, "double": 8}


@pytest.mark.parametrize("t", dtypes.TYPES, ids=lambda t: t.name)
def test_record_is_consistent(t):
    assert t.np_dtype.itemsize == t.itemsize == CL_SIZES[t.cl_type]
    assert t.is_float == (t.np_dtype.kind == "f") == (t.cl_type in ("half", "float", "double"))
    assert onnx.helper.tensor_dtype_to_np_dtype(t.onnx) == t.np_dtype
    assert onnx.TensorProto.DataType.Name(t.onnx) == t.onnx_name
    # the contract's <T>_TYPE list (SPEC section 3): float|half|char|uchar|int|long
    assert t.custom_layer == (t.cl_type in ("float", "half", "char", "uchar", "int", "long"))


@pytest.mark.parametrize("t", dtypes.TYPES, ids=lambda t: t.name)
def test_every_spelling_round_trips(t):
    for text in (t.name, t.name.upper(), t.cl_type, f" {t.np_dtype.name} ", *t.aliases):
        assert dtypes.from_text(text) == t.name == normalize_dtype(text)
    assert dtypes.from_numpy(t.np_dtype) == dtypes.from_numpy(t.np_dtype.type) == t.name
    assert dtypes.from_cl_type(t.cl_type) == t.name
    assert dtypes.ONNX_TYPES[t.onnx] == t.name
    if t.ir_precision is not None:
        assert dtypes.IR_PRECISIONS[t.ir_precision] == t.name
        assert dtypes.IR_ELEMENT_TYPES[t.ir_element_type] == t.name
    desc = TensorDesc((2, 3), t.name)
    assert (desc.np_dtype, desc.cl_type, desc.itemsize) == (t.np_dtype, t.cl_type, t.itemsize)


def test_booleans_are_held_as_u8():
    assert dtypes.from_numpy(np.bool_) == dtypes.ONNX_TYPES[onnx.TensorProto.BOOL] == "u8"
    assert dtypes.IR_PRECISIONS["BOOL"] == dtypes.IR_PRECISIONS["BOOLEAN"] == "u8"
    assert dtypes.IR_ELEMENT_TYPES["boolean"] == "u8"
    assert dtypes.from_text("bool") == dtypes.from_text("Boolean") == "u8"


def test_other_types_are_none_of_ours():
    assert dtypes.from_text("bf16") is None and dtypes.from_numpy(np.complex64) is None
    assert dtypes.from_numpy("not a type") is None and dtypes.from_cl_type("uint4") is None
    assert not dtypes.is_float("") and not dtypes.is_float("i64") and dtypes.is_float("f16")
    assert not dtypes.is_float("u64") and not dtypes.is_float("i16")
    with pytest.raises(TensorError, match="element type 'bf16' is not one of f32, f16, i8, u8, "
                                          "i16, u16, i32, u32, i64, u64, f64"):
        normalize_dtype("bf16")


@pytest.mark.parametrize("name,cl,ir,onnx_code", [("i16", "short", "I16", 5),
                                                  ("u16", "ushort", "U16", 4),
                                                  ("u32", "uint", "U32", 12),
                                                  ("u64", "ulong", "U64", 13)])
def test_the_wider_integers(name, cl, ir, onnx_code):
    assert dtypes.cl_type_of(name) == cl and dtypes.IR_PRECISIONS[ir] == name
    assert dtypes.ONNX_TYPES[onnx_code] == name and dtypes.IR_ELEMENT_TYPES[name] == name
    assert name not in dtypes.CUSTOM_LAYER_DTYPES      # not a <T>_TYPE of SPEC section 3


def test_lists_in_the_order_messages_name_them():
    assert list(dtypes.IR_PRECISIONS) == ["FP32", "FP16", "I64", "I32", "I16", "I8", "U64",
                                          "U32", "U16", "U8", "BOOL", "BOOLEAN"]
    assert list(dtypes.IR_ELEMENT_TYPES) == ["f32", "f16", "i64", "i32", "i16", "i8", "u64",
                                             "u32", "u16", "u8", "boolean"]
    assert dtypes.ONNX_SUPPORTED_TEXT == ("FLOAT, FLOAT16, DOUBLE, INT64, INT32, INT16, INT8, "
                                          "UINT64, UINT32, UINT16, UINT8, BOOL")
    assert dtypes.CUSTOM_LAYER_DTYPES == ("f32", "f16", "i8", "u8", "i32", "i64")


# -- float16 as storage: the float copies a built-in op runs on (ops/half_storage.py) ----------
def _call(inputs, declared, op_type="Add", **raw):
    from customlayers.jit.layer import LayerCall
    from customlayers.ops import _modules  # noqa: F401 - registers the built-ins
    from customlayers.ops.base import get_op
    op = get_op(op_type)
    return op, LayerCall(name="n", where="node 0 'n'", type=op_type,
                         attrs=op.parse_attributes(raw, "n"), inputs=inputs, consts={},
                         declared=declared)


def test_half_work_widens_inputs_and_narrows_outputs_around_the_op():
    from customlayers.ops import half_storage
    half = TensorDesc((2, 3), "f16")
    op, call = _call([half, TensorDesc((3,), "f16")], [((2, 3), "f16")])
    assert half_storage.touches_half(call)
    outs = half_storage.half_outputs(op, call)
    assert [o.dtype for o in outs] == ["f16"]
    work = half_storage.half_work(op, call, outs)
    entries = [s.entry for s in work.stages]
    assert entries == ["half_to_float", "half_to_float", "binary_map", "float_to_half"]
    widen_a, widen_b, add, narrow = work.stages
    assert widen_a.inputs == [("in", 0)] and narrow.outputs == [("out", 0)]
    # the op reads and writes only float temporaries
    assert add.inputs == [widen_a.outputs[0], widen_b.outputs[0]]
    assert add.outputs == narrow.inputs
    assert {d.dtype for d in (*add.input_descs, *add.output_descs)} == {"f32"}
    assert work.temps[add.outputs[0][1]] == TensorDesc((2, 3), "f32")
    # half only behind pointers: the programs do not enable cl_khr_fp16
    assert all("cl_khr_fp16" not in launch.source for s in work.stages for launch in s.launches)


@pytest.mark.parametrize("declared,want", [("f16", "f16"), ("", "f16"), ("f32", "f32")])
def test_a_float_output_of_half_inputs_is_held_in_half(declared, want):
    # MaxPool answers f32 for float input; the model holds its output in half
    from customlayers.ops import half_storage
    op, call = _call([TensorDesc((1, 1, 4, 4), "f16")], [((1, 1, 2, 2), declared)], "MaxPool",
                     strides="2,2", pads_begin="0,0", pads_end="0,0", kernel="2,2")
    assert [o.dtype for o in half_storage.half_outputs(op, call)] == [want]


def test_integers_and_floats_untouched_by_half_storage():
    from customlayers.ops import half_storage
    _, call = _call([TensorDesc((2,), "u16"), TensorDesc((2,), "u16")], [((2,), "u16")])
    assert not half_storage.touches_half(call)
    assert half_storage.float_call(call).inputs == call.inputs
