"""Built-in ops build one program per op kind, not per shape (issue 22): the launches of one op
at different shapes, windows, axes and broadcasts carry the same (source, options), with the
sizes in their arguments. No device: the launches are data (jit/launch.py); the device tests of
each op (tests/device/test_ops_*.py) check the numbers."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.jit.launch import CompileContext, DeviceTraits
from customlayers.jit.tensor import TensorDesc
from customlayers.ops import get_op
from customlayers.ops.tensor.affine import channel_affine_launch

GPU = DeviceTraits("GPU", compute_units=16, max_work_group_size=256)
CPU = DeviceTraits("CPU", compute_units=2, max_work_group_size=4096, float_vector_width=8)


def programs(op_type: str, calls, device=CPU) -> set[tuple[str, str]]:
    """The distinct (source, options) of the launches of `op_type` for each call: (raw
    attributes, input shapes or (shape, dtype) pairs, constant inputs by index)."""
    op = get_op(op_type)
    found = set()
    for raw, shapes, consts in calls:
        attrs = op.parse_attributes(raw, "layer")
        descs = [TensorDesc(*s) if isinstance(s[0], tuple) else TensorDesc(s) for s in shapes]
        out = [TensorDesc(s, d) for s, d in op.infer_shapes(attrs, descs, consts)]
        for launch in op.launches(attrs, descs, out, consts, CompileContext(device)):
            found.add((launch.source, launch.options))
    return found


def _pool(kernel, strides, pads, shape, **extra):
    raw = {"kernel": kernel, "strides": strides, "pads_begin": pads, "pads_end": pads, **extra}
    return raw, [shape], {}


@pytest.mark.parametrize("device", [CPU, GPU], ids=["cpu", "gpu"])
def test_a_pooling_of_any_window_and_shape_is_one_program(device):
    calls = [_pool("3,3", "2,2", "0,0", (1, 64, 112, 112)), _pool("2,2", "2,2", "0,0", (1, 8, 28, 28)),
             _pool("3,3", "1,1", "1,1", (2, 16, 13, 13)), _pool("5", "1", "2", (1, 4, 30))]
    assert len(programs("MaxPool", calls, device)) == 1
    avg = [(dict(raw, **{"exclude-pad": "true"}), s, c) for raw, s, c in calls]
    assert len(programs("AvgPool", avg, device)) == 1


def test_an_activation_of_any_shape_is_one_program():
    calls = [({}, [(1, 64, 56, 56)], {}), ({}, [(1, 24, 28, 28)], {}), ({}, [(7,)], {})]
    assert len(programs("ReLU", calls)) == 1


def test_an_eltwise_op_is_one_program_per_broadcast_form_not_per_shape():
    same = [({}, [(1, 8, 7, 7), (1, 8, 7, 7)], {}), ({}, [(2, 3, 5), (2, 3, 5)], {})]
    bias = [({}, [(1, 8, 7, 7), (1, 8, 1, 1)], {}), ({}, [(2, 3, 5, 4), (1, 1, 5, 1)], {}),
            ({}, [(6, 9), (9,)], {})]
    both = [({}, [(4, 1), (1, 5)], {}), ({}, [(1, 3, 1, 2), (7, 1, 6, 1)], {})]
    for calls in (same, bias, both):
        assert len(programs("Add", calls)) == 1


def test_a_transpose_of_any_order_and_shape_is_one_program():
    calls = [({}, [(2, 3, 4)], {1: np.array([2, 0, 1])}),
             ({}, [(5, 6)], {1: np.array([1, 0])}),
             ({}, [(1, 2, 3, 4, 5)], {1: np.array([0, 3, 1, 4, 2])})]
    assert len(programs("Transpose", calls)) == 1


def test_every_input_of_every_concat_shares_one_program():
    calls = [({"axis": "1"}, [(1, 3, 4, 4), (1, 5, 4, 4), (1, 1, 4, 4)], {}),
             ({"axis": "0"}, [(2, 7), (9, 7)], {})]
    assert len(programs("Concat", calls)) == 1


def test_a_channel_affine_of_any_shape_is_one_program():
    for per_item in (1, 16):
        launches = [channel_affine_launch(TensorDesc(s), True, per_item)
                    for s in ((1, 64, 56, 56), (2, 3, 7, 7), (1, 1000, 1, 1))]
        assert len({(x.source, x.options) for x in launches}) == 1


@pytest.mark.parametrize("device", [CPU, GPU], ids=["cpu", "gpu"])
def test_an_lrn_of_any_shape_and_parameters_is_one_program(device):
    raw = lambda size, alpha: {"alpha": alpha, "beta": "0.75", "bias": "1", "size": size}  # noqa: E731
    calls = [(raw("5", "0.0001"), [(1, 64, 56, 56), (1,)], {1: np.array([1])}),
             (raw("3", "0.002"), [(2, 16, 7, 9), (1,)], {1: np.array([1])})]
    assert len(programs("LRN", calls, device)) == 1


@pytest.mark.parametrize("device", [CPU, GPU], ids=["cpu", "gpu"])
def test_a_softmax_of_any_length_is_one_program_per_form(device):
    rows = [({"axis": "1"}, [(1, 1000)], {}), ({"axis": "-1"}, [(4, 7, 300)], {})]
    columns = [({"axis": "1"}, [(2, 10, 5)], {}), ({"axis": "0"}, [(6, 3)], {})]
    for calls in (rows, columns):
        assert len(programs("SoftMax", calls, device)) == 1


def test_a_reduction_over_any_axes_is_one_program_per_kind():
    calls = [({"keep_dims": "true"}, [(1, 64, 7, 7), (2,)], {1: np.array([2, 3])}),
             ({"keep_dims": "false"}, [(5, 6), (1,)], {1: np.array([0])})]
    assert len(programs("ReduceMean", calls)) == 1


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric"])
def test_a_pad_of_any_shape_and_pads_is_one_program_per_mode(mode):
    def pad(shape, begin, end):
        consts = {1: np.array(begin), 2: np.array(end), 3: np.array(0.5, np.float32)}
        return {"pad_mode": mode}, [shape, (len(begin),), (len(end),), (1,)], consts
    calls = [pad((1, 3, 8, 8), [0, 0, 1, 1], [0, 0, 1, 1]), pad((5, 6), [2, 0], [1, 3])]
    assert len(programs("Pad", calls)) == 1


def test_a_gather_of_any_shape_and_axis_is_one_program():
    calls = [({}, [(10, 4), ((3,), "i64"), ((1,), "i64")], {2: np.array([0])}),
             ({}, [(2, 7, 5), ((2, 2), "i64"), ((1,), "i64")], {2: np.array([1])})]
    assert len(programs("Gather", calls)) == 1


def test_a_transposed_convolution_of_any_geometry_is_one_program():
    def deconv(x, w, strides, pads):
        raw = {"strides": strides, "dilations": ",".join("1" * len(x[2:])),
               "pads_begin": pads, "pads_end": pads}
        return raw, [x, w], {}
    calls = [deconv((1, 4, 5, 5), (4, 2, 3, 3), "2,2", "1,1"),
             deconv((2, 3, 7), (3, 5, 4), "1", "0")]
    assert len(programs("ConvolutionBackpropData", calls)) == 1
