"""Convert, Pad, Gather, Slice, StridedSlice, Tile, Broadcast (ops/tensor/misc.py) on the device
against numpy, a few against OpenVINO's CPU plugin."""
import numpy as np
import pytest

from customlayers.errors import BindingError
from op_harness import run_op, run_openvino

RNG = np.random.default_rng(13)
I64 = np.int64


def x_of(shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype) * 4


# -- Convert ---------------------------------------------------------------------------------
@pytest.mark.parametrize("src,dst,dst_np", [
    (np.float32, "i32", np.int32), (np.float32, "i64", np.int64), (np.int32, "f32", np.float32),
    (np.int64, "i32", np.int32), (np.float32, "f32", np.float32), (np.int32, "u8", np.uint8),
])
def test_convert(cl_env, src, dst, dst_np):
    x = (RNG.standard_normal((3, 5, 7)) * 50).astype(src)
    if dst == "u8":
        x = np.abs(x)
    got = run_op(cl_env, "Convert", [x], {"destination_type": dst})[0]
    assert got.dtype == dst_np
    np.testing.assert_array_equal(got, x.astype(dst_np))  # C casts truncate, as numpy


def test_convert_float_to_u8_saturates_and_to_boolean(cl_env):
    x = np.array([-3.5, 0.0, 2.7, 300.0, 0.25], np.float32)
    np.testing.assert_array_equal(run_op(cl_env, "Convert", [x], {"destination_type": "u8"})[0],
                                  [0, 0, 2, 255, 0])
    np.testing.assert_array_equal(
        run_op(cl_env, "Convert", [x], {"destination_type": "boolean"})[0], [1, 0, 1, 1, 1])


def test_convert_unknown_type_names_the_layer(cl_env):
    with pytest.raises(BindingError, match=r"layer 'cv' \(Convert\): destination_type: element "
                                           r"type 'bf16' is not one of"):
        run_op(cl_env, "Convert", [x_of(3)], {"destination_type": "bf16"}, layer="cv")


# -- Pad -------------------------------------------------------------------------------------
NP_PAD_MODE = {"constant": "constant", "edge": "edge", "reflect": "reflect",
               "symmetric": "symmetric"}


@pytest.mark.parametrize("mode", sorted(NP_PAD_MODE))
@pytest.mark.parametrize("shape,begin,end", [
    ((3, 4), (0, 1), (2, 3)),                    # the spec's example
    ((2, 3, 5, 5), (0, 0, 1, 2), (0, 0, 2, 1)),  # spatial, asymmetric, batch 2
    ((2, 3, 4), (1, 2, 3), (1, 0, 2)),
])
def test_pad_matches_numpy(cl_env, mode, shape, begin, end):
    x = x_of(shape)
    got = run_op(cl_env, "Pad", [x, np.array(begin, I64), np.array(end, I64)],
                 {"pad_mode": mode})[0]
    np.testing.assert_array_equal(got, np.pad(x, list(zip(begin, end)), mode=NP_PAD_MODE[mode]))


def test_pad_constant_value_and_crop(cl_env):
    x = x_of((4, 5))
    got = run_op(cl_env, "Pad", [x, np.array([1, -1], I64), np.array([-2, 2], I64),
                                 np.array(7.5, np.float32)], {"pad_mode": "constant"})[0]
    want = np.pad(x[:-2, 1:], [(1, 0), (0, 2)], constant_values=7.5)
    np.testing.assert_array_equal(got, want)


def test_pad_edge_wider_than_the_tensor(cl_env):
    x = x_of((2, 3))
    got = run_op(cl_env, "Pad", [x, np.array([3, 4], I64), np.array([2, 5], I64)],
                 {"pad_mode": "edge"})[0]
    np.testing.assert_array_equal(got, np.pad(x, [(3, 2), (4, 5)], mode="edge"))


