"""3-D (N,C,D,H,W) Convolution / GroupConvolution built-ins on the test device against a numpy
reference: strides, dilations, explicit and automatic pads, groups and the fused epilogue."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.errors import BindingError
from customlayers.jit.tensor import TensorDesc
from customlayers.jit.launch import CompileContext, FusedEpilogue
from customlayers.ops import get_op
from launch_runner import run_launches


def run_op(cl_env, op_type, raw, arrays, epilogue=None):
    op = get_op(op_type)
    attrs = op.parse_attributes(raw, "conv3d_under_test")
    descs = [TensorDesc(a.shape) for a in arrays]
    out_descs = [TensorDesc(s, d) for s, d in op.infer_shapes(attrs, descs, {})]
    launches = op.launches(attrs, descs, out_descs, {}, CompileContext(epilogue=epilogue))
    return run_launches(cl_env, launches, arrays, descs, out_descs)[0], launches


def conv3d_ref(x, w, strides, dilations, pads_begin, pads_end, groups=1):
    """x [N,C,D,H,W], w [O,C/groups,KD,KH,KW], in float64."""
    pad = ((0, 0), (0, 0)) + tuple(zip(pads_begin, pads_end))
    xp = np.pad(x.astype(np.float64), pad)
    o, cg = w.shape[:2]
    kernel = w.shape[2:]
    out_sp = [(xp.shape[2 + i] - (kernel[i] - 1) * dilations[i] - 1) // strides[i] + 1
              for i in range(3)]
    out = np.zeros((x.shape[0], o, *out_sp))
    og = o // groups
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg]
        ws = w[g * og:(g + 1) * og].astype(np.float64)
        for k in np.ndindex(*kernel):
            window = tuple(slice(k[i] * dilations[i],
                                 k[i] * dilations[i] + (out_sp[i] - 1) * strides[i] + 1,
                                 strides[i]) for i in range(3))
            patch = xs[(slice(None), slice(None)) + window]
            out[:, g * og:(g + 1) * og] += np.einsum("ncdhw,oc->nodhw", patch,
                                                     ws[(slice(None), slice(None)) + k])
    return out


def j(v):
    return ", ".join(map(str, v))


def attrs(strides=(1, 1, 1), dilations=(1, 1, 1), pb=(0, 0, 0), pe=(0, 0, 0),
          auto_pad="explicit"):
    return {"strides": j(strides), "dilations": j(dilations), "pads_begin": j(pb),
            "pads_end": j(pe), "auto_pad": auto_pad}


CASES = [
    # (x shape, w shape, strides, dilations, pads_begin, pads_end)
    ((1, 2, 5, 6, 7), (3, 2, 3, 3, 3), (1, 1, 1), (1, 1, 1), (0, 0, 0), (0, 0, 0)),
    ((2, 3, 6, 5, 5), (4, 3, 2, 3, 2), (2, 1, 2), (1, 1, 1), (1, 1, 0), (0, 1, 1)),  # stride, pad
    ((1, 2, 7, 7, 6), (2, 2, 3, 2, 2), (1, 2, 1), (2, 1, 3), (0, 0, 0), (0, 0, 0)),  # dilation
    ((1, 1, 8, 6, 9), (5, 1, 3, 3, 3), (2, 2, 3), (2, 2, 1), (2, 1, 1), (1, 2, 0)),  # everything
    ((1, 4, 3, 4, 4), (6, 4, 1, 1, 1), (1, 1, 1), (1, 1, 1), (0, 0, 0), (0, 0, 0)),  # 1x1x1
]


@pytest.mark.parametrize("xs,ws,s,d,pb,pe", CASES)
def test_convolution_3d_matches_reference(cl_env, xs, ws, s, d, pb, pe):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    out, launches = run_op(cl_env, "Convolution", attrs(s, d, pb, pe), [x, w])
    assert launches[0].entry == "conv3d_direct"
    np.testing.assert_allclose(out, conv3d_ref(x, w, s, d, pb, pe), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("xs,g,og,s,d,pb", [
    ((1, 4, 4, 5, 5), 2, 3, (1, 1, 1), (1, 1, 1), (1, 1, 1)),
    ((2, 6, 5, 4, 6), 3, 1, (2, 1, 2), (1, 2, 1), (0, 1, 1)),   # depthwise-like, 2 per group
    ((1, 3, 4, 4, 4), 3, 2, (1, 1, 1), (2, 1, 1), (2, 0, 1)),   # channel multiplier
])
def test_group_convolution_3d_matches_reference(cl_env, xs, g, og, s, d, pb):
    rng = np.random.default_rng(4)
    cg = xs[1] // g
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal((g, og, cg, 3, 2, 3)).astype(np.float32)
    out, _ = run_op(cl_env, "GroupConvolution", attrs(s, d, pb, pb), [x, w])
    ref = conv3d_ref(x, w.reshape(g * og, cg, 3, 2, 3), s, d, pb, pb, groups=g)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("auto_pad,pads", [
    ("same_upper", ((1, 0, 1), (1, 1, 1))),   # stride 2 on 5/6/7: totals 2, 1, 2
    ("same_lower", ((1, 1, 1), (1, 0, 1))),
    ("valid", ((0, 0, 0), (0, 0, 0))),
])
def test_convolution_3d_auto_pad(cl_env, auto_pad, pads):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 2, 5, 6, 7)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3, 3)).astype(np.float32)
    s = (2, 2, 2)
    # explicit pads are ignored under auto_pad: give nonsense ones to prove it
    out, _ = run_op(cl_env, "Convolution", attrs(s, pb=(9, 9, 9), pe=(9, 9, 9),
                                                 auto_pad=auto_pad), [x, w])
    ref = conv3d_ref(x, w, s, (1, 1, 1), *pads)
    assert out.shape == ref.shape
    if auto_pad != "valid":
        assert out.shape[2:] == (3, 3, 4)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("relu", [False, True])
def test_convolution_3d_fused_bias_and_relu(cl_env, relu):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 2, 4, 4, 5)).astype(np.float32)
    w = rng.standard_normal((4, 2, 2, 2, 2)).astype(np.float32)
    bias = rng.standard_normal((1, 4, 1, 1, 1)).astype(np.float32)
    raw = attrs(pb=(1, 0, 1), pe=(0, 1, 1))
    out, _ = run_op(cl_env, "Convolution", raw, [x, w, bias], FusedEpilogue(bias=True, relu=relu))
    ref = conv3d_ref(x, w, (1, 1, 1), (1, 1, 1), (1, 0, 1), (0, 1, 1)) + bias
    if relu:
        ref = np.maximum(ref, 0)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_bad_3d_weights_name_the_layer():
    op = get_op("Convolution")
    a = op.parse_attributes(attrs(), "conv3d_bad")
    with pytest.raises(BindingError, match=r"conv3d_bad.*expected rank 5"):
        op.infer_shapes(a, [TensorDesc((1, 2, 4, 4, 4)), TensorDesc((3, 2, 3, 3))], {})
    with pytest.raises(BindingError, match=r"conv3d_bad.*'strides' has 2 values"):
        op.infer_shapes(op.parse_attributes(attrs(strides=(1, 1)), "conv3d_bad"),
                        [TensorDesc((1, 2, 4, 4, 4)), TensorDesc((3, 2, 3, 3, 3))], {})
    with pytest.raises(BindingError, match=r"conv3d_bad.*rank 3 \(N,C,W\)"):
        op.infer_shapes(a, [TensorDesc((1, 2, 4, 4, 4, 4)), TensorDesc((3, 2, 3, 3, 3))], {})
