"""Constants (weights) on the device for a plan's life (runtime/device/host_memory.py
constant_buffer): on a CPU device the plan's own array is the buffer (USE_HOST_PTR), not a
second copy of the weights in the same memory (VGG-19's 548 MB on PoCL, issue 22); on a GPU a
copy, written through the engine's own queue (a COPY_HOST_PTR buffer reaches NVIDIA's device only
when a kernel first reads it, in the first inference), or made with COPY_HOST_PTR on an engine
of the user's queue, whose earlier work a blocking write would wait for. Either way the kernels read the same values: a model with weights of every kind (a
convolution's packed weights on a CPU, a MatMul's matrix, a bias) matches ONNX Runtime."""
from __future__ import annotations

import numpy as np
import pyopencl as cl
import pytest
from onnx import helper, numpy_helper

from customlayers.runtime.device.host_memory import constant_buffer
from single_node_models import model_file, ours_and_onnxruntime


def _on_cpu(device) -> bool:
    return bool(device.type & cl.device_type.CPU)


def _aligned(values: np.ndarray, device) -> np.ndarray:
    """A copy of `values` that starts at the device's buffer alignment."""
    align = int(device.mem_base_addr_align) // 8
    raw = np.empty(values.nbytes + align, np.uint8)
    start = -raw.ctypes.data % align
    out = raw[start:start + values.nbytes].view(values.dtype)
    out[:] = values
    return out


def test_a_constant_is_the_array_itself_on_a_cpu_and_a_copy_elsewhere(cl_env):
    ctx, queue, dev = cl_env
    weights = _aligned(np.arange(1000, dtype=np.float32), dev)
    buf = constant_buffer(ctx, weights, _on_cpu(dev))
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
    assert constant_buffer(ctx, np.zeros(0, np.float32), _on_cpu(dev)).size >= 1


@pytest.mark.parametrize("offset", [1, 16], ids=["byte", "float4"])
def test_an_array_off_the_buffer_alignment_is_copied_not_refused(cl_env, offset):
    """One byte off, or 16 (a float4's alignment, not a float16's: a kernel may read its
    argument as float16 vectors), from where a buffer would start: a copy, aligned."""
    ctx, queue, dev = cl_env
    base = _aligned(np.zeros(4 * 65 + offset, np.uint8), dev)
    odd = base[offset:].view(np.float32)
    odd[:] = np.arange(65, dtype=np.float32)
    buf = constant_buffer(ctx, odd, _on_cpu(dev))
    assert buf.get_info(cl.mem_info.FLAGS) & cl.mem_flags.COPY_HOST_PTR
    back = np.empty(65, np.float32)
    cl.enqueue_copy(queue, back, buf)
    np.testing.assert_array_equal(back, np.arange(65, dtype=np.float32))


def test_a_copy_is_written_through_a_queue_where_one_is_given(cl_env):
    """With a queue, a copy is a plain buffer written through it, whole when the call returns:
    changing the array afterwards changes nothing on the device."""
    ctx, queue, dev = cl_env
    base = _aligned(np.zeros(4 * 65 + 1, np.uint8), dev)
    odd = base[1:].view(np.float32)                  # off the alignment: a copy on any device
    odd[:] = np.arange(65, dtype=np.float32)
    buf = constant_buffer(ctx, odd, _on_cpu(dev), queue)
    assert not buf.get_info(cl.mem_info.FLAGS) & (cl.mem_flags.COPY_HOST_PTR |
                                                  cl.mem_flags.USE_HOST_PTR)
    odd[:] = -1
    back = np.empty(65, np.float32)
    cl.enqueue_copy(queue, back, buf)
    np.testing.assert_array_equal(back, np.arange(65, dtype=np.float32))


