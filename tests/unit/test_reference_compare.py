"""The comparison `check` and `run --check-with` print: tolerance, NaN, the worst element."""
from __future__ import annotations

import numpy as np

from customlayers.runtime.checks.reference_check import compare, compare_all


def test_identical_outputs_have_no_worst_element():
    x = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    r = compare(x, x.copy(), 1e-5, 1e-5)
    assert r.ok and r.max_abs == 0 and r.worst is None and r.where() == "-"


def test_the_worst_element_is_the_one_furthest_beyond_tolerance():
    expected = np.full((2, 3, 4, 5), 100.0, np.float32)
    got = expected.copy()
    got[0, 0, 0, 0] += 1e-3          # within rtol 1e-5 * 100 + atol: not the worst
    got[1, 2, 3, 4] += 5e-3          # beyond it
    r = compare(got, expected, 1e-5, 1e-5)
    assert not r.ok
    assert r.worst == (1, 2, 3, 4) and r.where() == "B,F,Y,X=(1,2,3,4)"
    assert r.max_abs == float(np.float32(100.005) - np.float32(100.0))


def test_nan_equals_nan_but_not_a_number():
    e = np.array([[1.0, np.nan, 3.0]], np.float32)
    assert compare(e.copy(), e, 0, 0).ok
    got = np.array([[1.0, 2.0, np.nan]], np.float32)
    r = compare(got, e, 1e-5, 1e-5)
    assert not r.ok and r.max_abs == float("inf")
    assert r.where() == "B,F,Y,X=(0,1,0,0)"       # rank 2 shown in the 4-D view


def test_shapes_that_differ_are_said_in_words():
    r = compare_all([np.zeros((1, 2))], [np.zeros((1, 3))], 1e-5, 1e-5)
    assert not r.ok and r.problem == "output 0 has shape [1, 2], the reference [1, 3]"
    r = compare_all([np.zeros(2)], [np.zeros(2), np.zeros(2)], 1e-5, 1e-5)
    assert r.problem == "1 output(s), the reference gives 2"
