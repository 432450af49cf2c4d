"""The index ops' planning, without a device: Einsum's labels (sizes and strides, diagonals,
broadcasting, implicit output) and the refusals of shapes and values that do not fit, each a
BindingError naming the layer."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.errors import BindingError
from customlayers.jit.layer import LayerCall
from customlayers.jit.tensor import TensorDesc
from customlayers.ops import OPS


def _call(op_type, shapes, raw=None, consts=None, dtypes=None):
    op = OPS[op_type]
    attrs = op.parse_attributes(raw or {}, "probe")
    descs = [TensorDesc(s, (dtypes or {}).get(k, "f32")) for k, s in enumerate(shapes)]
    call = LayerCall("probe", "probe", op_type, attrs, descs, consts or {})
    return op, call


@pytest.mark.parametrize("equation,shapes,out", [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)], (2, 3, 5)),
    ("...ii->...i", [(3, 4, 4)], (3, 4)),
    ("ij,jk", [(3, 4), (4, 5)], (3, 5)),            # implicit: labels seen once, sorted
    ("ba", [(3, 4)], (4, 3)),
    ("i...,i...->...", [(3, 1, 5), (3, 4, 5)], (4, 5)),   # a 1 broadcasts
    ("->", [()], ()),
])
def test_einsum_output_shapes(equation, shapes, out):
    op, call = _call("Einsum", shapes, {"equation": equation})
    assert op.outputs(call)[0].shape == out


def test_einsum_diagonal_strides_add_up():
    op, call = _call("Einsum", [(4, 4)], {"equation": "ii->i"})
    _, rows, n_out = op._plan(call.attrs, call.inputs)
    assert n_out == 1 and rows == [[4, 5, 0]]        # stride 4 + 1 along the diagonal


@pytest.mark.parametrize("equation,shapes,words", [
    ("ij,jk->ik", [(3, 4), (5, 6)], "label 'j' has sizes 4 and 5"),
    ("ij->k", [(3, 4)], "the output labels k repeat one or name one no operand has"),
    ("ijk->i", [(3, 4)], "term 'ijk' does not fit an operand of rank 2"),
    ("i,i->i", [(3,)], "names 2 operands, the node has 1"),
])
def test_einsum_refusals_name_the_equation(equation, shapes, words):
    op, call = _call("Einsum", shapes, {"equation": equation})
    with pytest.raises(BindingError, match="layer 'probe' \\(Einsum\\)") as e:
        op.outputs(call)
    assert words in str(e.value) and equation in str(e.value)


def test_scatter_nd_updates_of_the_wrong_shape_are_refused():
    op, call = _call("ScatterNDUpdate", [(4, 3), (2, 1), (2, 4)], dtypes={1: "i64"})
    with pytest.raises(BindingError, match=r"updates \[2, 4\] do not fit data \[4, 3\]"):
        op.outputs(call)


def test_top_k_past_the_axis_is_refused():
    op, call = _call("TopK", [(2, 5), (1,)], {"axis": "1"}, {1: np.array([6], np.int64)},
                     {1: "i64"})
    with pytest.raises(BindingError, match=r"k=6 is not within 1..5"):
        op.outputs(call)


def test_an_unknown_scatter_reduction_is_refused():
    with pytest.raises(BindingError, match="reduction='mean' is not supported; supported: "
                                           "none, sum, prod, min, max"):
        _call("ScatterElementsUpdate", [(2,), (2,), (2,), ()], {"reduction": "mean"})
