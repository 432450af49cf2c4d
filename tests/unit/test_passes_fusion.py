"""Which layers the epilogue fusion folds (pure graph logic, no device)."""
import numpy as np

from customlayers.graph.graph import Graph, Node, Port
from customlayers.passes.fusion import plan_fusions


def _graph(bias_shape=(1, 8, 1, 1), extra_user=False, relu=True):
    g = Graph()
    p = lambda: Port((1, 8, 4, 4), "f32")  # noqa: E731
    g.add_node(Node("x", "x", "Parameter", outputs=[p()]))
    g.add_node(Node("w", "w", "Const", outputs=[Port((8, 8, 1, 1), "f32")],
                    value=np.zeros((8, 8, 1, 1), np.float32)))
    g.add_node(Node("conv", "conv", "Convolution", inputs=[p(), Port((8, 8, 1, 1), "f32")],
                    outputs=[p()]))
    g.add_node(Node("b", "b", "Const", outputs=[Port(bias_shape, "f32")],
                    value=np.zeros(bias_shape, np.float32)))
    g.add_node(Node("add", "add", "Add", inputs=[p(), Port(bias_shape, "f32")], outputs=[p()]))
    g.connect("x", 0, "conv", 0)
    g.connect("w", 0, "conv", 1)
    g.connect("conv", 0, "add", 0)
    g.connect("b", 0, "add", 1)
    last = "add"
    if relu:
        g.add_node(Node("relu", "relu", "ReLU", inputs=[p()], outputs=[p()]))
        g.connect("add", 0, "relu", 0)
        last = "relu"
    g.add_node(Node("out", "out", "Result", inputs=[p()]))
    g.connect(last, 0, "out", 0)
    if extra_user:
        g.add_node(Node("out2", "out2", "Result", inputs=[p()]))
        g.connect("conv", 0, "out2", 0)
    return g


def _plan(g, custom=()):
    return plan_fusions(g, g.topological_order(), {"Convolution"},
                        lambda n: n.type in custom)


def test_conv_bias_relu_fold_into_one():
    ep = _plan(_graph())["conv"]
    assert [k for k, _ in ep.steps] == ["add"] and ep.relu and ep.absorbed == ["add", "relu"]
    assert ep.label == "bias+relu"


def test_a_second_user_of_the_convolution_blocks_fusion():
    assert _plan(_graph(extra_user=True)) == {}


def test_only_per_channel_constants_are_biases():
    assert _plan(_graph(bias_shape=(1, 8, 4, 4))) == {}     # not per-channel: a real Add
    assert [k for k, _ in _plan(_graph(bias_shape=(8, 1, 1)))["conv"].steps] == ["add"]


def test_custom_layers_are_not_fused():
    ep = _plan(_graph(), custom=("ReLU",))["conv"]
    assert ep.steps and not ep.relu
    assert _plan(_graph(), custom=("Convolution",)) == {}


def test_scale_then_bias_collapse_per_channel():
    from customlayers.passes.fusion import Epilogue
    ep = Epilogue(steps=[("add", np.array([1.0, 1.0])), ("mul", np.array([2.0, 3.0])),
                         ("add", np.array([0.5, -1.0]))])
    scale, bias = ep.scale_and_bias(2)
    v = np.array([10.0, 20.0])
    np.testing.assert_allclose(v * scale + bias, ((v + 1) * [2, 3]) + [0.5, -1.0])
    assert ep.label == "scale+bias"


