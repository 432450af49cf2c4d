"""Concat (ops/tensor/concat.py) on the device against numpy.concatenate, and OpenVINO's CPU."""
import numpy as np
import pytest

from customlayers.errors import BindingError
from op_harness import run_op, run_openvino

RNG = np.random.default_rng(3)


@pytest.mark.parametrize("shapes,axis", [
    ([(1, 3, 4, 5), (1, 2, 4, 5)], 1),                    # channels, as in inception
    ([(2, 3, 5), (2, 3, 1), (2, 3, 7)], 2),               # innermost axis, odd sizes
    ([(2, 3), (5, 3)], 0),                                # outermost axis
    ([(2, 1, 3, 3), (2, 4, 3, 3), (2, 2, 3, 3)], -3),     # negative axis, batch 2
    ([(7,), (9,)], -1),
    ([(1, k, 2, 2) for k in range(1, 13)], 1),            # many inputs (densenet)
])
def test_concat_matches_numpy(cl_env, shapes, axis):
    arrays = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
    got = run_op(cl_env, "Concat", arrays, {"axis": str(axis)})[0]
    np.testing.assert_array_equal(got, np.concatenate(arrays, axis=axis))


def test_concat_integers(cl_env):
    arrays = [np.array([1, 2], np.int64), np.array([3], np.int64)]
    got = run_op(cl_env, "Concat", arrays, {"axis": "0"})[0]
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, [1, 2, 3])


def test_concat_mismatched_shapes(cl_env):
    arrays = [np.zeros((1, 3, 4), np.float32), np.zeros((1, 2, 5), np.float32)]
    with pytest.raises(BindingError, match=r"input 1 has shape \[1, 2, 5\], which does not match "
                                           r"input 0's \[1, 3, 4\] outside axis 1"):
        run_op(cl_env, "Concat", arrays, {"axis": "1"})


def test_concat_axis_out_of_range(cl_env):
    with pytest.raises(BindingError, match=r"axis 3 is out of range for rank 2 \(expected -2..1\)"):
        run_op(cl_env, "Concat", [np.zeros((2, 2), np.float32)] * 2, {"axis": "3"})


def test_concat_matches_openvino_cpu(cl_env):
    ops = pytest.importorskip("openvino.opset13")
    arrays = [RNG.standard_normal((2, k, 3, 5)).astype(np.float32) for k in (3, 1, 4)]
    want = run_openvino(lambda *p: ops.concat(list(p), 1), arrays)
    np.testing.assert_array_equal(run_op(cl_env, "Concat", arrays, {"axis": "1"})[0], want)
