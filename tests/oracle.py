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
    result = compiled(feed)
    out = {}
    for port in compiled.outputs:
        out[port.get_any_name()] = np.asarray(result[port])
    return out


def save_ov_model(model, path: Path) -> Path:
    import pytest
    ov = pytest.importorskip("openvino")
    path.parent.mkdir(parents=True, exist_ok=True)
    ov.save_model(model, str(path), compress_to_fp16=False)
    return path