def _affine_graph(extra_user=False):
    """x -> Concat(x, x) -> Multiply(per-channel) -> Add(per-channel) -> ReLU -> out"""
    from customlayers.graph.graph import Graph, Node, Port
    g = Graph()
    p4 = lambda c: Port((1, c, 3, 3), "f32")  # noqa: E731
    g.add_node(Node("x", "x", "Parameter", outputs=[p4(2)]))
    g.add_node(Node("cat", "cat", "Concat", {"axis": "1"}, [p4(2), p4(2)], [p4(4)]))
    g.connect("x", 0, "cat", 0)
    g.connect("x", 0, "cat", 1)
    prev = "cat"
    for nid, kind in (("mul", "Multiply"), ("add", "Add")):
        g.add_node(Node(f"{nid}_c", f"{nid}_c", "Const", outputs=[Port((1, 4, 1, 1), "f32")],
                        value=np.ones((1, 4, 1, 1), np.float32)))
        g.add_node(Node(nid, nid, kind, inputs=[p4(4), Port((1, 4, 1, 1), "f32")],
                        outputs=[p4(4)]))
        g.connect(prev, 0, nid, 0)
        g.connect(f"{nid}_c", 0, nid, 1)
        prev = nid
    g.add_node(Node("relu", "relu", "ReLU", inputs=[p4(4)], outputs=[p4(4)]))
    g.connect(prev, 0, "relu", 0)
    g.add_node(Node("out", "out", "Result", inputs=[p4(4)]))
    g.connect("relu", 0, "out", 0)
    if extra_user:
        g.add_node(Node("out2", "out2", "Result", inputs=[p4(4)]))
        g.connect("mul", 0, "out2", 0)
    return g


def test_a_normalization_after_concat_becomes_one_affine_chain():
    from customlayers.passes.fusion import plan_affine_chains
    g = _affine_graph()
    chains = plan_affine_chains(g, g.topological_order(), lambda n: False, set())
    assert list(chains) == ["mul"]
    ch = chains["mul"]
    assert ch.data_port == 0 and ch.epilogue.absorbed == ["add", "relu"] and ch.epilogue.relu


def test_an_affine_chain_stops_where_a_value_has_another_user():
    from customlayers.passes.fusion import plan_affine_chains
    g = _affine_graph(extra_user=True)
    # mul's output is also a network output: mul stays alone; add + relu still fuse
    chains = plan_affine_chains(g, g.topological_order(), lambda n: False, set())
    assert list(chains) == ["add"] and chains["add"].epilogue.absorbed == ["relu"]


def _scores_plus_mask(mask_shape, with_gelu=False):
    """q [2, 3, 5, 4] @ k [2, 3, 4, 5] + mask (a graph input), then (a Gelu, for the epilogue's
    activation) a Result."""
    from interop_graphs import Builder
    b = Builder("mask")
    q, k = b.param("q", (2, 3, 5, 4)), b.param("k", (2, 3, 4, 5))
    mask = b.param("mask", mask_shape)
    s = b.op("MatMul", [q, k], (2, 3, 5, 5), {"transpose_a": "false", "transpose_b": "false"},
             name="scores")
    y = b.op("Add", [s, mask], (2, 3, 5, 5), {"auto_broadcast": "numpy"}, name="masked")
    if with_gelu:
        y = b.op("Gelu", [y], (2, 3, 5, 5), {"approximation_mode": "tanh"}, name="act")
    b.result(y)
    return b.g


def test_a_mask_that_broadcasts_is_a_residual_only_where_the_layer_reads_it_so():
    g = _scores_plus_mask((2, 1, 1, 5), with_gelu=True)
    order = g.topological_order()
    plans = plan_fusions(g, order, {"MatMul"}, lambda n: False,
                         broadcast_residual={"MatMul"})
    ep = plans["scores"]
    assert ep.residual == ("mask", 0) and ep.gelu == "tanh"
    assert ep.absorbed == ["masked", "act"] and ep.label == "residual+gelu"
    # a layer type that does not read a broadcast residual leaves the Add (and so the Gelu
    # after it) alone
    assert "scores" not in plan_fusions(g, order, {"MatMul"}, lambda n: False)
    # one of the output's own shape is a residual for any layer type
    g = _scores_plus_mask((2, 3, 5, 5))
    assert plan_fusions(g, g.topological_order(), {"MatMul"},
                        lambda n: False)["scores"].residual == ("mask", 0)
