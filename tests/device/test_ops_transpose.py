"""Transpose (ops/tensor/transpose.py) on the device against numpy.transpose, and OpenVINO's CPU."""
import itertools

import numpy as np
import pytest

from customlayers.errors import BindingError
from op_harness import run_op, run_openvino

RNG = np.random.default_rng(5)


@pytest.mark.parametrize("order", list(itertools.permutations(range(4))))
def test_every_4d_order(cl_env, order):
    x = RNG.standard_normal((2, 3, 5, 7)).astype(np.float32)
    got = run_op(cl_env, "Transpose", [x, np.array(order, np.int64)])[0]
    np.testing.assert_array_equal(got, np.transpose(x, order))


@pytest.mark.parametrize("shape,order", [
    ((5,), (0,)), ((3, 17), (1, 0)), ((4, 1, 6), (2, 0, 1)), ((1, 1, 9, 1), (3, 2, 1, 0)),
    ((2, 3, 2, 2, 3), (0, 2, 1, 3, 4)),  # rank 5, as in shufflenet's reshape chains
])
def test_other_ranks(cl_env, shape, order):
    x = RNG.standard_normal(shape).astype(np.float32)
    got = run_op(cl_env, "Transpose", [x, np.array(order, np.int32)])[0]
    np.testing.assert_array_equal(got, np.transpose(x, order))


def test_empty_order_reverses(cl_env):
    x = RNG.integers(0, 100, (2, 3, 4)).astype(np.int32)
    got = run_op(cl_env, "Transpose", [x], unbuffered_consts={1: np.array([], np.int64)})[0]
    np.testing.assert_array_equal(got, x.T)


def test_bad_order(cl_env):
    with pytest.raises(BindingError, match=r"order \[0, 0, 1\] is not a permutation of the 3 axes"):
        run_op(cl_env, "Transpose", [np.zeros((2, 3, 4), np.float32), np.array([0, 0, 1])])


def test_matches_openvino_cpu(cl_env):
    ops = pytest.importorskip("openvino.opset13")
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    want = run_openvino(lambda p: ops.transpose(p, ops.constant(np.array([0, 2, 3, 1]))), [x])
    got = run_op(cl_env, "Transpose", [x, np.array([0, 2, 3, 1], np.int64)])[0]
    np.testing.assert_array_equal(got, want)
