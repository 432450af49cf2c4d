"""passes/state/binding.py on graphs read from small ONNX models (no device): the past_state
input and present_state output of a CausalConvWithState become a ReadValue and an Assign of one
variable; what cannot be bound stays as it is, with a note saying why."""
from __future__ import annotations

import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
import numpy as np  # noqa: E402

from customlayers.graph.onnx.reader import read_onnx  # noqa: E402
from customlayers.passes import PASSES  # noqa: E402
from customlayers.passes.state import bind_state_inputs  # noqa: E402

C, K = 4, 3


def _layer(i: int, x: str, bias: bool, past: str | None, present: str,
           dtype=np.float32) -> tuple:
    """(node, initializers) of CausalConvWithState 'ccs{i}' over x; the weights in x's type
    (one type variable T: the reader refuses two)."""
    inits = [numpy_helper.from_array(np.ones((C, 1, K), dtype), f"w{i}")]
    inputs = [x, f"w{i}"]
    if bias:
        inits.append(numpy_helper.from_array(np.zeros(C, dtype), f"b{i}"))
        inputs.append(f"b{i}")
    if past is not None:
        inputs += [""] * (3 - len(inputs)) + [past]
    return helper.make_node("CausalConvWithState", inputs, [f"y{i}", present],
                            name=f"ccs{i}"), inits


def _graph(tmp_path, layers, *, outputs, batch=2, elem=TensorProto.FLOAT, extra_nodes=(),
           extra_inputs=()):
    """`layers`: (bias, past input name or None, present name) per layer, chained y0 -> y1."""
    nodes, inits, x = [], [], "x"
    pasts = []
    for i, (bias, past, present) in enumerate(layers):
        node, more = _layer(i, x, bias, past, present,
                            helper.tensor_dtype_to_np_dtype(elem))
        nodes.append(node)
        inits += more
        x = f"y{i}"
        if past is not None and past not in pasts:
            pasts.append(past)
    inputs = [helper.make_tensor_value_info("x", elem, [batch, C, 5])] + \
        [helper.make_tensor_value_info(p, elem, [batch, C, K - 1]) for p in pasts] + \
        list(extra_inputs)
    graph = helper.make_graph(nodes + list(extra_nodes), "g", inputs,
                              [helper.make_tensor_value_info(o, elem, None) for o in outputs],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 27)])
    model.ir_version = 10
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    return read_onnx(path)


def _by_type(graph, op_type):
    return [n for n in graph if n.type == op_type]


@pytest.mark.parametrize("bias", [False, True])
def test_the_past_and_present_pair_becomes_a_read_value_and_an_assign(tmp_path, bias):
    g = _graph(tmp_path, [(bias, "past", "present")], outputs=["y0", "present"])
    new, notes = bind_state_inputs(g)
    assert notes == ["input 'past' and output 'present' of layer 'ccs0' (CausalConvWithState) "
                     "are bound to state 'past' (ReadValue, Assign): the request keeps it on "
                     "the device across runs, from zeros"]
    (read,) = _by_type(new, "ReadValue")
    assert read.attrs == {"variable_id": "past", "variable_shape": "2,4,2",
                          "variable_type": "f32"}
    assert read.inputs == [] and read.outputs[0].shape == (2, C, K - 1)
    (assign,) = _by_type(new, "Assign")
    assert assign.attrs == {"variable_id": "past"} and assign.outputs == []
    conv = _by_type(new, "CausalConvWithState")[0]
    past_port = 3 if bias else 2
    assert new.producer(conv.id, past_port) == (read.id, 0)
    assert new.producer(assign.id, 0) == (conv.id, 1)
    # the input and the output are gone; the model's own graph is left as it was
    assert [p.name for p in new.parameters] == ["x"]
    assert [r.inputs[0].names[0] for r in new.results] == ["y0"]
    assert [p.name for p in g.parameters] == ["x", "past"] and len(g.results) == 2


def test_a_chain_binds_each_layer_to_its_own_state(tmp_path):
    g = _graph(tmp_path, [(True, "p0", "s0"), (False, "p1", "s1")], outputs=["y1", "s0", "s1"])
    new, notes = bind_state_inputs(g)
    assert len(notes) == 2
    assert sorted(n.attrs["variable_id"] for n in _by_type(new, "ReadValue")) == ["p0", "p1"]
    assert sorted(n.attrs["variable_id"] for n in _by_type(new, "Assign")) == ["p0", "p1"]
    assert [p.name for p in new.parameters] == ["x"] and len(new.results) == 1


