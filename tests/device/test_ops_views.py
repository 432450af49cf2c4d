"""Reshape, Squeeze, Unsqueeze, Flatten (ops/tensor/views.py): shapes only, no kernel."""
import numpy as np
import pytest

from customlayers.errors import BindingError
from customlayers.jit.tensor import TensorDesc
from customlayers.ops import get_op
from op_harness import run_op


def out_shape(op_type, shape, const=None, attrs=None):
    op = get_op(op_type)
    assert op.is_view
    parsed = op.parse_attributes(attrs or {}, "v")
    consts = {} if const is None else {1: np.asarray(const, np.int64)}
    descs = [TensorDesc(shape)] + ([TensorDesc(np.asarray(const).shape or (1,), "i64")]
                                   if const is not None else [])
    assert op.launches(parsed, descs, [], consts) == []
    return op.infer_shapes(parsed, descs, consts)[0][0]


@pytest.mark.parametrize("shape,target,special_zero,want", [
    ((1, 112, 56, 56), [0, 4, 28, 56, 56], "true", (1, 4, 28, 56, 56)),   # shufflenet
    ((1, 28, 4, 56, 56), [0, -1, 56, 56], "true", (1, 112, 56, 56)),
    ((2, 3, 4), [-1], "false", (24,)),
    ((2, 3, 4), [4, -1], "false", (4, 6)),
    ((2, 3, 4), [0, 0, 2, 2], "true", (2, 3, 2, 2)),
    ((6,), [1, 2, 1, 3], "false", (1, 2, 1, 3)),
])
def test_reshape(shape, target, special_zero, want):
    assert out_shape("Reshape", shape, target, {"special_zero": special_zero}) == want


@pytest.mark.parametrize("shape,target,attrs,message", [
    ((2, 3), [4, -1], {}, r"cannot reshape \[2, 3\] \(6 elements\) to \[4, -1\]: 6 is not "
                          r"divisible by 4"),
    ((2, 3), [5], {}, r"cannot reshape \[2, 3\] \(6 elements\) to \[5\] \(5 elements\)"),
    ((2, 3), [-1, -1], {}, r"more than one -1"),
    # without special_zero a 0 is a dim of 0 (ONNX's allowzero): no element, not 6
    ((2, 3), [0, 3], {}, r"cannot reshape \[2, 3\] \(6 elements\) to \[0, 3\] \(0 elements\)"),
    ((0, 3), [0, -1], {}, r"a -1 and a dim of 0"),
    ((2, 3), [2, 3, 0], {"special_zero": "true"}, r"copies dim 2 .* has rank 2"),
    ((2, 3), [2, -3], {}, r"dim -3 at index 1"),
])
def test_reshape_impossible_targets(shape, target, attrs, message):
    with pytest.raises(BindingError, match=message):
        out_shape("Reshape", shape, target, attrs)


def test_reshape_needs_a_constant_target():
    op = get_op("Reshape")
    with pytest.raises(BindingError, match=r"target shape \(input 1\) must be a constant"):
        op.infer_shapes(op.parse_attributes({}, "r"), [TensorDesc((2, 3)), TensorDesc((2,), "i64")],
                        {})


def test_squeeze():
    assert out_shape("Squeeze", (1, 3, 1, 4)) == (3, 4)
    assert out_shape("Squeeze", (1, 3, 1, 4), [0]) == (3, 1, 4)
    assert out_shape("Squeeze", (1, 3, 1, 4), [-2, 0]) == (3, 4)
    with pytest.raises(BindingError, match=r"axis 1 of shape \[1, 3, 1, 4\] has size 3"):
        out_shape("Squeeze", (1, 3, 1, 4), [1])
    with pytest.raises(BindingError, match=r"axis 4 is out of range"):
        out_shape("Squeeze", (1, 3, 1, 4), [4])


def test_unsqueeze():
    assert out_shape("Unsqueeze", (3, 4), [0]) == (1, 3, 4)
    assert out_shape("Unsqueeze", (3, 4), [0, 3]) == (1, 3, 4, 1)
    assert out_shape("Unsqueeze", (3, 4), [-1]) == (3, 4, 1)
    with pytest.raises(BindingError, match="axis 1 is given twice"):
        out_shape("Unsqueeze", (3, 4), [1, 1])
    with pytest.raises(BindingError, match="out of range for the output rank 3"):
        out_shape("Unsqueeze", (3, 4), [5])


def test_flatten():
    assert out_shape("Flatten", (2, 3, 4, 5)) == (2, 60)
    assert out_shape("Flatten", (2, 3, 4, 5), attrs={"axis": "0"}) == (1, 120)
    assert out_shape("Flatten", (2, 3, 4, 5), attrs={"axis": "-1"}) == (24, 5)
    with pytest.raises(BindingError, match="axis 5 is out of range for rank 4"):
        out_shape("Flatten", (2, 3, 4, 5), attrs={"axis": "5"})


def test_view_keeps_the_data(cl_env):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    got = run_op(cl_env, "Reshape", [x, np.array([4, -1], np.int64)], {"special_zero": "false"})
    np.testing.assert_array_equal(got[0], x.reshape(4, 6))