def _matmul_bias_model(tmp_path, seed: int):
    """(path, x, the float64 result) of y = x @ m + b: a MatMul's matrix and a bias, both
    constants a request copies on a GPU."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 40)).astype(np.float32)
    m = rng.standard_normal((40, 7)).astype(np.float32)
    b = rng.standard_normal(7).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "m"], ["p"]),
             helper.make_node("Add", ["p", "b"], ["y"])]
    path = model_file(tmp_path / "mm.onnx", nodes, {"x": x},
                      [numpy_helper.from_array(m, "m"), numpy_helper.from_array(b, "b")])
    return path, x, x.astype(np.float64) @ m + b


def test_a_networks_copies_go_through_its_own_queue_never_a_users(tmp_path, test_device):
    """A request writes the constants it copies through the engine's own queue; on an engine of
    the user's queue it makes them with COPY_HOST_PTR instead. Both match ONNX Runtime."""
    from customlayers.api import Network
    from customlayers.runtime.device.device import Engine
    path, x, want = _matmul_bias_model(tmp_path, seed=5)
    own = Engine(test_device)
    users = Engine.from_queue(cl.CommandQueue(own.context, own.device))
    for engine, made_with in ((own, 0), (users, cl.mem_flags.COPY_HOST_PTR)):
        net = Network(path, engine=engine)
        np.testing.assert_allclose(net.infer({"x": x})["y"], want, rtol=1e-5, atol=1e-5)
        buffers = list(net.plan.constant_buffers.values()) + \
            [buf for buf, _ in net.plan.arg_buffers.values()]
        assert buffers
        for buf in buffers:
            flags = buf.get_info(cl.mem_info.FLAGS)
            if not flags & cl.mem_flags.USE_HOST_PTR:     # on a CPU device: the array itself
                assert flags & cl.mem_flags.COPY_HOST_PTR == made_with


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


def test_weights_packed_at_compile_time_are_read_where_they_lie_on_a_cpu(tmp_path, test_device):
    """A CPU device's convolution reads its weights packed at compile time: packed
    page-aligned (ops/_program.py buffer_aligned), they are its buffer, not copied again."""
    from customlayers.api import Network
    from customlayers.ops._program import BUFFER_ALIGN, buffer_aligned
    from customlayers.runtime.device.device import Engine
    packed = buffer_aligned(np.arange(12, dtype=np.float32).reshape(3, 4).T)
    assert packed.ctypes.data % BUFFER_ALIGN == 0 and packed.flags.c_contiguous
    np.testing.assert_array_equal(packed, np.arange(12, dtype=np.float32).reshape(3, 4).T)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 8, 12, 12)).astype(np.float32)
    w = (rng.standard_normal((16, 8, 3, 3)) * 0.2).astype(np.float32)
    path = model_file(tmp_path / "conv.onnx",
                      [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
                      {"x": x}, [numpy_helper.from_array(w, "w")])
    engine = Engine(test_device)
    net = Network(path, engine=engine)
    net.infer({"x": x})
    buffers = [buf for buf, _ in net.plan.arg_buffers.values()]
    flags = [b.get_info(cl.mem_info.FLAGS) for b in buffers]
    if _on_cpu(engine.device):
        assert any(f & cl.mem_flags.USE_HOST_PTR for f in flags)


def test_requests_made_at_once_on_threads_bind_the_one_kept_buffer(tmp_path, test_device,
                                                                   monkeypatch):
    """Requests of one network made at the same time on several threads may each upload a
    constant; every one of them must bind the buffer the plan keeps (a kernel bound to another
    would outlive its buffer). The uploads are slowed so that the threads meet."""
    import threading
    import time
    from customlayers.api import Network
    from customlayers.runtime.device.device import Engine
    import customlayers.runtime.execute.request as request_module
    import customlayers.runtime.execute.request_args as request_args
    path, x, want = _matmul_bias_model(tmp_path, seed=6)
    net = Network(path, engine=Engine(test_device))
    real_upload = request_module.constant_buffer

    def slow_upload(*args):
        time.sleep(0.05)
        return real_upload(*args)
    monkeypatch.setattr(request_module, "constant_buffer", slow_upload)
    monkeypatch.setattr(request_args, "constant_buffer", slow_upload)
    bound = []
    for module, name in ((request_module, "_const_buffer"), (request_args, "_const_arg")):
        real = getattr(module, name)

        def recording(*args, _real=real):
            buf = _real(*args)
            bound.append(buf)
            return buf
        monkeypatch.setattr(module, name, recording)
    start = threading.Barrier(4)
    made = []

    def make():
        start.wait()
        made.append(net.create_request())
    threads = [threading.Thread(target=make) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    plan = net.plan
    kept = list(plan.constant_buffers.values()) + [buf for buf, _ in plan.arg_buffers.values()]
    assert bound and all(any(buf is k for k in kept) for buf in bound)
    for request in made:
        np.testing.assert_allclose(request.infer({"x": x})["y"], want, rtol=1e-5, atol=1e-5)
