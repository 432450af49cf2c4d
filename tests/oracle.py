"""OpenVINO's CPU plugin as a test-only oracle (never a runtime dependency of the package)."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def ov_infer(model_path, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run an IR (or ONNX) model on OpenVINO CPU in fp32; outputs by tensor name."""
    import pytest
    ov = pytest.importorskip("openvino")   # installed by `make test`; absent on the GPU machine
    core = ov.Core()
    model = core.read_model(str(model_path))
    compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    feed = {}
    for port in compiled.inputs:
        name = port.get_any_name()
        feed[port] = inputs[name]
    result = run_compiled(compiled, feed)
    return {port.get_any_name(): array for port, array in zip(compiled.outputs, result)}


def run_compiled(compiled, feed) -> list[np.ndarray]:
    """A compiled OpenVINO model's outputs (copies, in its output order) for `feed`, through an
    infer request of its own. Never `compiled(feed)`: that keeps its request on the Python
    object, a cycle through C++ that no collection frees, and VGG-19's compiled model (1.1 GB)
    stayed in the test process after every test that ran it."""
    request = compiled.create_infer_request()
    request.infer(feed, share_inputs=False, share_outputs=False)
    return [np.array(request.get_output_tensor(i).data) for i in range(len(compiled.outputs))]


def save_ov_model(model, path: Path) -> Path:
    import pytest
    ov = pytest.importorskip("openvino")
    path.parent.mkdir(parents=True, exist_ok=True)
    ov.save_model(model, str(path), compress_to_fp16=False)
    return path
