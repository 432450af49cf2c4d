"""passes/shape_folding.py on hand-made graphs, without a device: the fold-only nodes the ONNX
reader keeps are folded into Const nodes at load where the declared shapes decide them, else
per set of input shapes (fold_for_shapes), and what cannot be folded is refused naming the
node and its op."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.errors import ModelError
from customlayers.graph.fold_eval import FOLD_TYPE
from customlayers.graph.graph import Graph, Node, Port
from customlayers.passes.shape_folding import (fold_for_shapes, fold_shape_arithmetic,
                                               has_fold_nodes)


class Builder:
    def __init__(self):
        self.g = Graph("t")
        self.n = 0

    def _node(self, type_, inputs, outputs, attrs=None, value=None, name=None) -> str:
        self.n += 1
        nid = str(self.n)
        self.g.add_node(Node(nid, name or f"{type_.lower()}{nid}", type_, dict(attrs or {}),
                             [Port(None, "i64") for _ in inputs],
                             [Port(None, "i64", (f"v{nid}_{k}",)) for k in range(outputs)],
                             value=value))
        for port, (src, sport) in enumerate(inputs):
            self.g.connect(src, sport, nid, port)
        return nid

    def param(self, name, shape, dim_names=None):
        self.n += 1
        attrs = {"dim_names": dim_names} if dim_names else {}
        self.g.add_node(Node(name, name, "Parameter", attrs,
                             outputs=[Port(tuple(shape), "f32", (name,))]))
        return name, 0

    def const(self, value):
        return self._node("Const", [], 1, value=np.asarray(value)), 0

    def fold(self, op, inputs, attrs=None, outputs=1, dims=None, name=None):
        """A fold-only node as the reader makes it; inputs None are absent optional ones."""
        attrs = {k: str(v) for k, v in (attrs or {}).items()}
        attrs.update(op=op, present=",".join(str(k) for k, i in enumerate(inputs)
                                             if i is not None))
        if dims is not None:
            attrs["dims"] = dims
        nid = self._node(FOLD_TYPE, [i for i in inputs if i is not None], outputs, attrs,
                         name=name)
        return [(nid, k) for k in range(outputs)] if outputs > 1 else (nid, 0)

    def layer(self, type_, inputs, name=None):
        return self._node(type_, inputs, 1, name=name), 0

    def result(self, x):
        self._node("Result", [x], 0)


def reader_of(graph: Graph, layer: str, port: int) -> np.ndarray:
    """The constant value a layer's input reads."""
    src = graph.nodes[graph.producer(layer, port)[0]]
    assert src.type == "Const", src.type
    return src.value


