"""graph/fold_eval.py: the shape arithmetic the ONNX reader and the shape-folding pass evaluate,
op by op, with ONNX's semantics where numpy's differ (integer Div truncates, Mod's sign per
fmod, Slice clamps, negative axes and indices, booleans held as u8)."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.graph.fold_eval import evaluate, parse_dims, shape_text


def one(op, *inputs, shape=None, **attrs):
    out = evaluate(op, {k: str(v) for k, v in attrs.items()}, list(inputs), shape)
    assert len(out) == 1
    return out[0]


def i64(*values):
    return np.array(values, np.int64)


def test_shape_with_start_and_end_clamps_and_counts_from_the_end():
    assert one("Shape", None, shape=(2, 3, 4)).tolist() == [2, 3, 4]
    assert one("Shape", None, shape=(2, 3, 4), start=1).tolist() == [3, 4]
    assert one("Shape", None, shape=(2, 3, 4), start=-2, end=-1).tolist() == [3]
    assert one("Shape", None, shape=(2, 3, 4), start=-9, end=99).tolist() == [2, 3, 4]
    assert one("Shape", None, shape=(2, 3, 4)).dtype == np.int64


def test_size_is_an_int64_scalar():
    size = one("Size", None, shape=(2, 3, 4))
    assert size.shape == () and size.dtype == np.int64 and int(size) == 24


def test_gather_takes_negative_indices_and_refuses_out_of_range():
    shape = i64(2, 3, 4)
    assert one("Gather", shape, np.int64(-1), axis=0).tolist() == 4
    assert one("Gather", shape, i64(0, 2)).tolist() == [2, 4]
    with pytest.raises(ValueError, match="from -3 to 2"):
        one("Gather", shape, i64(3))


@pytest.mark.parametrize("starts, ends, axes, steps, want", [
    ([1], [2**62], None, None, [1, 2, 3, 4]),               # an end past the size clamps
    ([-2], [2**62], None, None, [3, 4]),                     # a negative start counts back
    ([-1], [-2**63], None, [-1], [4, 3, 2, 1, 0]),           # backwards to the start
    ([0], [5], [-1], [2], [0, 2, 4]),                         # a negative axis
    ([10], [20], None, None, []),                             # past the end: empty
])
def test_slice_clamps_as_onnx_does(starts, ends, axes, steps, want):
    got = one("Slice", np.arange(5), i64(*starts), i64(*ends),
              None if axes is None else i64(*axes), None if steps is None else i64(*steps))
    assert got.tolist() == want


def test_slice_bounds_fill_in_the_axes_and_steps_left_out():
    start, stop, step, axes = evaluate("SliceBounds", {"rank": "3"}, [i64(1), i64(-1)])
    assert (start.tolist(), stop.tolist(), step.tolist(), axes.tolist()) == ([1], [-1], [1],
                                                                             [0])
    *_, axes = evaluate("SliceBounds", {"rank": "3"}, [i64(1), i64(2), i64(-1), None])
    assert axes.tolist() == [2]
    with pytest.raises(ValueError, match="step of 0"):
        evaluate("SliceBounds", {"rank": "3"}, [i64(1), i64(2), None, i64(0)])


def test_split_evenly_or_by_sizes_and_its_bounds():
    parts = evaluate("Split", {"axis": "0", "outputs": "2"}, [i64(2, 3, 4, 5, 6), None])
    assert [p.tolist() for p in parts] == [[2, 3, 4], [5, 6]]       # the last part smaller
    parts = evaluate("Split", {"axis": "0", "outputs": "2"}, [i64(2, 3, 4), i64(1, 2)])
    assert [p.tolist() for p in parts] == [[2], [3, 4]]
    bounds = evaluate("SplitBounds", {"outputs": "2", "length": "6"}, [i64(2, 4)])
    assert [b.tolist() for b in bounds] == [[0], [2], [2], [6]]
    with pytest.raises(ValueError, match="do not cut"):
        evaluate("SplitBounds", {"outputs": "2", "length": "6"}, [i64(2, 3)])


def test_concat_unsqueeze_squeeze_with_negative_axes():
    assert one("Concat", i64(1), i64(2, 3), axis=-1).tolist() == [1, 2, 3]
    assert one("Unsqueeze", np.int64(7), i64(-1)).shape == (1,)
    assert one("Unsqueeze", i64(1, 2), i64(0, -1)).shape == (1, 2, 1)
    assert one("Squeeze", np.zeros((1, 3, 1)), i64(-1)).shape == (1, 3)
    assert one("Squeeze", np.zeros((1, 3, 1)), None).shape == (3,)
    with pytest.raises(ValueError, match="cannot squeeze"):
        one("Squeeze", np.zeros((1, 3)), i64(1))


def test_integer_div_truncates_toward_zero_and_refuses_zero():
    got = one("Div", i64(7, -7, 7, -7), i64(2, 2, -2, -2))
    assert got.tolist() == [3, -3, -3, 3] and got.dtype == np.int64
    with pytest.raises(ValueError, match="division by zero"):
        one("Div", i64(1), i64(0))
    assert one("Div", np.float32(1), np.float32(4)) == np.float32(0.25)


def test_mod_takes_the_sign_fmod_asks_for():
    a, b = i64(7, -7, 7, -7), i64(3, 3, -3, -3)
    assert one("Mod", a, b).tolist() == [1, 2, -2, -1]             # the divisor's sign
    assert one("Mod", a, b, fmod=1).tolist() == [1, -1, 1, -1]     # the dividend's


def test_arithmetic_broadcasts_and_keeps_the_integer_type():
    assert one("Add", i64(1, 2), np.int64(3)).tolist() == [4, 5]
    assert one("Sub", i64(1), i64(3)).tolist() == [-2]
    assert one("Mul", i64(2, 3), i64(4)).dtype == np.int64
    assert one("Max", i64(1, 5), i64(3)).tolist() == [3, 5]
    assert one("Neg", i64(3)).tolist() == [-3]


def test_comparisons_and_logic_answer_u8():
    eq = one("Equal", i64(1, -1, 3), i64(-1))
    assert eq.dtype == np.uint8 and eq.tolist() == [0, 1, 0]
    assert one("Less", i64(1, 5), i64(3)).tolist() == [1, 0]
    assert one("Greater", i64(1, 5), i64(3)).tolist() == [0, 1]
    assert one("Not", np.array([0, 1], np.uint8)).tolist() == [1, 0]
    assert one("And", np.array([1, 1], np.uint8), np.array([0, 2], np.uint8)).tolist() == [0, 1]
    assert one("Or", np.array([0, 0], np.uint8), np.array([0, 2], np.uint8)).tolist() == [0, 1]


def test_where_picks_by_any_nonzero_condition():
    got = one("Where", np.array([1, 0, 2], np.uint8), i64(1, 1, 1), i64(7, 8, 9))
    assert got.tolist() == [1, 8, 1] and got.dtype == np.int64


def test_range_counts_up_down_and_empty():
    assert one("Range", np.int64(0), np.int64(5), np.int64(2)).tolist() == [0, 2, 4]
    assert one("Range", np.int64(5), np.int64(0), np.int64(-2)).tolist() == [5, 3, 1]
    assert one("Range", np.int64(5), np.int64(0), np.int64(1)).tolist() == []
    got = one("Range", np.float32(0), np.float32(1), np.float32(0.25))
    assert got.dtype == np.float32 and got.tolist() == [0, 0.25, 0.5, 0.75]
    with pytest.raises(ValueError, match="delta is 0"):
        one("Range", np.int64(0), np.int64(5), np.int64(0))


def test_constant_of_shape_fills_with_its_value_or_float_zero():
    zeros = one("ConstantOfShape", i64(2, 3))
    assert zeros.shape == (2, 3) and zeros.dtype == np.float32 and not zeros.any()
    ones = one("ConstantOfShape", i64(3), i64(1))
    assert ones.tolist() == [1, 1, 1] and ones.dtype == np.int64
    with pytest.raises(ValueError, match="negative or too large"):
        one("ConstantOfShape", i64(-1))


def test_cast_and_cast_like():
    assert one("Cast", i64(0, 3), to="float32", boolean=0).dtype == np.float32
    got = one("Cast", np.array([0.0, 0.5], np.float32), to="uint8", boolean=1)
    assert got.tolist() == [0, 1]           # to bool is a comparison with 0, not a truncation
    assert one("CastLike", np.int64(24), to="float32", boolean=0).dtype == np.float32


def test_expand_reshape_tile():
    assert one("Expand", i64(1, 2), i64(3, 1)).shape == (3, 2)      # bidirectional
    assert one("Expand", np.zeros((2, 1)), i64(1, 4)).shape == (2, 4)
    assert one("Reshape", np.zeros((2, 3, 4)), i64(0, -1)).shape == (2, 12)
    assert one("Reshape", np.zeros((0, 3)), i64(0, 3), allowzero=1).shape == (0, 3)
    assert one("Tile", i64(1, 2), i64(2)).tolist() == [1, 2, 1, 2]


def test_an_op_not_evaluated_and_too_large_a_result_are_refused():
    with pytest.raises(ValueError, match="not shape arithmetic"):
        one("Conv", i64(1))
    with pytest.raises(ValueError, match="holds at most"):
        one("Expand", i64(1), i64(1 << 40))
    with pytest.raises(ValueError, match="holds at most"):
        one("ConstantOfShape", i64(1 << 20, 1 << 20))


def test_dims_text_round_trips_symbols_and_unknowns():
    dims = [2, "batch", None, 0]
    assert parse_dims(shape_text(dims)) == dims
    assert parse_dims("") == []
