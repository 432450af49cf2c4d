"""The OpenVINO IR reader: a real converted model checked against openvino's own reading, and one
test per malformed-model error on tiny hand-written IRs (tests/data/models/)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from customlayers.errors import ModelError
from customlayers.graph import read_ir, read_ir_string
from customlayers.graph.ir import parse_shape_text

DATA = Path(__file__).resolve().parent.parent / "data" / "models"
TINY_XML = (DATA / "tiny.xml").read_text()
TINY_BIN = (DATA / "tiny.bin").read_bytes()


def line_of(text: str, needle: str) -> int:
    """1-based line of the first line containing `needle`."""
    for number, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in the text")


def layer_line(text: str, name: str) -> int:
    return line_of(text, f'name="{name}"')


def write_model(tmp_path: Path, xml: str, weights: bytes | None = TINY_BIN) -> Path:
    path = tmp_path / "model.xml"
    path.write_text(xml)
    if weights is not None:
        (tmp_path / "model.bin").write_bytes(weights)
    return path


def broken(old: str, new: str, count: int = 1) -> str:
    """tiny.xml with one thing changed (the test fails loudly if the edit does not apply)."""
    assert TINY_XML.count(old) >= count, old
    return TINY_XML.replace(old, new, count)


# -- a valid model ----------------------------------------------------------------------------
def test_tiny_model_reads_nodes_ports_edges_and_constants():
    g = read_ir(DATA / "tiny.xml")
    assert g.name == "tiny"
    assert [n.type for n in g] == ["Parameter", "Const", "Add", "ReLU", "GRN", "Const", "Reshape",
                                   "Result"]
    add = g.nodes["2"]
    assert [p.shape for p in add.inputs] == [(1, 3, 4, 4), (1, 3, 1, 1)]
    assert add.outputs[0].shape == (1, 3, 4, 4) and add.outputs[0].dtype == "f32"
    # port ids 0,1 (inputs) and 2 (output) become input indices 0,1 and output index 0
    assert g.producer("2", 1) == ("1", 0)
    assert g.producer("6", 0) == ("4", 0)
    bias = g.nodes["1"].value
    assert bias.dtype == np.float32 and bias.shape == (1, 3, 1, 1)
    np.testing.assert_array_equal(bias.ravel(), [1, 2, 3])
    shape = g.nodes["5"].value
    assert shape.dtype == np.int64 and shape.tolist() == [1, 48]
    assert g.nodes["5"].outputs[0].dtype == "i64"
    # attributes stay text exactly as written (no float rounding)
    assert g.nodes["4"].attrs == {"bias": "1e-06"}
    assert g.nodes["0"].outputs[0].names == ("x",)
    assert g.nodes["4"].location == f"{DATA / 'tiny.xml'}:{layer_line(TINY_XML, 'grn')}"
    assert [n.name for n in g.parameters] == ["x"] and [n.name for n in g.results] == ["y"]


def test_read_ir_string_matches_reading_the_file():
    g = read_ir_string(TINY_XML, TINY_BIN, name="tiny-in-memory")
    assert len(g) == 8 and len(g.edges) == 7
    assert g.nodes["2"].location.startswith("tiny-in-memory:")


def test_dynamic_dims_and_scalar_constants(tmp_path):
    xml = broken('<data shape="1,3,4,4" element_type="f32"/>',
                 '<data shape="?,3,1..10,4" element_type="f32"/>')
    xml = xml.replace("<dim>1</dim><dim>3</dim><dim>4</dim><dim>4</dim>\n\t\t\t\t</port>\n"
                      "\t\t\t</output>\n\t\t</layer>\n\t\t<layer id=\"1\"",
                      "<dim>-1</dim><dim>3</dim><dim>-1</dim><dim>4</dim>\n\t\t\t\t</port>\n"
                      "\t\t\t</output>\n\t\t</layer>\n\t\t<layer id=\"1\"", 1)
    g = read_ir(write_model(tmp_path, xml))
    assert g.nodes["0"].outputs[0].shape == (None, 3, None, 4)
    assert parse_shape_text("", allow_dynamic=False) == ()
    assert parse_shape_text("..8, 2.., -1", allow_dynamic=True) == (None, None, None)
    assert parse_shape_text("-1", allow_dynamic=False) is None


def test_scalar_const(tmp_path):
    xml = broken('<data element_type="f32" shape="1, 3, 1, 1" offset="0" size="12"/>',
                 '<data element_type="f32" shape="" offset="4" size="4"/>')
    xml = xml.replace("<dim>1</dim><dim>3</dim><dim>1</dim><dim>1</dim>", "", 2)
    g = read_ir(write_model(tmp_path, xml))
    value = g.nodes["1"].value
    assert value.shape == () and value == np.float32(2)


# -- a converted real model, against openvino's own reading -----------------------------------
@pytest.fixture(scope="module")
def resnet50_ir():
    pytest.importorskip("openvino")        # converts the model; a test-only dependency
    models = pytest.importorskip("models")
    return models.light_ir("resnet50")


def test_resnet50_matches_openvino(resnet50_ir):
    ov = pytest.importorskip("openvino")  # a test-only oracle
    g = read_ir(resnet50_ir)
    model = ov.Core().read_model(str(resnet50_ir))
    ops = {op.get_friendly_name(): op for op in model.get_ordered_ops()}
    assert len(g) == len(ops) == 288
    by_name = {n.name: n for n in g}
    assert set(by_name) == set(ops)
    renamed = {"Relu": "ReLU", "Softmax": "SoftMax", "Constant": "Const"}   # IR spelling
    counts: dict[str, int] = {}
    for name, op in ops.items():
        node = by_name[name]
        assert node.type == renamed.get(op.get_type_name(), op.get_type_name()), name
        counts[node.type] = counts.get(node.type, 0) + 1
        assert len(node.inputs) == op.get_input_size()
        # openvino's Result has an output inside the library; the IR (and the Graph) has none
        assert len(node.outputs) == (0 if node.type == "Result" else op.get_output_size())
        for i, port in enumerate(node.outputs):
            assert port.shape == tuple(op.get_output_partial_shape(i).to_shape()), name
            assert port.dtype == {"f32": "f32", "i64": "i64", "i32": "i32"}[
                op.get_output_element_type(i).get_type_name()], name
        for i, inp in enumerate(op.inputs()):
            src = inp.get_source_output()
            src_id, src_port = g.producer(node.id, i)
            assert g.nodes[src_id].name == src.get_node().get_friendly_name()
            assert src_port == src.get_index()
        if node.type == "Const":
            np.testing.assert_array_equal(node.value, op.get_data())
            assert node.value.dtype == op.get_data().dtype
    assert counts["Convolution"] == 53 and counts["ReLU"] == 49 and counts["Const"] == 109
    assert len(g.topological_order()) == 288


# -- errors, one per problem -------------------------------------------------------------------
def expect_error(path_or_xml, *fragments, weights=TINY_BIN):
    with pytest.raises(ModelError) as info:
        if isinstance(path_or_xml, Path):
            read_ir(path_or_xml)
        else:
            read_ir_string(path_or_xml, weights, name="m.xml")
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in: {message}"
    return message


def test_missing_bin_names_the_file_and_the_const(tmp_path):
    path = write_model(tmp_path, TINY_XML, weights=None)
    expect_error(path, f"{path}:{layer_line(TINY_XML, 'bias')}", "layer 'bias' (Const)",
                 f"needs the weights file {tmp_path / 'model.bin'}, which does not exist")


def test_short_bin(tmp_path):
    path = write_model(tmp_path, TINY_XML, weights=TINY_BIN[:20])
    expect_error(path, "layer 'target_shape' (Const)",
                 "offset 12 + size 16 = 28 is past the end of", "(20 bytes)")


def test_offset_past_end():
    xml = broken('offset="12" size="16"', 'offset="24" size="16"')
    expect_error(xml, f"m.xml:{layer_line(xml, 'target_shape')}",
                 "offset 24 + size 16 = 40 is past the end")


def test_size_not_matching_shape():
    xml = broken('shape="1, 3, 1, 1" offset="0" size="12"', 'shape="1, 3, 1, 1" offset="0" size="8"')
    expect_error(xml, "layer 'bias' (Const)", "size=8 bytes does not match shape [1, 3, 1, 1] x 4 "
                 "bytes per element = 12 bytes")


@pytest.mark.parametrize("element_type", ["f64", "u1", "bf16"])
def test_unsupported_const_element_type(element_type):
    xml = broken('<data element_type="f32" shape="1, 3, 1, 1"',
                 f'<data element_type="{element_type}" shape="1, 3, 1, 1"')
    expect_error(xml, "layer 'bias' (Const)", f"element_type {element_type} is not supported",
                 "f32, f16, i64")


def test_edge_to_missing_layer():
    xml = broken('to-layer="7" to-port="0"', 'to-layer="9" to-port="0"')
    line = line_of(xml, 'to-layer="9"')
    expect_error(xml, f"m.xml:{line}", "refers to layer id '9'",
                 "does not exist")


def test_edge_to_missing_port():
    xml = broken('from-layer="1" from-port="0" to-layer="2" to-port="1"',
                 'from-layer="1" from-port="0" to-layer="2" to-port="5"')
    expect_error(xml, "enters port 5 of layer 'add' (Add)", "input ports: 0, 1")


def test_edge_from_an_input_port():
    xml = broken('from-layer="2" from-port="2"', 'from-layer="2" from-port="0"')
    expect_error(xml, "leaves port 0 of layer 'add' (Add)", "output ports: 2")


def test_cycle():
    expect_error(DATA / "cycle.xml", f"{DATA / 'cycle.xml'}: the model has a cycle through 'a', 'b'")


def test_unknown_precision():
    xml = broken('<port id="1" precision="FP32">', '<port id="1" precision="FP33">')
    expect_error(xml, "layer 'add' (Add) port 1", "unknown precision 'FP33'",
                 "FP32, FP16, I64, I32, I16, I8, U64, U32, U16, U8, BOOL")


def test_unsupported_precision():
    xml = broken('<port id="1" precision="FP32">', '<port id="1" precision="FP64">')
    expect_error(xml, "precision FP64 is not supported")


def test_shape_mismatch_with_producer():
    old = ('<layer id="3" name="relu" type="ReLU" version="opset1">\n\t\t\t<input>\n'
           '\t\t\t\t<port id="0" precision="FP32">\n'
           '\t\t\t\t\t<dim>1</dim><dim>3</dim><dim>4</dim><dim>4</dim>')
    xml = broken(old, old.replace("<dim>4</dim><dim>4</dim>", "<dim>5</dim><dim>4</dim>"))
    line = line_of(xml, 'from-port="2" to-layer="3"')
    expect_error(xml, f"m.xml:{line}",
                 "input port 0 of layer 'relu' (ReLU)", "has shape [1,3,5,4]",
                 "producer 'add' (Add) port 2 gives [1,3,4,4]")


def test_two_edges_into_one_port():
    xml = broken('<edge from-layer="0" from-port="0" to-layer="2" to-port="0"/>',
                 '<edge from-layer="0" from-port="0" to-layer="2" to-port="0"/>\n'
                 '\t\t<edge from-layer="3" from-port="1" to-layer="2" to-port="0"/>')
    expect_error(xml, "input port 0 of layer 'add' (Add)", "has two producers: 'x' and 'relu'")


def test_unconnected_input_port():
    xml = broken('\t\t<edge from-layer="5" from-port="0" to-layer="6" to-port="1"/>\n', "")
    expect_error(xml, f"m.xml:{layer_line(xml, 'flatten')}",
                 "input port 1 of layer 'flatten' (Reshape) is not connected")


def test_doctype_with_entities_is_refused():
    xml = TINY_XML.replace('<?xml version="1.0"?>',
                           '<?xml version="1.0"?>\n<!DOCTYPE net [<!ENTITY a "aaaaaaaa">]>')
    xml = xml.replace('bias="1e-06"', 'bias="&a;"')
    expect_error(xml, "DOCTYPE", "entity expansion is refused")


def test_not_xml_and_wrong_version():
    expect_error("<net version='11'><layers>", "m.xml:1: not well-formed XML")
    expect_error(TINY_XML.replace('version="11"', 'version="7"', 1),
                 "IR version '7' is not supported; expected one of 10, 11")
    expect_error("<model/>", "the root element is <model>, expected <net>")


def test_bad_dim_text():
    xml = broken("<dim>48</dim>", "<dim>forty</dim>")
    expect_error(xml, "dim 'forty' is not a size")


# -- the demo models (examples/models) ---------------------------------------------------------
MODELS_DIR = DATA.parent.parent.parent / "examples" / "models"


def test_demo_model_layers_and_attribute_text():
    g = read_ir(MODELS_DIR / "demo_cnn.xml")
    types = [n.type for n in g.topological_order() if n.type not in ("Const", "Parameter")]
    assert types == ["Convolution", "Add", "ReLU", "GRN", "Convolution", "ReLU", "ReorgYolo",
                     "MaxPool", "Reshape", "MatMul", "SoftMax", "Result"]
    by_type = {n.type: n for n in g}
    assert by_type["GRN"].attrs == {"bias": "1e-06"}          # the text, not the float32 value
    assert by_type["ReorgYolo"].attrs == {"stride": "2"}
    assert by_type["ReorgYolo"].outputs[0].shape == (1, 64, 16, 16)
    assert g.parameters[0].outputs[0].shape == (1, 3, 32, 32)
    assert g.results[0].inputs[0].shape == (1, 10)


def test_demo_custom_types_match_the_example_layers():
    """Every non-builtin type of demo_cnn.xml has a descriptor in examples/layers/."""
    from lxml import etree
    names = set()
    for path in (MODELS_DIR.parent / "layers").glob("*/*.xml"):
        body = path.read_bytes()
        if body.lstrip().startswith(b"<?xml"):       # a declaration cannot sit inside <root>
            body = body.split(b"?>", 1)[1]
        text = b"<root>" + body + b"</root>"
        root = etree.fromstring(text, etree.XMLParser(resolve_entities=False, no_network=True))
        names |= {e.get("name") for e in root.iter("CustomLayer")}
    assert {"GRN", "ReorgYolo", "ReLU"} <= names


def test_demo_builtin_variant_computes_the_same_on_openvino():
    ov = pytest.importorskip("openvino")  # a test-only oracle
    g = read_ir(MODELS_DIR / "demo_cnn_builtin.xml")
    assert not {"GRN", "ReorgYolo"} & {n.type for n in g}
    core = ov.Core()
    x = np.random.default_rng(3).standard_normal((1, 3, 32, 32)).astype(np.float32)
    outs = [core.compile_model(core.read_model(str(MODELS_DIR / name)), "CPU",
                               {"INFERENCE_PRECISION_HINT": "f32"})([x])[0]
            for name in ("demo_cnn.xml", "demo_cnn_builtin.xml")]
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-6)
    assert outs[0].max() < 0.9          # not saturated: a wrong layer changes the answer


def test_a_layer_with_no_output_port():
    """A Reshape whose <output> was dropped (its consumer fed from elsewhere) was read, and the
    compiler's channel-shuffle pass met IndexError on its output 0: every layer but a Result
    has an output port, or the model is refused where it says so."""
    reshape = ('\t\t\t<output>\n\t\t\t\t<port id="2" precision="FP32" names="y">\n'
               '\t\t\t\t\t<dim>1</dim><dim>48</dim>\n\t\t\t\t</port>\n\t\t\t</output>\n')
    xml = broken(reshape, "")
    xml = xml.replace('<edge from-layer="6" from-port="2" to-layer="7" to-port="0"/>',
                      '<edge from-layer="4" from-port="1" to-layer="7" to-port="0"/>')
    xml = xml.replace('<dim>1</dim><dim>48</dim>\n\t\t\t\t</port>\n\t\t\t</input>',
                      '<dim>1</dim><dim>3</dim><dim>4</dim><dim>4</dim>\n\t\t\t\t</port>\n'
                      '\t\t\t</input>')
    expect_error(xml, f"m.xml:{layer_line(xml, 'flatten')}: layer 'flatten' (Reshape): has no "
                      f"output port; every layer but a Result or an Assign has at least one "
                      f"<port> in <output>")
