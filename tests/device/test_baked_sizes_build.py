"""A GPU's convolution and MatMul programs carry their sizes as #defines (ops/nn/_sizes.py:
baked), a CPU device's as arguments: every GPU variant's program is built here under a GPU's
traits, so a helper whose parameters are named as the sizes (a #define then replaces them) is
a build error in CI, not first on the GPU machine (conv_patch and conv_window were)."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.jit.launch import CompileContext, DeviceTraits
from customlayers.jit.tensor import TensorDesc
from customlayers.ops import get_op
from customlayers.ops.nn._conv_variants import DirectVariant, OcbVariant, SplitVariant
from customlayers.ops.nn._variants import GemmVariant
from customlayers.ops.nn._winograd import WinogradVariant
from customlayers.runtime.device.device import Engine

GPU = DeviceTraits("GPU", compute_units=16, max_work_group_size=256)
CONV = {"strides": "1,1", "dilations": "1,1", "pads_begin": "1,1", "pads_end": "1,1"}
ONE_BY_ONE = {"strides": "1,1", "dilations": "1,1", "pads_begin": "0,0", "pads_end": "0,0"}


@pytest.fixture(scope="module")
def engine(test_device):
    return Engine(test_device)


def _build_all(engine, launches):
    for launch in launches:
        assert "SIZES_BAKED" in launch.source
        engine.build(launch.source, launch.options, label=launch.label)


@pytest.mark.parametrize("variant,ws,raw", [
    (GemmVariant(64, 64, 4, 4), (32, 16, 3, 3), CONV),
    (GemmVariant(32, 32, 2, 2, 4), (32, 16, 1, 1), ONE_BY_ONE),
    (DirectVariant(), (32, 16, 3, 3), CONV),
    (OcbVariant(8, 2), (32, 16, 3, 3), CONV),
    (SplitVariant(4), (32, 16, 3, 3), CONV),
    (WinogradVariant(GemmVariant(32, 32, 2, 2)), (32, 16, 3, 3), CONV),
], ids=lambda v: getattr(v, "name", None))
def test_every_gpu_convolution_variant_builds_with_baked_sizes(engine, variant, ws, raw):
    op = get_op("Convolution")
    attrs = op.parse_attributes(raw, "conv")
    descs = [TensorDesc((2, 16, 12, 10)), TensorDesc(ws)]
    out = [TensorDesc(s) for s, _ in op.infer_shapes(attrs, descs, {})]
    ctx = CompileContext(GPU, variant=variant)
    consts = {1: np.zeros(ws, np.float32)}
    _build_all(engine, op.launches(attrs, descs, out, consts, ctx))


@pytest.mark.parametrize("a,b", [((2, 40, 33), (2, 33, 50)), ((1, 70), (70, 9))])
def test_a_gpu_matmul_builds_with_baked_sizes(engine, a, b):
    op = get_op("MatMul")
    attrs = op.parse_attributes({}, "mm")
    descs = [TensorDesc(a), TensorDesc(b)]
    out = [TensorDesc(s) for s, _ in op.infer_shapes(attrs, descs, {})]
    _build_all(engine, op.launches(attrs, descs, out, {}, CompileContext(GPU)))
