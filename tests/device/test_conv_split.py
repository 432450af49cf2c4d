"""The channel-split direct convolution (conv_direct_split.cl, variants `split{CS}` of
ops/nn/conv.py), for layers too small to fill a GPU: forced through CompileContext.variant with a
GPU's traits on the test device, against a float64 numpy reference with every fused epilogue,
and where the variants are listed.

The tolerance is test_conv_ocb.py's (its docstring explains it): max error <= 2e-5 times the
output's RMS scale. The kernel sums CS partial chains and then their CS sums, so unlike the
blocked kernel it matches conv_direct.cl to rounding, not bit for bit: the test asks for the
reference tolerance only. A channel summed twice or never, or a partial sum of the wrong
output, is off by about scale / sqrt(K): hundreds of times the limit.
"""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.errors import BindingError
from customlayers.jit.launch import DeviceTraits, FusedEpilogue
from customlayers.ops.nn._conv_variants import SplitVariant
from test_conv_ocb import (CPU, MAX_ERROR, _attrs, _listed, _reference, _run as _run_on,
                           _scale, _variants)

# an H100's compute units: the TCN's layer at batch 1 (19600 outputs) leaves it mostly idle
H100 = DeviceTraits("GPU", compute_units=132, max_work_group_size=1024)


def _run(cl_env, raw, arrays, variant, epilogue=None):
    return _run_on(cl_env, raw, arrays, variant, epilogue, device=H100)


TCN_B1 = ((1, 25, 784), (25, 25, 7), _attrs(1, dilations=(8,), pb=(48,), pe=(0,)))
CASES = [
    # (label, x shape, w shape (OIX / OIYX; GOIYX grouped), attrs)
    ("tcn b1", *TCN_B1),
    # OW = 45: two work-groups of 32 along x, the second mostly past the edge
    ("tcn small", (1, 25, 45), (25, 25, 7), _attrs(1, dilations=(4,), pb=(24,), pe=(24,))),
    # 2-D, stride 2, asymmetric pads; CG = 19 splits unevenly among 4 and 8
    ("2d", (1, 19, 11, 13), (6, 19, 3, 3), _attrs(2, (2, 2), (1, 1), (1, 0), (0, 2))),
    # grouped: 2 groups of 16 input and 9 output channels
    ("grouped", (2, 32, 6, 7), (2, 9, 16, 3, 3), _attrs(2, pb=(1, 1), pe=(1, 1))),
]


@pytest.mark.parametrize("label,xs,ws,raw", CASES, ids=[c[0] for c in CASES])
def test_every_split_variant_matches_the_reference(cl_env, label, xs, ws, raw):
    rng = np.random.default_rng(21)
    x = rng.standard_normal(xs).astype(np.float32)
    w = (rng.standard_normal(ws) * 0.3).astype(np.float32)
    want = _reference(x, w, raw)
    variants = [v for v in _variants(xs, ws, raw, H100) if isinstance(v, SplitVariant)]
    assert variants, f"{label}: no split variant listed"
    limit = MAX_ERROR * _scale(x, w)
    for v in variants:
        got, launches = _run(cl_env, raw, [x, w], v)
        assert [launch.entry for launch in launches] == ["conv_direct_split"]
        err = np.abs(got - want).max()
        assert err <= limit, f"{label} {v}: error {err:.3g} > {limit:.3g}"


EPILOGUES = [FusedEpilogue(bias=True), FusedEpilogue(bias=True, relu=True),
             FusedEpilogue(bias=True, relu=True, residual=True),
             FusedEpilogue(bias=True, relu=True, residual=True, pre_relu=True)]


@pytest.mark.parametrize("epilogue", EPILOGUES, ids=["bias", "bias_relu", "residual_relu",
                                                     "relu_residual_relu"])
def test_split_variants_apply_the_fused_epilogue(cl_env, epilogue):
    rng = np.random.default_rng(22)
    xs, ws, raw = (1, 25, 100), (25, 25, 7), _attrs(1, dilations=(2,), pb=(12,), pe=(0,))
    x = rng.standard_normal(xs).astype(np.float32)
    w = (rng.standard_normal(ws) * 0.3).astype(np.float32)
    bias = rng.standard_normal((1, 25, 1)).astype(np.float32)
    residual = rng.standard_normal((1, 25, 100)).astype(np.float32)
    arrays = [x, w, bias] + ([residual] if epilogue.residual else [])
    want = _reference(x, w, raw, epilogue, bias, residual)
    limit = MAX_ERROR * _scale(x, w) + 1e-6 * np.abs(want).max()
    for v in (SplitVariant(4), SplitVariant(8)):
        got, _ = _run(cl_env, raw, arrays, v, epilogue)
        assert np.abs(got - want).max() <= limit, v


def test_a_small_layer_lists_the_split_kernels_where_fast_tuning_times_them():
    """The TCN's layer at batch 1 (19600 outputs: too few for one per work item to fill a
    GPU): the GEMM heuristic's choice first, then direct and the two splits (what `fast`
    times), the blocked kernels after the GEMMs. At batch 64 the outputs fill the device:
    no split kernel, the blocked ones in their places."""
    listed = _listed(*TCN_B1, H100)
    assert listed[0].startswith("gemm")
    assert listed[1:4] == ("direct", "split4", "split8")
    assert {"ocb8_px2", "ocb28_px1"} <= set(listed[4:])
    big = _listed((64,) + TCN_B1[0][1:], *TCN_B1[1:], H100)
    assert not any(v.startswith("split") for v in big)
    assert big[1:4] == ("direct", "ocb8_px2", "ocb28_px1")


def test_where_the_split_kernels_are_not_listed():
    # 6 input channels: 4 slices would leave one channel each, 8 more slices than channels
    assert not any(v.startswith("split") for v in _listed((1, 6, 50), (25, 6, 7), _attrs(1),
                                                           H100))
    # 12 input channels: only 4 slices get two channels or more
    listed = _listed((1, 12, 50), (25, 12, 7), _attrs(1), H100)
    assert [v for v in listed if v.startswith("split")] == ["split4"]
    # a CPU device runs its own kernels; depthwise runs direct
    assert not any(v.startswith("split") for v in _listed(*TCN_B1, device=CPU))
    assert not any(v.startswith("split") for v in _listed((1, 8, 50), (8, 1, 1, 7),
                                                           _attrs(1), H100))


def test_a_split_variant_that_does_not_apply_is_refused(cl_env):
    x = np.zeros((1, 6, 50), np.float32)
    w = np.zeros((25, 6, 7), np.float32)
    with pytest.raises(BindingError, match="split4 does not apply"):
        _run(cl_env, _attrs(1), [x, w], SplitVariant(4))
