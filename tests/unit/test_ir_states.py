"""Issue 21 point 2, the reader's part: ReadValue (opset3: an init input and only variable_id;
opset6: variable_id, variable_shape, variable_type, with or without an init) and Assign (with
or without an output port) read from IR text, and the variables a graph cannot hold refused at
load, naming the layers and their lines."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.errors import ModelError
from customlayers.graph import read_ir_string
from customlayers.graph.variables import variables_of


def _dims(shape) -> str:
    return "".join(f"<dim>{d}</dim>" for d in shape)


def _port(pid, shape=(2, 4)) -> str:
    return f'<port id="{pid}" precision="FP32">{_dims(shape)}</port>'


def _layer(lid, name, ltype, version, data, inputs=(), outputs=()) -> str:
    ins = "".join(_port(p, s) for p, s in inputs)
    outs = "".join(_port(p, s) for p, s in outputs)
    return (f'<layer id="{lid}" name="{name}" type="{ltype}" version="{version}">\n'
            f'<data {data}/>\n' + (f"<input>{ins}</input>\n" if ins else "") +
            (f"<output>{outs}</output>\n" if outs else "") + "</layer>\n")


def _model(layers: list[str], edges) -> str:
    return ('<?xml version="1.0"?>\n<net name="state" version="11">\n<layers>\n' +
            "".join(layers) + "</layers>\n<edges>\n" + "".join(
                f'<edge from-layer="{a}" from-port="{p}" to-layer="{b}" to-port="{q}"/>\n'
                for a, p, b, q in edges) + "</edges>\n</net>\n")


PARAM = _layer(0, "x", "Parameter", "opset1", 'shape="2,4" element_type="f32"',
               outputs=[(0, (2, 4))])
RESULT = _layer(9, "y", "Result", "opset1", "", inputs=[(0, (2, 4))])


def _running_sum(read_value: str, assign: str, extra=(), edges=()) -> str:
    """x (0) + a ReadValue (1) -> Add (2) -> Result (9) and the Assign (3)."""
    add = _layer(2, "sum", "Add", "opset1", 'auto_broadcast="numpy"',
                 inputs=[(0, (2, 4)), (1, (2, 4))], outputs=[(2, (2, 4))])
    return _model([PARAM, read_value, add, assign, RESULT, *extra],
                  [(0, 0, 2, 1), (1, 1 if "<input>" in read_value else 0, 2, 0), (2, 2, 9, 0),
                   (2, 2, 3, 0), *edges])


OPSET6 = _layer(1, "state", "ReadValue", "opset6",
                'variable_id="acc" variable_type="f32" variable_shape="2,4"',
                outputs=[(0, (2, 4))])
ASSIGN = _layer(3, "store", "Assign", "opset6", 'variable_id="acc"', inputs=[(0, (2, 4))],
                outputs=[(1, (2, 4))])
ASSIGN_NO_OUTPUT = _layer(3, "store", "Assign", "opset6", 'variable_id="acc"',
                          inputs=[(0, (2, 4))])


def test_an_opset6_read_value_and_an_assign_with_no_output_port_are_read():
    g = read_ir_string(_running_sum(OPSET6, ASSIGN_NO_OUTPUT))
    rv, assign = g.nodes["1"], g.nodes["3"]
    assert (rv.type, rv.attrs) == ("ReadValue", {"variable_id": "acc", "variable_type": "f32",
                                                 "variable_shape": "2,4"})
    assert (assign.type, len(assign.inputs), len(assign.outputs)) == ("Assign", 1, 0)
    assert {k: [n.name for n in v[0] + v[1]] for k, v in variables_of(g).items()} == \
        {"acc": ["state", "store"]}


def test_an_opset3_read_value_takes_its_init_input():
    const = ('<layer id="5" name="init" type="Const" version="opset1"><data element_type="f32" '
             'shape="2,4" offset="0" size="32"/><output>' + _port(0) + '</output></layer>\n')
    rv = _layer(1, "state", "ReadValue", "opset3", 'variable_id="acc"', inputs=[(0, (2, 4))],
                outputs=[(1, (2, 4))])
    assign = _layer(3, "store", "Assign", "opset3", 'variable_id="acc"', inputs=[(0, (2, 4))],
                    outputs=[(1, (2, 4))])
    g = read_ir_string(_running_sum(rv, assign, [const], [(5, 0, 1, 0)]),
                       np.full(8, 2, np.float32).tobytes())
    assert g.producer("1", 0) == ("5", 0)
    assert g.nodes["1"].attrs == {"variable_id": "acc"}


def test_an_assign_of_a_variable_no_read_value_reads_is_refused_at_its_line():
    xml = _running_sum(OPSET6, ASSIGN.replace('variable_id="acc"', 'variable_id="other"'))
    line = xml.splitlines().index('<layer id="3" name="store" type="Assign" version="opset6">')
    with pytest.raises(ModelError, match=rf"layer 'store' \(type Assign\) at m.xml:{line + 1}: "
                                         rf"assigns variable 'other', which no ReadValue of "
                                         rf"the model reads"):
        read_ir_string(xml, name="m.xml")


def test_two_assigns_of_one_variable_are_refused():
    second = _layer(4, "again", "Assign", "opset6", 'variable_id="acc"', inputs=[(0, (2, 4))])
    xml = _running_sum(OPSET6, ASSIGN, [second], [(2, 2, 4, 0)])
    with pytest.raises(ModelError, match=r"variable 'acc' is written by two Assign layers: "
                                         r"'store' \(Assign at m.xml:\d+\) and 'again' "
                                         r"\(Assign at m.xml:\d+\)"):
        read_ir_string(xml, name="m.xml")


def test_a_read_value_without_a_variable_id_is_refused():
    rv = OPSET6.replace('variable_id="acc" ', "")
    with pytest.raises(ModelError, match=r"layer 'state' \(type ReadValue\) at m.xml:\d+: has "
                                         r"no variable_id"):
        read_ir_string(_running_sum(rv, ASSIGN), name="m.xml")


def test_an_assign_of_two_inputs_is_refused():
    assign = _layer(3, "store", "Assign", "opset6", 'variable_id="acc"',
                    inputs=[(0, (2, 4)), (1, (2, 4))])
    with pytest.raises(ModelError, match=r"'store' \(type Assign\).*an Assign has 1 input and "
                                         r"0 or 1 output; found 2 and 0"):
        read_ir_string(_running_sum(OPSET6, assign, edges=[(0, 0, 3, 1)]), name="m.xml")


@pytest.mark.parametrize("cell", ["GRU", "LSTM"])
def test_a_low_latency_sequence_reads_as_the_built_in_cell(tmp_path, cell):
    """What OpenVINO's converter and LowLatency2 write for an ONNX GRU/LSTM: the ShapeOf
    arithmetic of static shapes folds into constants, the GRUSequence/LSTMSequence becomes
    the built-in GRU/LSTM (ONNX semantics, batch first) with its Y transposed back to
    OpenVINO's layout, and the ReadValue's init is a Const."""
    pytest.importorskip("openvino")
    from stateful_models import low_latency_rnn
    from customlayers.graph import read_ir
    g = read_ir(low_latency_rnn(tmp_path, cell))
    types = [n.type for n in g]
    assert not {"ShapeOf", "GRUSequence", "LSTMSequence", "Broadcast"} & set(types)
    (rnn,) = [n for n in g if n.type == cell]
    assert rnn.attrs["layout"] == "1" and rnn.attrs["inputs"] == \
        "B,sequence_lens,initial_h" + (",initial_c" if cell == "LSTM" else "")
    assert [g.nodes[g.producer(rnn.id, i)[0]].type for i in range(len(rnn.inputs))] == \
        ["Transpose", "Const", "Const", "Const", "Const", "ReadValue"] + \
        ["ReadValue"] * (cell == "LSTM")
    readers = [g.nodes[g.producer(n.id, 0)[0]] for n in g if n.type == "ReadValue"]
    assert {r.type for r in readers} == {"Const"}
    (y,) = [n for n in g if n.id == f"{rnn.id}/Y"]
    assert y.type == "Transpose" and g.producer(y.id, 0) == (rnn.id, 0)


def test_shape_arithmetic_of_constants_folds_and_the_model_order_stays():
    """A Concat of two Consts is folded into a Const when read (as the LowLatency2 models'
    Broadcast/Gather/Concat are); the nodes keep the model's order, so the inputs and outputs
    keep theirs."""
    c1 = ('<layer id="5" name="a" type="Const" version="opset1"><data element_type="f32" '
          'shape="1,4" offset="0" size="16"/><output>' + _port(0, (1, 4)) + '</output></layer>\n')
    c2 = c1.replace('id="5" name="a"', 'id="6" name="b"').replace('offset="0"', 'offset="16"')
    cat = _layer(7, "cat", "Concat", "opset1", 'axis="0"', inputs=[(0, (1, 4)), (1, (1, 4))],
                 outputs=[(2, (2, 4))])
    add = _layer(2, "sum", "Add", "opset1", 'auto_broadcast="numpy"',
                 inputs=[(0, (2, 4)), (1, (2, 4))], outputs=[(2, (2, 4))])
    first = RESULT.replace('id="9" name="y"', 'id="8" name="first"')
    xml = _model([PARAM, first, c1, c2, cat, add, RESULT],
                 [(5, 0, 7, 0), (6, 0, 7, 1), (7, 2, 2, 0), (0, 0, 2, 1), (2, 2, 9, 0),
                  (0, 0, 8, 0)])
    g = read_ir_string(xml, np.arange(8, dtype=np.float32).tobytes())
    assert [n.name for n in g] == ["x", "first", "a", "b", "cat", "sum", "y"]
    assert g.nodes["7"].type == "Const"
    np.testing.assert_array_equal(g.nodes["7"].value, np.arange(8).reshape(2, 4))
    assert [n.name for n in g.results] == ["first", "y"]