def vit_reshape(b: Builder, x, dims: str):
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape (x.reshape(x.size(0), -1))."""
    shape = b.fold("Shape", [x], dims=dims)
    n = b.fold("Gather", [shape, b.const(np.int64(0))], {"axis": 0})
    n1 = b.fold("Unsqueeze", [n, b.const([0])])
    target = b.fold("Concat", [n1, b.const([-1])], {"axis": 0})
    reshape = b.layer("Reshape", [x, target], name="reshape")
    b.result(reshape)
    return reshape[0]


def test_a_chain_on_a_symbolic_batch_waits_for_the_input_shapes():
    b = Builder()
    x = b.param("x", (None, 4, 5), dim_names="N,4,5")
    reshape = vit_reshape(b, x, "N,4,5")
    assert fold_shape_arithmetic(b.g) == (b.g, [])           # N is not known at load
    for batch in (1, 3):                                       # each plan folds its own
        g = fold_for_shapes(b.g, {"x": (batch, 4, 5)})
        assert not has_fold_nodes(g)
        assert reader_of(g, reshape, 1).tolist() == [batch, -1]
        assert [n.type for n in g] == ["Parameter", "Const", "Reshape", "Result"]
    assert has_fold_nodes(b.g)                                 # the model's graph unchanged


def test_a_chain_on_static_shapes_folds_at_load():
    b = Builder()
    x = b.param("x", (2, 4, 5))
    reshape = vit_reshape(b, x, "2,4,5")
    g, notes = fold_shape_arithmetic(b.g)
    assert not has_fold_nodes(g) and notes == [
        "info: 4 shape-arithmetic node(s) folded into constants"]
    assert reader_of(g, reshape, 1).tolist() == [2, -1]


def test_the_chunk_pattern_slice_ends_from_a_split_of_the_shape():
    """x.chunk(2, 1): Shape -> Split into its dims -> the channel count halved -> Slice ends."""
    b = Builder()
    x = b.param("x", (None, 6, 3), dim_names="N,6,3")
    shape = b.fold("Shape", [x], dims="N,6,3")
    dims = b.fold("Split", [shape, None], {"axis": 0, "outputs": 3}, outputs=3)
    half = b.fold("Div", [dims[1], b.const([2])])
    bounds = b.fold("SliceBounds", [b.const([0]), half, b.const([1]), None], {"rank": 3},
                    outputs=4)
    first = b.layer("Slice", [x] + bounds, name="first")
    b.result(first)
    g = fold_for_shapes(b.g, {"x": (5, 6, 3)})
    got = [reader_of(g, first[0], k).tolist() for k in range(1, 5)]
    assert got == [[0], [3], [1], [1]]                  # start, stop, step, axes


def test_expand_with_a_shape_from_constant_of_shape_equal_and_where():
    """cls.expand(N, -1): ones of the target's rank, -1 replaced by 1 (torch.onnx's form)."""
    b = Builder()
    x = b.param("x", (None, 7), dim_names="batch,7")
    shape = b.fold("Shape", [x], dims="batch,7", attrs={"end": 1})
    target = b.fold("Concat", [shape, b.const([-1])], {"axis": 0})
    ones = b.fold("ConstantOfShape", [b.const([2]), b.const(np.array([1], np.int64))])
    negs = b.fold("Mul", [ones, b.const(np.int64(-1))])
    is_neg = b.fold("Equal", [target, negs])
    final = b.fold("Where", [is_neg, ones, target])
    expand = b.layer("Broadcast", [b.const(np.zeros((1, 4), np.float32)), final],
                     name="expand")
    b.result(expand)
    g = fold_for_shapes(b.g, {"x": (3, 7)})
    assert reader_of(g, expand[0], 1).tolist() == [3, 1]


def test_a_value_only_some_of_its_readers_fold_stays_for_the_others():
    """A folded value read by a fold-only node and a layer: the layer gets the Const."""
    b = Builder()
    x = b.param("x", (2, 3))
    size = b.fold("Size", [x], dims="2,3")
    add = b.layer("Add", [x, size], name="add")
    doubled = b.fold("Mul", [size, b.const(np.int64(2))])
    b.result(add)
    tile = b.layer("Tile", [x, doubled], name="tile")
    b.result(tile)
    g, _ = fold_shape_arithmetic(b.g)
    assert int(reader_of(g, add[0], 1)) == 6
    assert int(reader_of(g, tile[0], 1)) == 12


def test_shape_arithmetic_reading_a_layer_output_is_refused_naming_the_node():
    b = Builder()
    x = b.param("x", (2, 3))
    relu = b.layer("ReLU", [x], name="relu")
    b.result(b.fold("Equal", [relu, x], name="the_mask"))
    with pytest.raises(ModelError, match=r"node 'the_mask' \(Equal, shape arithmetic\): input "
                                         r"0 is computed at run time by layer 'relu'"):
        fold_shape_arithmetic(b.g)


def test_a_dim_no_input_decides_is_refused_when_the_shapes_are_given():
    b = Builder()
    x = b.param("x", (None, 3), dim_names="N,3")
    vit_reshape(b, x, "?,3")            # shape inference gave the dim no name
    assert fold_shape_arithmetic(b.g) == (b.g, [])
    with pytest.raises(ModelError, match=r"node 'fold\w*' \(Shape, shape arithmetic\): the "
                                         r"shape of 'x' \(\?, 3\) is not known .*decide \?"):
        fold_for_shapes(b.g, {"x": (2, 3)})


def test_inputs_that_disagree_on_a_named_dim_are_refused():
    b = Builder()
    x = b.param("x", (None, 3), dim_names="N,3")
    b.param("y", (None, 3), dim_names="N,3")
    vit_reshape(b, x, "N,3")
    with pytest.raises(ModelError, match="input 'y' gives it 4, input 'x' 2"):
        fold_for_shapes(b.g, {"x": (2, 3), "y": (4, 3)})


def test_an_evaluation_error_names_the_node():
    b = Builder()
    x = b.param("x", (2, 3))
    zero = b.fold("Div", [b.fold("Size", [x], dims="2,3"), b.const(np.int64(0))],
                  name="the_div")
    b.result(b.layer("Tile", [x, zero]))
    with pytest.raises(ModelError, match=r"'the_div' \(Div, shape arithmetic\): integer "
                                         r"division by zero"):
        fold_shape_arithmetic(b.g)