def test_pad_bad_mode_and_pads(cl_env):
    with pytest.raises(BindingError, match="pad_mode='mirror' is not one of constant, edge"):
        run_op(cl_env, "Pad", [x_of(3), np.array([1], I64), np.array([1], I64)],
               {"pad_mode": "mirror"})
    with pytest.raises(BindingError, match=r"need one value per axis of the input \[2, 3\]"):
        run_op(cl_env, "Pad", [x_of((2, 3)), np.array([1], I64), np.array([1], I64)])


def test_pad_matches_openvino_cpu(cl_env):
    ops = pytest.importorskip("openvino.opset13")
    x = x_of((1, 2, 4, 5))
    want = run_openvino(lambda p: ops.pad(p, np.array([0, 0, 2, 1]), np.array([0, 0, 1, 3]),
                                          "reflect"), [x])
    got = run_op(cl_env, "Pad", [x, np.array([0, 0, 2, 1], I64), np.array([0, 0, 1, 3], I64)],
                 {"pad_mode": "reflect"})[0]
    np.testing.assert_array_equal(got, want)


# -- Gather ----------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,indices,axis", [
    ((5, 3), [4, 0, 2], 0),
    ((2, 6, 4), [[1, 5], [0, -1]], 1),       # 2-D indices, a negative index
    ((2, 3, 7), [6, 0, 3, 3], -1),
    ((4,), 2, 0),                            # scalar index: the axis goes away
])
@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64])
def test_gather_matches_numpy(cl_env, shape, indices, axis, idx_dtype):
    x = x_of(shape)
    idx = np.array(indices, idx_dtype)
    got = run_op(cl_env, "Gather", [x, idx, np.array(axis, I64)])[0]
    np.testing.assert_array_equal(got, np.take(x, idx, axis=axis))


def test_gather_out_of_range_reads_zero(cl_env):
    x = x_of((3, 2))
    got = run_op(cl_env, "Gather", [x, np.array([0, 7], np.int32), np.array(0, I64)])[0]
    np.testing.assert_array_equal(got, [x[0], [0, 0]])


def test_gather_batch_dims_unsupported(cl_env):
    with pytest.raises(BindingError, match=r"batch_dims=1 is not supported"):
        run_op(cl_env, "Gather", [x_of((2, 3)), np.array([0], np.int32), np.array(1, I64)],
               {"batch_dims": "1"})


# -- Slice / StridedSlice --------------------------------------------------------------------
@pytest.mark.parametrize("shape,start,stop,step,axes", [
    ((10,), [2], [8], [2], None),
    ((4, 9), [1, -7], [3, 100], [1, 3], None),           # negative start, clamped stop
    ((2, 3, 8), [-1], [-9], [-2], [2]),                  # reverse with a negative step
    ((2, 5, 4, 6), [1, 0], [4, 5], [2, 1], [-1, 2]),     # axes given, not in order
])
def test_slice_matches_numpy(cl_env, shape, start, stop, step, axes):
    x = x_of(shape)
    items = [slice(None)] * len(shape)
    for b, e, s, a in zip(start, stop, step, axes if axes is not None else range(len(start))):
        items[a] = slice(b, e, s)
    inputs = [x, np.array(start, I64), np.array(stop, I64), np.array(step, I64)]
    if axes is not None:
        inputs.append(np.array(axes, I64))
    got = run_op(cl_env, "Slice", inputs)[0]
    np.testing.assert_array_equal(got, x[tuple(items)])


def test_empty_slice_is_a_zero_size_tensor(cl_env):
    # the network runs nothing for it (tests/device/test_zero_size.py)
    out, = run_op(cl_env, "Slice", [x_of(5)] + [np.array([v], I64) for v in (3, 3, 1)])
    assert out.shape == (0,)


def _mask(bits):
    return ",".join(str(b) for b in bits)


