"""The CPU-shaped convolution kernel (chosen when the network's device is a CPU): every case of
the GEMM kernel's tests, with a fused epilogue too, against the numpy reference."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.jit.tensor import TensorDesc
from customlayers.ops import get_op
from customlayers.jit.launch import CompileContext, DeviceTraits, FusedEpilogue
from launch_runner import run_launches
from test_ops_conv import CASES, attrs, conv_ref

CPU = DeviceTraits("CPU", compute_units=2, max_work_group_size=4096)


@pytest.mark.parametrize("epilogue", [False, True])
@pytest.mark.parametrize("case", CASES, ids=[str(c[1]) for c in CASES])
def test_cpu_kernel_matches_reference(cl_env, case, epilogue):
    xs, ws, strides, dilations, pb, pe = case
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    op = get_op("Convolution")
    a = op.parse_attributes(attrs(strides, dilations, pb, pe), "conv")
    ctx = CompileContext(CPU, FusedEpilogue(bias=True, relu=True) if epilogue else None)
    arrays = [x, w]
    if epilogue:
        arrays.append(rng.standard_normal(ws[0]).astype(np.float32))
    descs = [TensorDesc(v.shape) for v in arrays]
    (shape, dtype), = op.infer_shapes(a, descs[:2], {})
    out = [TensorDesc(shape, dtype)]
    launches = op.launches(a, descs, out, {}, ctx)
    assert [l.entry for l in launches] == ["conv_cpu"]
    got = run_launches(cl_env, launches, arrays, descs, out)[0]
    want = conv_ref(x, w, strides, dilations, pb, pe)
    if epilogue:
        want = np.maximum(want + arrays[2].reshape(1, -1, 1, 1), 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_grouped_cpu_kernel(cl_env):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 12, 9, 7)).astype(np.float32)
    w = rng.standard_normal((3, 5, 4, 3, 3)).astype(np.float32)     # G=3, OG=5, CG=4
    op = get_op("GroupConvolution")
    a = op.parse_attributes(attrs((2, 1), (1, 1), (1, 1), (1, 1)), "gconv")
    descs = [TensorDesc(x.shape), TensorDesc(w.shape)]
    (shape, dtype), = op.infer_shapes(a, descs, {})
    out = [TensorDesc(shape, dtype)]
    got = run_launches(cl_env, op.launches(a, descs, out, {}, CompileContext(CPU)), [x, w], descs,
                       out)[0]
    want = conv_ref(x, w.reshape(15, 4, 3, 3), (2, 1), (1, 1), (1, 1), (1, 1), groups=3)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
