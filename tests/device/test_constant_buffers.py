"""Constants (weights) on the device for a plan's life (runtime/device/host_memory.py
constant_buffer): on a CPU device the plan's own array is the buffer (USE_HOST_PTR), not a
second copy of the weights in the same memory (VGG-19's 548 MB on PoCL, issue 22); on a GPU a
copy. Either way the kernels read the same values: a model with weights of every kind (a
convolution's packed weights on a CPU, a MatMul's matrix, a bias) matches ONNX Runtime."""
from __future__ import annotations

import numpy as np
import pyopencl as cl
from onnx import helper, numpy_helper

from customlayers.runtime.device.host_memory import constant_buffer
from single_node_models import model_file, ours_and_onnxruntime


def _on_cpu(device) -> bool:
    return bool(device.type & cl.device_type.CPU)


def test_a_constant_is_the_array_itself_on_a_cpu_and_a_copy_elsewhere(cl_env):
    ctx, queue, dev = cl_env
    weights = np.arange(1000, dtype=np.float32)
    buf = constant_buffer(ctx, weights)
    flags = buf.get_info(cl.mem_info.FLAGS)
    if _on_cpu(dev):
        assert flags & cl.mem_flags.USE_HOST_PTR
        assert buf.get_host_array(weights.shape, weights.dtype).ctypes.data == weights.ctypes.data
    else:
        assert flags & cl.mem_flags.COPY_HOST_PTR
    back = np.empty_like(weights)
    cl.enqueue_copy(queue, back, buf)
    np.testing.assert_array_equal(back, weights)
    # an empty constant still gets a buffer (a kernel argument must be one)
    assert constant_buffer(ctx, np.zeros(0, np.float32)).size >= 1


def test_a_misaligned_array_is_copied_not_refused(cl_env):
    ctx, queue, dev = cl_env
    raw = np.zeros(4 * 65 + 1, np.uint8)
    odd = raw[1:].view(np.float32)         # a float32 view one byte off its alignment
    odd[:] = np.arange(65, dtype=np.float32)
    buf = constant_buffer(ctx, odd)
    assert buf.get_info(cl.mem_info.FLAGS) & cl.mem_flags.COPY_HOST_PTR
    back = np.empty(65, np.float32)
    cl.enqueue_copy(queue, back, buf)
    np.testing.assert_array_equal(back, np.arange(65, dtype=np.float32))


def test_a_model_reads_its_weights_in_place_and_matches_onnxruntime(tmp_path, test_device):
    from customlayers.runtime.device.device import Engine
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 10, 10)).astype(np.float32)
    w = (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    m = (rng.standard_normal((8 * 10 * 10, 5)) * 0.05).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"),
             numpy_helper.from_array(m, "m"),
             numpy_helper.from_array(np.array([2, -1], np.int64), "shape")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Reshape", ["r", "shape"], ["f"]),
             helper.make_node("MatMul", ["f", "m"], ["y"])]
    path = model_file(tmp_path / "weights.onnx", nodes, {"x": x}, inits)
    got, want = ours_and_onnxruntime(Engine(test_device), path, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
