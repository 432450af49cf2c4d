"""TensorDesc: golden pitches and offsets for the four formats with padding, and pack/unpack."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from customlayers.errors import TensorError
from customlayers.jit.tensor import FORMAT_ORDER, TensorDesc, parse_tensor_arg


def test_spec_example():
    t = TensorDesc((1, 3, 224, 224))
    assert (t.pitches, t.offset, t.count, t.buffer_count) == ((150528, 50176, 224, 1), 0,
                                                              150528, 150528)


# 2x3x4x5 with lower 1,0,2,1 and upper 0,2,1,3: padded B'=3 F'=5 Y'=7 X'=9
PAD = dict(shape=(2, 3, 4, 5), lower_pad=(1, 0, 2, 1), upper_pad=(0, 2, 1, 3))


@pytest.mark.parametrize("fmt, pitches, offset", [
    # SPEC section 3: bfyx x=1 y=X' f=Y'X' b=F'Y'X'
    ("BFYX", (315, 63, 9, 1), 315 + 2 * 9 + 1),
    # byxf f=1 x=F' y=X'F' b=Y'X'F'
    ("BYXF", (315, 1, 45, 5), 315 + 2 * 45 + 5),
    # yxfb b=1 f=B' x=F'B' y=X'F'B'
    ("YXFB", (1, 3, 135, 15), 1 + 2 * 135 + 15),
    # fyxb b=1 x=B' y=X'B' f=Y'X'B'
    ("FYXB", (1, 189, 27, 3), 1 + 2 * 27 + 3),
])
def test_golden_pitches_and_offset(fmt, pitches, offset):
    t = TensorDesc(format=fmt, **PAD)
    assert t.pitches == pitches
    assert t.offset == offset
    assert t.buffer_count == 3 * 5 * 7 * 9
    assert TensorDesc(format=fmt.lower(), **PAD).format == fmt


def test_low_rank_is_padded_with_ones_at_the_end():
    assert TensorDesc((6, 7)).dims == (6, 7, 1, 1)
    assert TensorDesc(()).dims == (1, 1, 1, 1)


def test_a_zero_dim_is_a_tensor_with_no_element():
    desc = TensorDesc((2, 0, 3))
    assert (desc.count, desc.nbytes) == (0, 0)


@pytest.mark.parametrize("kwargs, message", [
    (dict(shape=(1,) * 9), "rank 9 is over 8"),
    (dict(shape=(1, 2, 3, 4, 5), format="byxf"), "a tensor of rank 5 can only be dense BFYX"),
    (dict(shape=(1, -2)), "no dim may be negative"),
    (dict(shape=(1,), dtype="bf16"),
     "element type 'bf16' is not one of f32, f16, i8, u8, i16, u16, i32, u32, i64, u64"),
    (dict(shape=(1,), format="Bfyx"), "format 'Bfyx' is not one of BFYX, BYXF, YXFB, FYXB"),
    (dict(shape=(1,), lower_pad=(0, 0, -1, 0)), "lower padding must not be negative"),
])
def test_impossible_tensors(kwargs, message):
    with pytest.raises(TensorError, match=message):
        TensorDesc(**kwargs)


def test_parse_tensor_arg():
    t = parse_tensor_arg("1x3x8x8:f16:byxf:pad=0,0,1,1/0,0,2,2")
    assert (t.shape, t.dtype, t.format, t.lower_pad, t.upper_pad) == (
        (1, 3, 8, 8), "f16", "BYXF", (0, 0, 1, 1), (0, 0, 2, 2))
    assert parse_tensor_arg("2x5:pad=0,0,1,1").upper_pad == (0, 0, 1, 1)
    with pytest.raises(TensorError, match="is not like 1x3x224x224"):
        parse_tensor_arg("1xAx3")


shapes = st.lists(st.integers(1, 4), min_size=0, max_size=4).map(tuple)
pads = st.tuples(*[st.integers(0, 2)] * 4)


@settings(max_examples=150, deadline=None)
@given(shapes, pads, pads, st.sampled_from(list(FORMAT_ORDER)),
       st.sampled_from(["f32", "f16", "i8", "u8", "i32", "i64"]))
def test_pack_puts_each_element_at_offset_plus_pitches(shape, lower, upper, fmt, dtype):
    t = TensorDesc(shape, dtype, fmt, lower, upper)
    logical = (np.arange(int(np.prod(shape, dtype=np.int64))) % 100 + 1).reshape(shape)
    flat = t.pack(logical, fill=0)
    assert flat.size == t.buffer_count and flat.dtype == t.np_dtype
    view = logical.reshape(t.dims)
    for index in np.ndindex(*t.dims):
        where = t.offset + sum(p * i for p, i in zip(t.pitches, index))
        assert flat[where] == view[index]
    # every other element is padding
    assert np.count_nonzero(flat) == logical.size
    np.testing.assert_array_equal(t.unpack(flat), logical.astype(t.np_dtype))


def test_pack_rejects_wrong_shape_and_unpack_short_buffer():
    t = TensorDesc((2, 3))
    with pytest.raises(TensorError, match=r"array of shape \[3, 2\] does not match"):
        t.pack(np.zeros((3, 2)))
    with pytest.raises(TensorError, match="buffer holds 5 elements, the tensor needs 6"):
        t.unpack(np.zeros(5, np.float32))


@pytest.mark.parametrize("text, message", [
    ("1x3:f32:f16", "'1x3:f32:f16' gives two element types, 'f32' and 'f16'; give one"),
    ("1x3:bfyx:byxf", "'1x3:bfyx:byxf' gives two formats, 'bfyx' and 'byxf'; give one"),
    ("1x3:pad=0,0,0,1:pad=0,0,1,0", "gives two paddings, 'pad=0,0,0,1' and 'pad=0,0,1,0'"),
])
def test_parse_tensor_arg_refuses_two_of_a_kind(text, message):
    with pytest.raises(TensorError, match=re.escape(message)):
        parse_tensor_arg(text)
