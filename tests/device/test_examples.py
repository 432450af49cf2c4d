"""Every example layer (examples/layers/*) runs on the device and matches its numpy reference:
each CASE on plain tensors, and the first CASE padded in every format it supports.

Per kind: a SimpleGPU layer is one bound kernel (Registry.bind), handed its tensors in each
format, padded, which its kernel reads through pitches. An MVCL layer runs alone through a
one-layer network (run_layer: its stages, reorders and buffers); its kernels get raw
pointers, so for each format the check is that an input arriving in that format, padded, reaches
every kernel dense in the layout its Tensor declares (a reorder first), never as it came."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.cli.model_commands.demo import case_arrays, find_examples, layer_type_of
from customlayers.api import run_layer
from customlayers.jit.tensor import TensorDesc

EXAMPLES = find_examples()
PAD = ((0, 1, 2, 1), (1, 0, 1, 3))     # lower, upper in B,F,Y,X: uneven on purpose
NO_PAD = ((0, 0, 0, 0), (0, 0, 0, 0))


def _runs():
    for ex in EXAMPLES:
        for i, _ in enumerate(ex.reference.CASES):
            yield pytest.param(ex, i, "BFYX", False, id=f"{ex.name}-case{i}")
        # padded views in every format: pitches over padded sizes cover the unpadded ones
        for fmt in ex.reference.FORMATS:
            yield pytest.param(ex, 0, fmt, True, id=f"{ex.name}-{fmt.lower()}-padded")


@pytest.fixture(scope="module")
def registry(cl_env):
    from customlayers.runtime.device.device import Engine
    from customlayers.runtime.layers.registry import Registry
    reg = Registry(Engine(cl_env[2]))
    diags = reg.load(*(e.config for e in EXAMPLES))
    assert not diags.errors
    return reg


def test_every_example_is_complete():
    names = {e.name for e in EXAMPLES}
    assert {"relu", "grn", "reorg", "scaled_add", "spatial_mask", "hard_swish",
            "scale_shift"} <= names
    for ex in EXAMPLES:
        assert (ex.folder / "README.md").is_file(), ex.name
        assert list(ex.folder.glob("*.cl")), ex.name
        assert ex.reference.CASES and callable(ex.reference.reference), ex.name
        assert set(ex.reference.FORMATS) <= {"BFYX", "BYXF", "YXFB", "FYXB"}, ex.name


@pytest.mark.parametrize("example,case_index,fmt,padded", list(_runs()))
def test_example_matches_reference(registry, example, case_index, fmt, padded):
    case = example.reference.CASES[case_index]
    inputs, data = case_arrays(case, seed=case_index + 1)
    params = dict(case.get("params", {}))
    expected = example.reference.reference(inputs, params, data)
    if example.kind == "MVCL":
        _mvcl_alone(registry, example, inputs, data, params, expected, fmt, padded)
        return
    lower, upper = PAD if padded else NO_PAD
    in_descs = [TensorDesc(a.shape, "f32", fmt, lower, upper) for a in inputs]
    # outputs in the same format (padded too), so the kernel's output indexing is exercised
    out_descs = [TensorDesc(e.shape, "f32", fmt, lower, upper) for e in expected]
    bound = registry.bind(layer_type_of(registry, example), in_descs, out_descs,
                          params=params, data=data)
    got = bound(*inputs)
    got = got if isinstance(got, list) else [got]
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


def _mvcl_alone(registry, example, inputs, data, params, expected, fmt, padded):
    layer = layer_type_of(registry, example)
    got = run_layer(registry, layer, inputs, params, data, [e.shape for e in expected])
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)
    if not padded:
        return
    from customlayers.jit.layer import LayerCall, ParsedAttrs
    impl = registry.implementation(layer)
    arriving = [TensorDesc(a.shape, "f32", fmt, *PAD) for a in inputs]
    call = LayerCall(layer, f"layer '{layer}'", layer, ParsedAttrs(params, layer), arriving, {},
                     declared=[(e.shape, "f32") for e in expected])
    work = impl.work(call, impl.outputs(call))
    kernels = [s for s in work.stages if s.impl == "custom"]
    assert kernels
    declared = {t.port_index: t.layout for stage in impl.layer.specs
                for t in stage.tensors("input")}
    for stage in kernels:
        for ref, desc in zip(stage.inputs, stage.input_descs):
            assert not desc.is_padded, (stage.name, desc)
            if ref[0] == "in" or ref[1][0] == "in":        # a layer input, not a buffer
                port = ref[1] if ref[0] == "in" else ref[1][1]
                assert declared[port] in ("ANY", desc.format), (stage.name, desc)
                assert ref[0] == "temp", "the padded input reached a kernel as it came"
    reorders = [s for s in work.stages if s.impl == "reorder"]
    assert reorders and reorders[0].input_descs == [arriving[0]]


def test_examples_validate_with_the_cli(capsys):
    from customlayers.cli import main
    status = main(["validate", *(str(e.config) for e in EXAMPLES)])
    out = capsys.readouterr()
    assert status == 0, out.out + out.err


def test_the_readme_python_api_example_runs_from_the_repository_root(test_device, monkeypatch):
    """The README's Python API block runs as written from the repository's root (every path it
    names exists, the model's layers are all loaded, the input has the model's shape), and its
    numbers agree with numpy and with the demo model's built-in twin."""
    from pathlib import Path
    import customlayers.api as api
    from customlayers.api import Engine, Network
    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text()
    section = readme[readme.index("## Python API"):]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(root)
    monkeypatch.setattr(api, "Engine", lambda *a, **k: Engine(test_device))
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)      # noqa: S102 - our own example
    x, y = scope["x"], scope["y"]
    np.testing.assert_allclose(y, np.where(x > 0, x, np.float32(0.1) * x), atol=1e-6)
    builtin = Network(str(root / "examples/models/demo_cnn_builtin.xml"), None,
                      Engine(test_device)).infer({"data": scope["image"]})["prob/sink"]
    assert scope["outputs"]["prob/sink"].shape == (1, 10)
    np.testing.assert_allclose(scope["outputs"]["prob/sink"], builtin, atol=1e-5)
