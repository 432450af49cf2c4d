"""ShuffleChannels (ops/tensor/shuffle.py) against the reshape-transpose-reshape definition."""
import numpy as np
import pytest

from customlayers.errors import BindingError
from op_harness import run_op, run_openvino

RNG = np.random.default_rng(9)


def shuffle_ref(x, axis, group):
    axis = axis % x.ndim
    shape = x.shape
    split = shape[:axis] + (group, shape[axis] // group) + shape[axis + 1:]
    y = x.reshape(split)
    return np.swapaxes(y, axis, axis + 1).reshape(shape)


@pytest.mark.parametrize("shape,axis,group", [
    ((1, 12, 3, 3), 1, 4), ((2, 6, 5, 7), 1, 3), ((2, 6, 5, 7), 1, 1), ((2, 6, 5, 7), 1, 6),
    ((3, 4, 10), -1, 5), ((8, 3), 0, 2),
])
def test_matches_reference(cl_env, shape, axis, group):
    x = RNG.standard_normal(shape).astype(np.float32)
    got = run_op(cl_env, "ShuffleChannels", [x], {"axis": str(axis), "group": str(group)})[0]
    np.testing.assert_array_equal(got, shuffle_ref(x, axis, group))


def test_indivisible_channels(cl_env):
    with pytest.raises(BindingError, match="dim 6 of axis 1 is not divisible by group=4"):
        run_op(cl_env, "ShuffleChannels", [np.zeros((1, 6, 2, 2), np.float32)], {"group": "4"})


def test_bad_group_names_the_layer(cl_env):
    with pytest.raises(BindingError, match=r"layer 'sh' \(ShuffleChannels\): group=0"):
        run_op(cl_env, "ShuffleChannels", [np.zeros((1, 6), np.float32)], {"group": "0"},
               layer="sh")


def test_matches_openvino_cpu(cl_env):
    ops = pytest.importorskip("openvino.opset13")
    x = RNG.standard_normal((2, 12, 3, 5)).astype(np.float32)
    want = run_openvino(lambda p: ops.shuffle_channels(p, 1, 4), [x])
    got = run_op(cl_env, "ShuffleChannels", [x], {"axis": "1", "group": "4"})[0]
    np.testing.assert_array_equal(got, want)
