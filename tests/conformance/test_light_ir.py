"""Every "light" topology of the onnx package (ResNet-50, SqueezeNet, VGG-19, ...), converted to
OpenVINO IR with seeded random weights (tests/models.py), runs on our executor and matches
OpenVINO's CPU plugin at fp32 tolerance.

Random weights make some softmax outputs saturate (inception_v1 and shufflenet give one class
~1.0 and the rest ~0), and a saturated softmax hides almost any error upstream. So each model is
run with the softmax's input (the logits) as an extra output, and both are compared. That derived
IR is cached next to the light models (same version folder, so a new weight recipe remakes it).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pytest

# onnx holds the light models, openvino converts them and is the oracle: both are installed by
# `make test`; the GPU machine has neither, and this module skips there.
pytest.importorskip("onnx")
pytest.importorskip("openvino")

from models import CACHE, light_ir, light_model_names  # noqa: E402
from oracle import ov_infer  # noqa: E402

# 20-60 s each on a 2-core PoCL: marked so `pytest -m "not slow"` skips them; `make test` runs all.
SLOW = {"densenet121", "inception_v1", "inception_v2", "vgg19"}

# fp32 tolerance: our kernels and OpenVINO's sum in different orders; observed errors are below
# 1e-5 of the output's scale on every model.
RTOL = 1e-4
ATOL_OF_SCALE = 1e-5


def with_logits(name: str) -> Path:
    """The light IR with the input of its final SoftMax added as an output (cached), or the light
    IR itself when its output is not a softmax."""
    import openvino as ov
    source = light_ir(name)
    derived = CACHE / "with_logits" / f"{name}.xml"
    if derived.exists():
        return derived
    model = ov.Core().read_model(str(source))
    softmaxes = [s for s in (_softmax_before(r) for r in model.get_results()) if s is not None]
    if not softmaxes:
        return source
    for sm in softmaxes:
        logits = sm.input_value(0)
        if not logits.get_names():        # an output needs a tensor name to be looked up by
            logits.get_tensor().set_names({f"{sm.get_friendly_name()}/logits"})
        model.add_outputs([logits])
    derived.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=derived.parent) as tmp:
        ov.save_model(model, str(Path(tmp) / "m.xml"), compress_to_fp16=False)
        os.replace(Path(tmp) / "m.bin", derived.with_suffix(".bin"))   # .bin first: the .xml
        os.replace(Path(tmp) / "m.xml", derived)                        # marks a complete pair
    return derived


def _softmax_before(result):
    """The Softmax that feeds a Result, looking through reshapes (SqueezeNet reshapes after it)."""
    node = result.input_value(0).get_node()
    while node.get_type_name() in ("Reshape", "Squeeze", "Unsqueeze", "Flatten"):
        node = node.input_value(0).get_node()
    return node if node.get_type_name() == "Softmax" else None


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def _params():
    return [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
            for n in light_model_names()]


def test_all_light_models_are_listed():
    # The parametrization below comes from the onnx package's files; an empty list would make the
    # conformance run pass vacuously.
    assert set(light_model_names()) >= {"resnet50", "squeezenet", "vgg19", "densenet121"}


@pytest.mark.parametrize("name", _params())
def test_light_model_matches_openvino_cpu(name, engine):
    from customlayers.graph.load import read_model
    from customlayers.runtime.compile.network import Network
    xml = with_logits(name)
    shapes = {p.name: p.outputs[0].shape for p in read_model(xml).parameters}
    rng = np.random.default_rng(7)
    inputs = {n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()}

    # OpenVINO's model is gone before ours is read and made: the two at once were VGG-19's
    # weights four times over (each keeps a host and a compiled copy), the suite's peak
    ref = ov_infer(xml, inputs)
    ours = Network(xml, None, engine).infer(inputs)

    assert sorted(ours) == sorted(ref)
    assert len(ref) >= 1
    for out_name, expected in ref.items():
        got = ours[out_name]
        assert got.shape == expected.shape, out_name
        assert np.isfinite(got).all(), out_name
        # a constant output would compare equal for the wrong reasons
        assert np.ptp(expected) > 0, f"{name}: reference output {out_name} is constant"
        scale = float(np.abs(expected).max())
        np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL_OF_SCALE * scale,
                                   err_msg=f"{name}: output {out_name}")


@pytest.mark.parametrize("width", ["8", "16"])
@pytest.mark.parametrize("name", ["resnet50", "squeezenet"])
def test_light_model_at_each_cpu_vector_width_matches_openvino(name, width, engine, monkeypatch):
    """The CPU kernels written for 8 lanes (AVX2) and for 16 (AVX-512), forced through
    CUSTOMLAYERS_CPU_VECTOR_WIDTH whatever this machine prefers: both must stay right, as CI
    machines come with either."""
    monkeypatch.setenv("CUSTOMLAYERS_CPU_VECTOR_WIDTH", width)
    test_light_model_matches_openvino_cpu(name, engine)
