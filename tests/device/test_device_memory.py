"""Issue 18, item 5 (device memory): what one run allocates at once is checked against the
device's global memory before the first buffer, and refused with the figures. PoCL hands out
buffers past its own CL_DEVICE_GLOBAL_MEM_SIZE until the OOM killer ends the process.

The tensors here are declared over the device's memory, each under its per-buffer limit, and
never allocated: the sizes come from the test device's own figures."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from customlayers.cli import main

TEST_DEVICE = os.environ.get("CUSTOMLAYERS_TEST_DEVICE", "CPU")   # as conftest.py reads it

KERNEL = "__kernel void fan(__global const float* src, {outs}) {{ }}\n"


@pytest.fixture(scope="module")
def device(test_device):
    return test_device


# elements of one dim at most (the readers refuse a dim over 2**31 - 1): a GPU's per-buffer
# limit (20 GiB on an H100) is more f32 elements than that
MAX_ONE = 2**30


def _sizes(device) -> tuple[int, int]:
    """(elements of one f32 tensor just under the per-buffer limit and one dim, how many of
    them are over the device's global memory together)."""
    one = min(int(device.max_mem_alloc_size) // 4 - 1024, MAX_ONE)
    return one, int(device.global_mem_size) // (one * 4) + 1


def _fan_layer(tmp_path: Path, outputs: int) -> Path:
    """A layer with one input and `outputs` outputs whose kernel touches nothing."""
    outs = ", ".join(f"__global float* out{j}" for j in range(outputs))
    (tmp_path / "fan.cl").write_text(KERNEL.format(outs=outs))
    tensors = "".join(f'<Tensor arg-index="{j + 1}" type="output" port-index="{j}"/>'
                      for j in range(outputs))
    config = tmp_path / "fan.xml"
    config.write_text(f'<CustomLayer name="Fan" type="SimpleGPU" version="1">'
                      f'<Kernel entry="fan"><Source filename="fan.cl"/></Kernel>'
                      f'<Buffers><Tensor arg-index="0" type="input" port-index="0"/>{tensors}'
                      f'</Buffers><WorkSizes global="1"/></CustomLayer>')
    return config


def test_run_layer_refuses_outputs_over_the_device_memory_before_allocating(tmp_path, capsys,
                                                                             device):
    """run-layer binds a kernel alone (Registry.bind), which never asked: its outputs were
    allocated whatever their sum."""
    one, count = _sizes(device)
    config = _fan_layer(tmp_path, count)
    np.save(tmp_path / "x.npy", np.zeros((1, 1, 1, 1), np.float32))
    shapes = [a for _ in range(count) for a in ("--output-shape", f"1x1x1x{one}")]
    code = main(["run-layer", "-c", str(config), "-i", str(tmp_path / "x.npy"), *shapes,
                 "-o", str(tmp_path / "y.npz"), "-d", TEST_DEVICE])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err and not (tmp_path / "y.npz").exists()
    total = count * one * 4 + 4
    assert (f"layer 'Fan' (its inputs, outputs and Data) needs {total / 2**20:.1f} MiB of "
            f"device memory at once, but device '{device.name.strip()}' has "
            f"{int(device.global_mem_size) / 2**20:.1f} MiB") in err
    assert f"output 0 (1x1x1x{one} f32 bfyx) {one * 4 / 2**20:.1f} MiB" in err


def test_a_model_over_the_device_memory_is_refused_with_the_figures(tmp_path, capsys, device):
    """A model whose outputs are each under the per-buffer limit and together over the
    device's memory: refused by `run` before anything is allocated (the random inputs
    included)."""
    one, count = _sizes(device)
    shape = [1, 1, 1, one]
    nodes = [helper.make_node("Relu", ["x"], [f"y{j}"]) for j in range(count)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(f"y{j}", TensorProto.FLOAT, shape)
         for j in range(count)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              str(tmp_path / "m.onnx"))
    code = main(["run", "-m", str(tmp_path / "m.onnx"), "-d", TEST_DEVICE])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert (f"the network, for these input shapes, needs {(count + 1) * one * 4 / 2**20:.1f} "
            f"MiB of device memory at once, but device '{device.name.strip()}' has") in err


def test_requests_that_fit_one_by_one_are_refused_together(tmp_path, device):
    """Each request allocates the plan's buffers: three requests of a plan under half the
    device's memory were allocated whatever their sum (benchmark -nireq, Network.stream). The
    third is refused with what the others hold; releasing one lets the next one in."""
    from customlayers.errors import DeviceError
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.device.device_memory import held
    from customlayers.runtime.compile.network import Network
    engine = Engine(device)
    free = int(device.global_mem_size) - held(device)
    # each tensor under the buffer limit and under 2**32 elements (the built-ins' indices: an
    # H200's memory is 36 G floats); as many outputs of x as make a request ~45% of it
    n = min(int(free * 0.45) // 8, int(device.max_mem_alloc_size) // 4, 2 ** 32 - 1)
    outputs = max(1, int(free * 0.45) // (4 * n) - 1)
    rows = -(-n // MAX_ONE)                 # one dim under the readers' limit
    shape = [rows, n // rows]
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], [f"y{i}"]) for i in range(outputs)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, shape)
         for i in range(outputs)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              str(tmp_path / "m.onnx"))
    net = Network(tmp_path / "m.onnx", engine=engine, tuning="off")
    first, second = net.create_request(), net.create_request()
    with pytest.raises(DeviceError, match=r"a request of the network \(its buffers for these "
                                          r"input shapes\) needs .* MiB of device memory, but "
                                          r"this process's other requests and networks hold "
                                          r".* MiB of the .* MiB device '.*' has; use fewer "
                                          r"requests at once"):
        net.create_request()
    del first
    third = net.create_request()           # the first one's share is free again
    del second, third, net
    assert held(device) <= int(device.global_mem_size) - free


def test_a_release_during_a_collection_under_the_lock_does_not_wait_on_it(device):
    # a reservation's release runs from a finalizer, that is from a collection, which Python
    # 3.12 may run at any bytecode: also while this thread holds the accounting lock. The
    # release once took the same lock and the process waited on itself for ever (seen in the
    # node suite). Here a collection runs under the lock on purpose, in a thread that must end.
    import gc
    import threading
    from customlayers.runtime.device import device_memory

    class Owner:
        pass

    gc.collect()     # what earlier tests left uncollected is released now, not in the count
    before = device_memory.held(device)
    owner = Owner()
    owner.cycle = owner                          # freed only by a collection
    device_memory.reserve(device, 4096, owner, "test")
    assert device_memory.held(device) == before + 4096
    del owner

    def collect_under_the_lock():
        with device_memory._lock:
            gc.collect()
    worker = threading.Thread(target=collect_under_the_lock, daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive(), "the release waited on the lock its own thread held"
    assert device_memory.held(device) == before