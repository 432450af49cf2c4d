"""passes/graph_edit.py: the helpers every graph pass shares, on graphs built directly (no
device). The two "sole consumer" questions differ on purpose: a fold asks who reads one port,
fusion also needs a node of one output whose reader is a layer (a network output keeps its
tensor)."""
import numpy as np

from customlayers.graph.graph import Node, Port
from customlayers.ops.nn.conv import InputShuffle
from customlayers.ops.nn.matmul import PickLast
from customlayers.passes.graph_edit import (const_input, rebuilt_graph, sole_consumer,
                                            sole_layer_reading_only_output, with_fact)
from interop_graphs import Builder

SHAPE = (1, 4, 5, 5)


def test_sole_consumer_counts_a_result_but_the_fusion_question_does_not():
    b = Builder()
    x = b.param("x", SHAPE)
    relu = b.op("ReLU", [x], SHAPE)
    b.result(relu)
    g = b.g
    assert sole_consumer(g, g.nodes[relu[0]], port=0).type == "Result"
    assert sole_layer_reading_only_output(g, g.nodes[relu[0]]) is None
    assert sole_layer_reading_only_output(g, g.nodes["x"]).id == relu[0]


def test_two_readers_make_no_sole_consumer():
    b = Builder()
    x = b.param("x", SHAPE)
    b.result(b.op("ReLU", [x], SHAPE))
    b.result(b.op("Exp", [x], SHAPE))
    assert sole_consumer(b.g, b.g.nodes["x"], port=0) is None
    assert sole_layer_reading_only_output(b.g, b.g.nodes["x"]) is None


def test_a_node_of_two_outputs_has_a_sole_consumer_per_port_but_none_to_fuse():
    b = Builder()
    b.param("x", SHAPE)
    b.g.add_node(Node("pool", "pool", "MaxPool", {}, [Port(SHAPE, "f32")],
                      [Port(SHAPE, "f32"), Port(SHAPE, "i64")]))
    b.g.connect("x", 0, "pool", 0)
    relu = b.op("ReLU", [("pool", SHAPE)], SHAPE)
    b.result(relu)
    pool = b.g.nodes["pool"]
    assert sole_consumer(b.g, pool, port=0).id == relu[0]
    assert sole_consumer(b.g, pool, port=1) is None
    assert sole_layer_reading_only_output(b.g, pool) is None


def test_const_input_is_a_constant_value_or_none():
    b = Builder()
    x = b.param("x", SHAPE)
    add = b.op("Add", [x, b.const(np.float32(2.0))], SHAPE)
    node = b.g.nodes[add[0]]
    assert const_input(b.g, node, 1) == np.float32(2.0)
    assert const_input(b.g, node, 0) is None            # a Parameter
    assert const_input(b.g, node, 2) is None            # no such input


def test_rebuilt_graph_drops_rewires_and_removes_dead_constants_leaving_the_model_as_is():
    b = Builder()
    x = b.param("x", SHAPE)
    add = b.op("Add", [x, b.const(np.float32(1.0))], SHAPE)
    relu = b.op("ReLU", [add], SHAPE)
    b.result(relu)
    g = b.g
    new = rebuilt_graph(g, {relu[0]: Node(relu[0], "renamed", "ReLU", {}, [Port(SHAPE, "f32")],
                                          [Port(SHAPE, "f32")])},
                        {add[0]}, {(relu[0], 0): ("x", 0)})
    assert [n.type for n in new] == ["Parameter", "ReLU", "Result"]   # the Add's Const too
    assert new.producer(relu[0], 0) == ("x", 0)
    assert new.nodes[relu[0]].name == "renamed"
    assert len(g.nodes) == 5 and g.producer(relu[0], 0) == (add[0], 0)


def test_with_fact_hands_a_typed_fact_on_a_copy_replacing_one_of_its_class():
    node = Node("dw", "dw", "GroupConvolution", attrs={"strides": "1,1"})
    first = with_fact(node, InputShuffle(2))
    again = with_fact(with_fact(first, PickLast(1)), InputShuffle(3))
    assert node.facts == () and first.facts == (InputShuffle(2),)
    assert again.facts == (PickLast(1), InputShuffle(3))
    assert again.attrs == {"strides": "1,1"}          # the model's attribute text is untouched


def test_rebuilt_graph_keeps_a_constant_a_redirect_now_reads_and_drops_one_read_no_more():
    """A fused layer that reads a constant its dropped reader read (a constant Q once the first
    attention MatMul is gone) keeps it; a constant whose only edge is redirected away goes."""
    b = Builder()
    x = b.param("x", SHAPE)
    kept = b.const(np.full(SHAPE, 2.0, np.float32))
    gone = b.const(np.full(SHAPE, 3.0, np.float32))
    add = b.op("Add", [kept, x], SHAPE)                 # dropped: the Mul reads the Const
    mul = b.op("Multiply", [add, gone], SHAPE)
    b.result(mul)
    g = b.g
    new = rebuilt_graph(g, {}, {add[0]}, {(mul[0], 0): (kept[0], 0), (mul[0], 1): ("x", 0)})
    assert new.producer(mul[0], 0) == (kept[0], 0) and new.producer(mul[0], 1) == ("x", 0)
    assert kept[0] in new.nodes and gone[0] not in new.nodes
