"""Malformed models through the public reader (customlayers.graph.load.read_model): each class of
defect the readers once answered with IndexError, KeyError, ValueError, TypeError, MemoryError
or a silent empty graph is a ModelError that names the node (and for IR the file:line) and says
what was expected. `unchecked` errors (graph/guard.py's net) do not count: every case here must
be met by an explicit check."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from customlayers.errors import ModelError
from customlayers.graph.guard import is_unchecked
from customlayers.graph.load import read_model
from customlayers.graph.onnx.table import TRANSLATIONS
from customlayers.graph.onnx.ops.arith import BINARY, UNARY

DATA = Path(__file__).resolve().parent.parent / "data" / "models"
TINY_XML = (DATA / "tiny.xml").read_text()
TINY_BIN = (DATA / "tiny.bin").read_bytes()


def refused(path, *needles: str) -> str:
    """read_model(path) raises a checked ModelError whose message holds every needle."""
    with pytest.raises(ModelError) as info:
        read_model(path)
    assert not is_unchecked(info.value), f"no explicit check met it: {info.value}"
    text = str(info.value)
    for needle in needles:
        assert needle in text, f"{needle!r} not in: {text}"
    return text


# -- IR ----------------------------------------------------------------------------------------
def ir(tmp_path, old: str, new: str, weights: bytes = TINY_BIN) -> Path:
    """tiny.xml with one thing changed, written with its .bin."""
    assert old in TINY_XML, old
    (tmp_path / "model.xml").write_text(TINY_XML.replace(old, new, 1))
    (tmp_path / "model.bin").write_bytes(weights)
    return tmp_path / "model.xml"


def line_of(path: Path, needle: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


@pytest.mark.parametrize("dim", ["abc", "-5", "2147483648", "9" * 5000, "\u00b2", "1e3", "0x4"])
def test_ir_dim_that_is_not_a_size(tmp_path, dim):
    path = ir(tmp_path, "<dim>1</dim><dim>3</dim><dim>4</dim><dim>4</dim>",
              f"<dim>1</dim><dim>{dim}</dim><dim>4</dim><dim>4</dim>")
    text = refused(path, f"{path}:{line_of(path, dim[:40])}", "layer 'x' (Parameter)",
                   "is not a size", "expected an integer from 0 to 2147483647")
    assert len(text) < 400                     # a 5,000-digit dim is shown by its start


def test_ir_port_with_astronomic_element_count(tmp_path):
    path = ir(tmp_path, "<dim>1</dim><dim>3</dim><dim>4</dim><dim>4</dim>",
              "<dim>2000000000</dim><dim>2000000000</dim><dim>4</dim><dim>4</dim>")
    refused(path, "layer 'x' (Parameter)", "over the limit of 2**40")


@pytest.mark.parametrize("shape", ["4294967296,4294967296,4294967296", "1,-3,1,1", "1,x,1,1"])
def test_ir_const_shape_that_overflows_or_is_not_sizes(tmp_path, shape):
    path = ir(tmp_path, 'shape="1, 3, 1, 1" offset="0" size="12"',
              f'shape="{shape}" offset="0" size="12"')
    refused(path, f"{path}:{line_of(path, 'name=' + chr(34) + 'bias')}", "layer 'bias' (Const)")


@pytest.mark.parametrize("offset,size,expected", [
    ("0", "13", "size=13 bytes does not match shape [1, 3, 1, 1]"),
    ("20", "12", "is past the end of"),
    ("9" * 5000, "12", "is not a byte count"),
    ("-4", "12", "is not a byte count"),
])
def test_ir_const_bytes_that_disagree_with_the_bin(tmp_path, offset, size, expected):
    path = ir(tmp_path, 'offset="0" size="12"', f'offset="{offset}" size="{size}"')
    refused(path, "layer 'bias' (Const)", expected)


def test_ir_result_in_mid_graph(tmp_path):
    """A Result with an output port could feed other layers: refused where it is declared."""
    path = ir(tmp_path, '<layer id="7" name="y" type="Result" version="opset1">',
              '<layer id="7" name="y" type="Result" version="opset1"><output><port id="5">'
              '<dim>1</dim></port></output>')
    refused(path, f"{path}:{line_of(path, 'type=' + chr(34) + 'Result')}", "layer 'y' (Result)",
            "a Result has 0 output port(s), found 1")


def test_ir_edge_to_a_missing_port(tmp_path):
    path = ir(tmp_path, 'to-layer="7" to-port="0"', 'to-layer="7" to-port="3"')
    refused(path, f"{path}:{line_of(path, 'to-port=' + chr(34) + '3')}", "layer 'y' (Result)",
            "has no input port with that id")


# -- ONNX --------------------------------------------------------------------------------------
def vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def save(tmp_path, nodes, inputs, outputs, inits=(), opset=13) -> Path:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    return path


def relu_model(tmp_path, inits=(), extra=()) -> Path:
    return save(tmp_path, [helper.make_node("Relu", ["x"], ["y"], name="r"), *extra],
                [vi("x", [1, 3])], [vi("y", [1, 3])], inits)


def test_empty_onnx_file_is_not_an_empty_model(tmp_path):
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")
    refused(path, str(path), "empty file")


def test_truncated_onnx_file(tmp_path):
    path = relu_model(tmp_path)
    path.write_bytes(path.read_bytes()[:-7])
    refused(path, str(path), "not an ONNX model")


def test_onnx_without_outputs(tmp_path):
    path = save(tmp_path, [helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [1])], [])
    refused(path, "has no outputs")


def all_translated_ops() -> list[str]:
    return sorted(set(TRANSLATIONS) | set(UNARY) | set(BINARY))


@pytest.mark.parametrize("op", all_translated_ops())
def test_every_translated_op_checks_its_input_count(tmp_path, op):
    """Each translation meets a node with fewer inputs than its op needs (or, for ops without
    required inputs, more than it takes) with a message naming the node, never an IndexError."""
    # opset 18, or the op's first opset where it is newer (RMSNormalization: 23)
    opset = max(18, onnx.defs.get_schema(op, "").since_version)
    schema = onnx.defs.get_schema(op, opset, "")
    count = schema.min_input - 1 if schema.min_input else schema.max_input + 1
    inputs = ["x"] * count
    outputs = ["y"] + [f"extra{k}" for k in range(schema.min_output - 1)]
    path = save(tmp_path, [helper.make_node(op, inputs, outputs, name="the_node")],
                [vi("x", [1, 2, 4, 4])], [vi("y", None)], opset=opset)
    refused(path, "node 0 'the_node'", f"({op})", f"has {count} input(s); {op}-")


@pytest.mark.parametrize("op,attrs,missing", [
    ("Cast", {}, "to"), ("DepthToSpace", {}, "blocksize"), ("LRN", {}, "size"),
])
def test_required_attribute_missing(tmp_path, op, attrs, missing):
    path = save(tmp_path, [helper.make_node(op, ["x"], ["y"], name="n1", **attrs)],
                [vi("x", [1, 4, 2, 2])], [vi("y", None)])
    refused(path, f"node 0 'n1' ({op})", f"requires the attribute(s) {missing}")


def test_attribute_of_the_wrong_type(tmp_path):
    path = save(tmp_path, [helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=1.5)],
                [vi("x", [1, 4])], [vi("y", [1, 4])])
    refused(path, "node 0 'sm' (Softmax)", "attribute 'axis' is of type FLOAT",
            "Softmax-13 expects INT")


def test_attribute_name_unknown_to_the_op(tmp_path):
    path = save(tmp_path, [helper.make_node("Softmax", ["x"], ["y"], name="sm", axs=1)],
                [vi("x", [1, 4])], [vi("y", [1, 4])])
    refused(path, "node 0 'sm' (Softmax)", "has no attribute 'axs'; its attributes: axis")


def test_attribute_given_twice(tmp_path):
    node = helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=1)
    node.attribute.append(node.attribute[0])
    path = save(tmp_path, [node], [vi("x", [1, 4])], [vi("y", [1, 4])])
    refused(path, "node 0 'sm' (Softmax)", "attribute 'axis' is given twice")


def weight_model(tmp_path, tensor: TensorProto) -> Path:
    return save(tmp_path, [helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                [vi("x", [1, 3])], [vi("y", [1, 3])], [tensor])


@pytest.mark.parametrize("edit,expected", [
    (lambda t: setattr(t, "raw_data", t.raw_data[:-4]), "holds 8 bytes of raw_data; dims [3]"),
    (lambda t: setattr(t, "raw_data", t.raw_data + b"\0" * 4),
     "holds 16 bytes of raw_data; dims [3]"),
    (lambda t: (t.ClearField("raw_data"), t.float_data.extend([1.0] * 4)),
     "holds 4 values in float_data; dims [3] of FLOAT need 3"),
    (lambda t: (t.dims.__setitem__(0, -3)), "dim -3 is negative"),
    (lambda t: (t.dims.__setitem__(0, 2**40)), "over the limit"),
    (lambda t: setattr(t, "data_type", 99), "element type unknown (99)"),
    (lambda t: setattr(t, "data_type", TensorProto.BFLOAT16), "element type BFLOAT16"),
])
def test_initializer_data_that_disagrees_with_its_dims_or_type(tmp_path, edit, expected):
    w = numpy_helper.from_array(np.arange(3, dtype=np.float32), "w")
    edit(w)
    refused(weight_model(tmp_path, w), "initializer 'w'", expected)


def test_external_data_shorter_than_the_dims(tmp_path):
    w = numpy_helper.from_array(np.arange(3, dtype=np.float32), "w")
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")], "g", [vi("x", [1, 3])],
        [vi("y", [1, 3])], [w]), opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, str(tmp_path / "m.onnx"), save_as_external_data=True,
              location="w.bin", size_threshold=0)
    data = tmp_path / "w.bin"
    data.write_bytes(data.read_bytes()[:8])
    # onnx checks the length its external_data entry gives; without one, the reader does
    refused(tmp_path / "m.onnx", "m.onnx", "external data", "'w'")
    model = onnx.load(str(tmp_path / "m.onnx"), load_external_data=False)
    entries = model.graph.initializer[0].external_data
    keep = [(e.key, e.value) for e in entries if e.key != "length"]
    del entries[:]
    for key, value in keep:
        entries.add(key=key, value=value)
    onnx.save(model, str(tmp_path / "m.onnx"))
    refused(tmp_path / "m.onnx", "initializer 'w'", "holds 8 bytes of raw_data; dims [3]")


def test_name_that_is_not_utf8(tmp_path):
    raw = relu_model(tmp_path).read_bytes().replace(b"\x12\x01y", b"\x12\x01\xff", 1)
    path = tmp_path / "bad.onnx"
    path.write_bytes(raw)
    refused(path, "node 0 'r' (Relu)", "output[0] b'\\xff' is not valid UTF-8")


@pytest.mark.parametrize("shape,expected", [
    ([2, -3], "negative or too large"), ([2**31, 2**31], "negative or too large"),
    ([[2]], "must be a 1-D integer tensor"),
])
def test_constant_of_shape_negative_or_astronomic(tmp_path, shape, expected):
    path = save(tmp_path, [helper.make_node("ConstantOfShape", ["s"], ["c"], name="cos"),
                           helper.make_node("Add", ["x", "c"], ["y"], name="add")],
                [vi("x", [1])], [vi("y", None)],
                [numpy_helper.from_array(np.array(shape, np.int64), "s")])
    refused(path, "node 0 'cos' (ConstantOfShape)", expected)


@pytest.mark.parametrize("dim", [-2, 2**31, 2**62])
def test_declared_dims_out_of_bounds(tmp_path, dim):
    path = save(tmp_path, [helper.make_node("Relu", ["x"], ["y"], name="r")],
                [vi("x", [1, dim])], [vi("y", None)])
    refused(path, "graph input 'x'", f"dim {dim}")


def test_op_outside_the_models_opset(tmp_path):
    path = save(tmp_path, [helper.make_node("Expand", ["x", "s"], ["y"], name="ex")],
                [vi("x", [1])], [vi("y", None)],
                [numpy_helper.from_array(np.array([2], np.int64), "s")], opset=7)
    refused(path, "node 0 'ex' (Expand)", "not an op of opset 7", "from opset 8 on")


def test_value_produced_twice(tmp_path):
    path = save(tmp_path, [helper.make_node("Relu", ["x"], ["y"], name="r1"),
                           helper.make_node("Sigmoid", ["x"], ["y"], name="r2")],
                [vi("x", [1])], [vi("y", [1])])
    refused(path, "node 1 'r2' (Sigmoid)", "output 'y' is already produced")


def test_custom_node_taking_a_structural_type(tmp_path):
    node = helper.make_node("Result", ["x"], ["y"], name="res", domain="com.example")
    graph = helper.make_graph([node], "g", [vi("x", [1])], [vi("y", [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid("com.example", 1)])
    onnx.save(model, str(tmp_path / "m.onnx"))
    refused(tmp_path / "m.onnx", "node 0 'res' (Result)", "rename the op type")


@pytest.mark.parametrize("node,inits,expected", [
    (helper.make_node("Conv", ["x", "w"], ["y"], name="n", group=0), {"w": (4, 2, 1, 1)},
     "group 0 does not divide"),
    (helper.make_node("Conv", ["x", "w"], ["y"], name="n", pads=[1, 1]), {"w": (4, 2, 1, 1)},
     "'pads' has 2 values; 4 are needed"),
    (helper.make_node("Conv", ["x", "w"], ["y"], name="n", auto_pad="SAME"),
     {"w": (4, 2, 1, 1)}, "auto_pad='SAME' is not one of"),
    (helper.make_node("Transpose", ["x"], ["y"], name="n", perm=[0, 1, 1, 2]), {},
     "is not a permutation"),
    (helper.make_node("Softmax", ["x"], ["y"], name="n", axis=7), {}, "axis 7 is out of range"),
    (helper.make_node("Gather", ["c", "i"], ["y"], name="n"), {"c": (3,), "i": [5]},
     "indices must be integers from -3 to 2"),
    (helper.make_node("Split", ["x", "s"], ["y", "z"], name="n", axis=1), {"s": [3, -1]},
     "include a negative size"),
    (helper.make_node("DepthToSpace", ["x"], ["y"], name="n", blocksize=0), {},
     "blocksize 0 is not a positive size"),
    (helper.make_node("Slice", ["c", "a", "b", "ax", "st"], ["y"], name="n"),
     {"c": (3,), "a": [0], "b": [2], "ax": [0], "st": [0]}, "a step of 0"),
])
def test_translations_check_attribute_and_constant_values(tmp_path, node, inits, expected):
    tensors = []
    for name, spec in inits.items():
        value = np.ones(spec, np.float32) if isinstance(spec, tuple) else np.array(spec, np.int64)
        tensors.append(numpy_helper.from_array(value, name))
    path = save(tmp_path, [node], [vi("x", [1, 2, 4, 4])],
                [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in node.output],
                tensors)
    refused(path, f"node 0 'n' ({node.op_type})", expected)


def test_messages_never_carry_a_python_repr_of_internals(tmp_path):
    """The net of graph/guard.py is for what no check foresaw; its words say where."""
    path = tmp_path / "m.onnx"
    path.write_bytes(b"\x08\x07\x12\x04junk")          # ir_version 7, then a broken field
    text = refused(path, str(path))
    assert not re.search(r"<\w+ object at 0x", text)
