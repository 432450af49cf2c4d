"""passes/unused_outputs.py on graphs built directly (no device): a MaxPool's index output that
no layer reads is not computed."""
from customlayers.graph.graph import Node, Port
from customlayers.passes.unused_outputs import drop_unused_pool_indices
from interop_graphs import Builder

SHAPE = (1, 2, 4, 4)


def _pool(read_indices=False):
    b = Builder("pool")
    b.param("x", SHAPE)
    b.g.add_node(Node("pool", "pool", "MaxPool",
                      {"kernel": "1,1", "index_element_type": "i64"}, [Port(SHAPE, "f32")],
                      [Port(SHAPE, "f32"), Port(SHAPE, "i64")]))
    b.g.connect("x", 0, "pool", 0)
    b.result(("pool", SHAPE))
    if read_indices:
        b.g.add_node(Node("idx", "idx", "Result", inputs=[Port(SHAPE, "i64")]))
        b.g.connect("pool", 1, "idx", 0)
    return b.g


def test_an_unread_index_output_is_dropped():
    g = _pool()
    new, notes = drop_unused_pool_indices(g, lambda n: True)
    assert notes == ["MaxPool 'pool': its index output is read by no layer and is not computed"]
    pool = new.nodes["pool"]
    assert len(pool.outputs) == 1 and "index_element_type" not in pool.attrs
    assert len(g.nodes["pool"].outputs) == 2            # the model's own graph is left as is


def test_a_read_index_output_or_a_custom_pool_is_kept():
    g = _pool(read_indices=True)
    assert drop_unused_pool_indices(g, lambda n: True) == (g, [])
    g = _pool()
    assert drop_unused_pool_indices(g, lambda n: n.type != "MaxPool") == (g, [])
