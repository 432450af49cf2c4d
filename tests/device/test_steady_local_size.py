"""A launch that gives no local size gets one of a few on PoCL (limits.steady_local_size): PoCL
compiles a kernel for each work-group size it runs, and left to choose, it picked a new size
for each shape (DenseNet-121's 62 BatchNorm+ReLU launches compiled that kernel 62 times, 4.7 s of
its 12 s first run on the 2-core machine). Other drivers choose as before."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.runtime.device.device import Engine
from customlayers.runtime.device.limits import is_pocl_platform, steady_local_size
from single_node_models import model_file, ours_and_onnxruntime


@pytest.mark.parametrize("global_size,want", [
    ((2112,), (64,)), ((64,), (64,)), ((4, 512), (4, 16)), ((4, 544), (4, 16)),
    ((13, 240), (13, 4)), ((256, 96), (64, 1)), ((832, 32), (64, 1)), ((40, 9, 3), (8, 1, 1)),
    ((16, 8, 4), (16, 4, 1)), ((229, 229, 3), None), ((18, 7), None)])
def test_the_sizes_picked(test_device, global_size, want):
    device = Engine(test_device).device
    got = steady_local_size(device, global_size)
    assert got == (want if is_pocl_platform(device) else None)
    if got is not None:     # a size that divides the range, dimension by dimension
        assert all(g % l == 0 for g, l in zip(global_size, got)) and np.prod(got) <= 64


def test_a_densenet_like_growth_of_channels_runs_with_few_sizes(tmp_path, test_device):
    """BatchNormalization + ReLU over 32, 64, ... 512 channels (a dense block's growing
    input): the same kernel at every width, with at most two local sizes on PoCL, and the
    numbers ONNX Runtime gives."""
    from onnx import helper, numpy_helper
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 32, 7, 7)).astype(np.float32)
    nodes, inits, h, channels = [], [], "x", 32
    for k in range(5):
        for name, values in (("s", rng.uniform(0.5, 1.5, channels)),
                             ("b", rng.standard_normal(channels)),
                             ("m", rng.standard_normal(channels) * 0.1),
                             ("v", rng.uniform(0.5, 2.0, channels))):
            inits.append(numpy_helper.from_array(values.astype(np.float32), f"{name}{k}"))
        nodes += [helper.make_node("BatchNormalization", [h, f"s{k}", f"b{k}", f"m{k}", f"v{k}"],
                                   [f"n{k}"]),
                  helper.make_node("Relu", [f"n{k}"], [f"r{k}"]),
                  helper.make_node("Concat", [h, f"r{k}"], ["y" if k == 4 else f"c{k}"],
                                   axis=1)]
        h, channels = f"c{k}", channels * 2
    path = model_file(tmp_path / "dense.onnx", nodes, {"x": x}, inits)
    engine = Engine(test_device)
    got, want = ours_and_onnxruntime(engine, path, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    from customlayers.runtime.compile.network import Network
    plan = Network(path, engine=engine).plan
    sizes = {}
    for step in plan.steps:
        for launch in step.launches:
            if launch.local_size is None:
                sizes.setdefault(launch.entry, set()).add(
                    steady_local_size(engine.device, launch.global_size))
    assert sizes, "no launch left its local size to the runtime"
    if is_pocl_platform(engine.device):
        assert all(len(v) <= 2 and None not in v for v in sizes.values()), sizes