@pytest.mark.parametrize("shape,begin,end,strides,masks,index", [
    ((4, 6), [1, 2], [3, 5], [1, 1], {}, (slice(1, 3), slice(2, 5))),
    ((4, 6), [1, 2], [3, 5], [1, 2], {"begin_mask": [1, 0], "end_mask": [0, 1]},
     (slice(None, 3), slice(2, None, 2))),
    ((2, 3, 4), [0, 1], [0, 2], [1, 1], {"shrink_axis_mask": [1, 0]}, (0, slice(1, 2))),
    ((2, 3, 4), [0, 0, 1], [0, 0, 3], [1, 1, 1], {"new_axis_mask": [1, 0, 0],
                                                  "end_mask": [0, 1, 0]},
     (None, slice(0, None), slice(1, 3))),
    ((2, 3, 4), [0, 1], [0, 3], [1, 1], {"ellipsis_mask": [1, 0]}, (Ellipsis, slice(1, 3))),
    ((2, 3, 4), [-1, 0, -1], [0, 0, -5], [-1, 1, -1], {"end_mask": [1, 1, 0]},
     (slice(-1, None, -1), slice(None), slice(-1, -5, -1))),
])
def test_strided_slice_matches_numpy(cl_env, shape, begin, end, strides, masks, index):
    x = x_of(shape)
    attrs = {"begin_mask": "0", "end_mask": "0"}
    attrs.update({k: _mask(v) for k, v in masks.items()})
    got = run_op(cl_env, "StridedSlice", [x, np.array(begin, I64), np.array(end, I64),
                                           np.array(strides, I64)], attrs)[0]
    np.testing.assert_array_equal(got, x[index])


def test_strided_slice_matches_openvino_cpu(cl_env):
    ops = pytest.importorskip("openvino.opset13")
    x = x_of((3, 8, 5))
    b, e, s = np.array([0, 7, 1]), np.array([2, 0, 5]), np.array([1, -2, 2])
    want = run_openvino(lambda p: ops.strided_slice(p, b, e, s, [1, 0, 0], [0, 0, 1]), [x])
    got = run_op(cl_env, "StridedSlice", [x, b.astype(I64), e.astype(I64), s.astype(I64)],
                 {"begin_mask": "1,0,0", "end_mask": "0,0,1"})[0]
    np.testing.assert_array_equal(got, want)


# -- Tile / Broadcast ------------------------------------------------------------------------
@pytest.mark.parametrize("shape,repeats", [
    ((2, 3), [2, 3]), ((3,), [4]), ((2, 1, 3), [1, 5, 1]), ((2, 3), [2, 1, 2]), ((1, 2, 3), [3]),
])
def test_tile_matches_numpy(cl_env, shape, repeats):
    x = x_of(shape)
    got = run_op(cl_env, "Tile", [x, np.array(repeats, I64)])[0]
    np.testing.assert_array_equal(got, np.tile(x, repeats))


@pytest.mark.parametrize("shape,target,mode,axes", [
    ((3, 1), (2, 3, 4), "numpy", None),
    ((4,), (2, 3, 4), "numpy", None),
    ((2, 1, 4), (3, 1), "bidirectional", None),
    ((3,), (2, 3, 4), "explicit", [1]),
    ((2, 4), (2, 3, 4), "explicit", [0, 2]),
])
def test_broadcast(cl_env, shape, target, mode, axes):
    x = x_of(shape)
    inputs = [x, np.array(target, I64)] + ([np.array(axes, I64)] if axes else [])
    got = run_op(cl_env, "Broadcast", inputs, {"mode": mode})[0]
    if mode == "explicit":
        expanded = x.reshape([shape[axes.index(k)] if k in axes else 1
                              for k in range(len(target))])
        want = np.broadcast_to(expanded, target)
    elif mode == "bidirectional":
        want = x * np.ones(target, np.float32)
    else:
        want = np.broadcast_to(x, target)
    np.testing.assert_array_equal(got, want)


def test_broadcast_numpy_refuses_a_smaller_target(cl_env):
    with pytest.raises(BindingError, match=r"does not broadcast to the target \[3, 1\]"):
        run_op(cl_env, "Broadcast", [x_of((2, 1, 4)), np.array([3, 1], I64)])