def test_a_present_state_that_is_no_output_leaves_the_input(tmp_path):
    g = _graph(tmp_path, [(False, "past", "present")], outputs=["y0"])
    new, notes = bind_state_inputs(g)
    assert new is g
    assert notes == ["input 'past' feeds the past_state of layer 'ccs0' (CausalConvWithState), "
                     "whose present_state is no output of the model: left an input"]


def test_an_input_read_by_something_else_too_is_not_a_state(tmp_path):
    relu = helper.make_node("Relu", ["past"], ["r"], name="relu")
    g = _graph(tmp_path, [(False, "past", "present")], outputs=["y0", "present", "r"],
               extra_nodes=[relu])
    assert bind_state_inputs(g) == (g, [])


def test_one_input_as_the_past_of_two_layers_is_not_bound(tmp_path):
    g = _graph(tmp_path, [(False, "past", "s0"), (False, "past", "s1")],
               outputs=["y1", "s0", "s1"])
    assert bind_state_inputs(g) == (g, [])


def test_a_dynamic_batch_stays_an_input_with_a_note(tmp_path):
    g = _graph(tmp_path, [(False, "past", "present")], outputs=["y0", "present"], batch="N")
    new, notes = bind_state_inputs(g)
    assert new is g
    assert notes == ["input 'past' (the past_state of layer 'ccs0' (CausalConvWithState)) is "
                     "left an input: its shape [?, 4, 2] is not static, and a state's shape is "
                     "fixed when the model is compiled (give it: shapes={input name: shape})"]


def test_a_dynamic_batch_binds_at_the_shape_given(tmp_path):
    g = _graph(tmp_path, [(False, "past", "present")], outputs=["y0", "present"], batch="N")
    new, notes = bind_state_inputs(g, shapes={"past": (3, C, K - 1)})
    (read,) = _by_type(new, "ReadValue")
    assert read.attrs["variable_shape"] == "3,4,2" and read.outputs[0].shape == (3, C, K - 1)
    assert len(notes) == 1 and "bound to state 'past'" in notes[0]


@pytest.mark.parametrize("shapes,words", [
    ({"past": (3, 5, 2)}, "shapes['past'] = [3, 5, 2] does not fit input 'past', declared "
                          "[?, 4, 2]"),
    ({"past": (3, 4)}, "shapes['past'] = [3, 4] does not fit"),
    ({"pats": (3, 4, 2)}, "shapes names 'pats', which is no past_state input of the model; "
                          "those are: past"),
])
def test_shapes_that_do_not_fit_are_refused(tmp_path, shapes, words):
    from customlayers.errors import ModelError
    g = _graph(tmp_path, [(False, "past", "present")], outputs=["y0", "present"], batch="N")
    with pytest.raises(ModelError) as info:
        bind_state_inputs(g, shapes=shapes)
    assert words in str(info.value), str(info.value)


def test_half_states_and_custom_layers(tmp_path):
    g = _graph(tmp_path, [(False, "past", "present")], outputs=["y0", "present"],
               elem=TensorProto.FLOAT16)
    new, _ = bind_state_inputs(g)
    assert _by_type(new, "ReadValue")[0].attrs["variable_type"] == "f16"
    # a node a custom layer implements is left as written
    assert bind_state_inputs(g, lambda n: n.type != "CausalConvWithState") == (g, [])


def test_the_binding_is_not_a_default_pass():
    assert bind_state_inputs not in PASSES


def test_an_input_named_like_a_variable_of_the_model_stays_an_input(tmp_path):
    from customlayers.graph.graph import Node, Port
    g = _graph(tmp_path, [(False, "past", "present")], outputs=["y0", "present"])
    g.add_node(Node("rv", "rv", "ReadValue", {"variable_id": "past"}, [],
                    [Port((1,), "f32", ("other",))]))
    new, notes = bind_state_inputs(g)
    assert new is g and notes == ["input 'past' (the past_state of layer 'ccs0' "
                                  "(CausalConvWithState)) is left an input: the model has a "
                                  "variable 'past' already"]
