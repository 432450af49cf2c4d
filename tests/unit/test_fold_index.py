"""The index ops as shape arithmetic (graph/fold_index.py through fold_eval.evaluate) against
ONNX's reference evaluator: negative indices, every reduction, duplicates; an index out of
range is a ValueError (the reader words it as a refusal naming the node)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from customlayers.graph.fold_eval import evaluate  # noqa: E402


def _reference(op: str, inputs: list, **attrs):
    names = [f"x{k}" for k in range(len(inputs))]
    node = helper.make_node(op, names, ["y"], **attrs)
    return ReferenceEvaluator(node).run(None, dict(zip(names, inputs)))[0]


SHAPE = np.array([2, 7, 5, 3], np.int64)


@pytest.mark.parametrize("op,inputs,attrs", [
    ("GatherElements", [SHAPE.reshape(2, 2), np.array([[1, -2], [0, 0]], np.int64)],
     {"axis": 1}),
    ("GatherND", [SHAPE.reshape(2, 2), np.array([[1, -1], [0, 0]], np.int64)], {}),
    ("GatherND", [SHAPE.reshape(2, 2), np.array([[1], [-2]], np.int64)], {"batch_dims": 1}),
    ("ScatterND", [SHAPE, np.array([[1], [-1]], np.int64), np.array([-1, 9], np.int64)], {}),
    ("ScatterND", [SHAPE, np.array([[1], [1]], np.int64), np.array([4, 5], np.int64)],
     {"reduction": "add"}),
    ("ScatterND", [SHAPE, np.array([[0], [0]], np.int64), np.array([4, 5], np.int64)],
     {"reduction": "mul"}),
    ("ScatterElements", [SHAPE, np.array([3, 3, -4], np.int64), np.array([1, 9, 2], np.int64)],
     {"reduction": "max"}),
    ("ScatterElements", [SHAPE, np.array([3, 3, -4], np.int64), np.array([1, 9, 2], np.int64)],
     {"reduction": "min"}),
    ("ScatterElements", [SHAPE, np.array([1], np.int64), np.array([0], np.int64)], {}),
])
def test_index_ops_fold_as_onnx_reference_computes(op, inputs, attrs):
    got = evaluate(op, {k: str(v) for k, v in attrs.items()}, inputs)[0]
    np.testing.assert_array_equal(got, _reference(op, inputs, **attrs))


def test_an_index_out_of_range_is_a_value_error():
    with pytest.raises(ValueError, match=r"the indices \[\[4\]\]|the indices \[4\] are out of "
                                         r"range"):
        evaluate("ScatterND", {}, [SHAPE, np.array([[4]], np.int64), np.array([1], np.int64)])
