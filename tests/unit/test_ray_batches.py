"""Cutting a batch of rows into requests and joining the outputs (pure numpy, no device)."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.errors import ModelError
from customlayers.integrations.batches import BatchPlan, InputSpec, split_columns

ONE = [InputSpec("x", (1, 3, 4))]
OPEN = [InputSpec("x", (None, 3, 4))]


def test_requests_follow_the_batch_dimension():
    rows = np.arange(5 * 12, dtype=np.float32).reshape(5, 3, 4)
    assert [r["x"].shape for r in BatchPlan.of({"x": rows}, ONE).requests()] == [(1, 3, 4)] * 5
    assert [r["x"].shape for r in BatchPlan.of({"x": rows}, OPEN).requests()] == [(5, 3, 4)]
    two = BatchPlan.of({"x": rows}, [InputSpec("x", (2, 3, 4))]).requests()
    assert [r["x"].shape for r in two] == [(2, 3, 4)] * 3
    np.testing.assert_array_equal(two[2]["x"][0], rows[4])
    np.testing.assert_array_equal(two[2]["x"][1], 0)      # padding


def test_join_drops_padding_and_keeps_row_order():
    rows = np.arange(5, dtype=np.float32).reshape(5, 1, 1)
    plan = BatchPlan.of({"x": rows}, [InputSpec("x", (2, 1, 1))])
    results = [{"y": r["x"] * 10} for r in plan.requests()]
    out = plan.join(results, {"id": np.arange(5)})
    np.testing.assert_array_equal(out["y"].ravel(), [0, 10, 20, 30, 40])
    np.testing.assert_array_equal(out["id"], np.arange(5))


def test_an_output_without_the_batch_first_is_refused():
    plan = BatchPlan.of({"x": np.zeros((4, 3, 4))}, ONE)
    with pytest.raises(ModelError, match=r"output 'y' has shape \[10\] for a request of 1 "
                                         r"item\(s\): its first dimension is not the batch"):
        plan.join([{"y": np.zeros(10)}] * 4)


def test_columns_and_their_errors():
    feeds, rest = split_columns({"x": np.zeros((2, 3, 4)), "id": np.arange(2)}, ONE)
    assert list(feeds) == ["x"] and list(rest) == ["id"]
    feeds, rest = split_columns(np.zeros((2, 3, 4)), ONE)
    assert list(feeds) == ["x"] and rest == {}
    with pytest.raises(ModelError, match="different numbers of rows: a: 2, b: 3"):
        split_columns({"a": np.zeros(2), "b": np.zeros(3)},
                      [InputSpec("a", (None,)), InputSpec("b", (None,))])
    with pytest.raises(ModelError, match=r"the model's inputs disagree on the batch dimension "
                                         r"\(their first\): a: 1, b: open"):
        BatchPlan.of({"a": np.zeros((2, 3)), "b": np.zeros((2, 3))},
                     [InputSpec("a", (1, 3)), InputSpec("b", (None, 3))])
    with pytest.raises(ModelError, match=r"column 'id' of the batch has the name of an output"):
        BatchPlan.of({"x": np.zeros((1, 3, 4))}, ONE).join([{"id": np.zeros((1, 2))}],
                                                           {"id": np.arange(1)})
