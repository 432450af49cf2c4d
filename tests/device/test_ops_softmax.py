"""SoftMax built-in on a real device against a numpy reference and OpenVINO CPU."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.errors import BindingError
from customlayers.jit.launch import DEFAULT_CONTEXT, CompileContext, DeviceTraits
from customlayers.jit.tensor import TensorDesc
from customlayers.ops import get_op
from launch_runner import run_launches


CPU = CompileContext(DeviceTraits("CPU", compute_units=2, max_work_group_size=4096))


@pytest.fixture(params=[DEFAULT_CONTEXT, CPU], ids=["any", "cpu"])
def ctx(request):
    """Every case runs the kernels for any device and, with a CPU DeviceTraits, the CPU's."""
    return request.param


def run_softmax(cl_env, axis, x, ctx=DEFAULT_CONTEXT):
    op = get_op("SoftMax")
    attrs = op.parse_attributes({"axis": str(axis)}, "prob")
    descs = [TensorDesc(x.shape)]
    out_descs = [TensorDesc(s, d) for s, d in op.infer_shapes(attrs, descs, {})]
    launches = op.launches(attrs, descs, out_descs, {}, ctx)
    return run_launches(cl_env, launches, [x], descs, out_descs)[0], launches


def softmax_ref(x, axis):
    e = np.exp(x.astype(np.float64) - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("shape,axis", [
    ((2, 1000), 1),           # classifier output: a work-group per row
    ((3, 65), -1),            # odd length, negative axis (opset8)
    ((2, 5, 3, 4), 1),        # channels, strided rows
    ((2, 5, 3, 4), -2),
    ((2, 5, 3, 4), 0),
    ((7,), 0),
    ((4, 3, 2), 2),           # short rows: one work item per row
    ((3, 1003), 1),           # CPU: float8 runs and a tail of 3
])
def test_softmax_matches_reference(cl_env, ctx, shape, axis):
    x = (np.random.default_rng(17).standard_normal(shape) * 5).astype(np.float32)
    out, launches = run_softmax(cl_env, axis, x, ctx)
    if ctx is CPU and shape[axis] == shape[-1]:
        assert launches[0].label.endswith("_cpu")
    np.testing.assert_allclose(out, softmax_ref(x, axis), rtol=1e-5, atol=1e-7)


def test_large_logits_do_not_overflow(cl_env, ctx):
    x = np.array([[1000.0, 999.0, -1000.0] * 30], np.float32)
    out, launches = run_softmax(cl_env, 1, x, ctx)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, softmax_ref(x, 1), rtol=1e-5, atol=1e-7)
    assert launches[0].local_size == ((1,) if ctx is CPU else (64,))


def test_matches_openvino_cpu(cl_env):
    ov = pytest.importorskip("openvino")
    ops = pytest.importorskip("openvino.opset8")
    x = np.random.default_rng(18).standard_normal((2, 6, 5)).astype(np.float32)
    p = ops.parameter(x.shape, np.float32)
    compiled = ov.Core().compile_model(ov.Model([ops.softmax(p, -2).output(0)], [p]), "CPU",
                                       {"INFERENCE_PRECISION_HINT": "f32"})
    out, _ = run_softmax(cl_env, -2, x)
    np.testing.assert_allclose(out, compiled([x])[compiled.output(0)], rtol=1e-5, atol=1e-7)


def test_axis_out_of_range_names_the_layer():
    op = get_op("SoftMax")
    attrs = op.parse_attributes({"axis": "3"}, "prob")
    with pytest.raises(BindingError, match="layer 'prob' \\(SoftMax\\): attribute 'axis'=3 is "
                                           "out of range for input 0 of shape \\[1, 10\\]"):
        op.infer_shapes(attrs, [TensorDesc((1, 10))], {})


def log_softmax_ref(x, axis):
    x = x.astype(np.float64)
    m = x.max(axis=axis, keepdims=True)
    return (x - m) - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


@pytest.mark.parametrize("shape,axis", [((2, 1000), 1), ((3, 1003), -1), ((2, 5, 3, 4), 1),
                                        ((1, 10), 1), ((4, 3, 2), 2)])
def test_log_softmax_is_one_kernel(cl_env, ctx, shape, axis):
    """LogSoftmax runs softmax.cl's kernels with LOG_SOFTMAX: one launch, exact where
    log(softmax) underflows (logits 200 apart give -200, not -inf)."""
    op = get_op("LogSoftmax")
    x = (np.random.default_rng(18).standard_normal(shape) * 5).astype(np.float32)
    x.reshape(-1)[0] = 150.0                   # a row whose smallest terms underflow exp()
    attrs = op.parse_attributes({"axis": str(axis)}, "logprob")
    descs = [TensorDesc(x.shape)]
    out_descs = [TensorDesc(s, d) for s, d in op.infer_shapes(attrs, descs, {})]
    launches = op.launches(attrs, descs, out_descs, {}, ctx)
    assert len(launches) == 1 and launches[0].label.startswith("logsoftmax_")
    out = run_launches(cl_env, launches, [x], descs, out_descs)[0]
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, log_softmax_ref(x, axis), rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("opset,axis", [(13, 1), (11, 1), (11, 2)])
def test_onnx_log_softmax_reads_as_one_layer(tmp_path, test_device, opset, axis):
    """ONNX LogSoftmax becomes one LogSoftmax layer (opset 11 flattens at the axis: a Reshape
    around it, which is a view)."""
    pytest.importorskip("onnx")
    import onnx
    from onnx import TensorProto, helper
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.compile.network import Network
    graph = helper.make_graph(
        [helper.make_node("LogSoftmax", ["x"], ["y"], axis=axis)], "ls",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 5])])
    path = tmp_path / "ls.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), path)
    x = (np.random.default_rng(19).standard_normal((2, 3, 5)) * 4).astype(np.float32)
    net = Network(path, engine=Engine(test_device))
    assert [s.type for s in net.plan.steps] == ["LogSoftmax"]
    flat = x.reshape(2, -1) if opset < 13 and axis == 1 else x
    want = log_softmax_ref(flat, -1 if flat is not x else axis).reshape(x.shape)
    np.testing.assert_allclose(net.infer({"x": x})["y"], want, rtol=1e-5, atol=2e-5)
