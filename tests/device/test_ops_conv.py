"""Convolution / GroupConvolution built-ins on a real device against a numpy reference."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.errors import BindingError
from customlayers.jit.tensor import TensorDesc
from customlayers.ops import get_op
from launch_runner import run_launches


def run_op(cl_env, op_type, raw, arrays, consts=None):
    op = get_op(op_type)
    attrs = op.parse_attributes(raw, "layer_under_test")
    descs = [TensorDesc(a.shape) for a in arrays]
    consts = consts or {}
    out_descs = [TensorDesc(s, d) for s, d in op.infer_shapes(attrs, descs, consts)]
    launches = op.launches(attrs, descs, out_descs, consts)
    return run_launches(cl_env, launches, arrays, descs, out_descs)[0], launches


def conv_ref(x, w, strides, dilations, pads_begin, pads_end, groups=1):
    """Direct 2-D convolution: x [N,C,H,W], w [O,C/groups,KH,KW]."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    sy, sx = strides
    dy, dx = dilations
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads_begin[0], pads_end[0]),
                                       (pads_begin[1], pads_end[1])))
    oh = (xp.shape[2] - (kh - 1) * dy - 1) // sy + 1
    ow = (xp.shape[3] - (kw - 1) * dx - 1) // sx + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg]
        ws = w[g * og:(g + 1) * og].astype(np.float64)
        for ky in range(kh):
            for kx in range(kw):
                patch = xs[:, :, ky * dy: ky * dy + (oh - 1) * sy + 1: sy,
                           kx * dx: kx * dx + (ow - 1) * sx + 1: sx]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, ws[:, :, ky, kx])
    return out


def attrs(strides=(1, 1), dilations=(1, 1), pb=(0, 0), pe=(0, 0), auto_pad="explicit"):
    j = lambda v: ", ".join(map(str, v))  # noqa: E731
    return {"strides": j(strides), "dilations": j(dilations), "pads_begin": j(pb),
            "pads_end": j(pe), "auto_pad": auto_pad}


CASES = [
    # (x shape, w shape, strides, dilations, pads_begin, pads_end)
    ((1, 3, 9, 9), (8, 3, 3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),        # direct? no: OG=8 gemm
    ((2, 5, 11, 7), (20, 5, 3, 3), (2, 2), (1, 1), (1, 1), (1, 1)),      # odd sizes, batch 2
    ((1, 17, 6, 6), (33, 17, 1, 1), (1, 1), (1, 1), (0, 0), (0, 0)),     # 1x1, M not tile multiple
    ((1, 4, 13, 12), (70, 4, 5, 3), (3, 2), (2, 1), (3, 0), (1, 2)),     # asymmetric everything
    ((1, 3, 16, 16), (6, 3, 7, 7), (2, 2), (1, 1), (3, 3), (3, 3)),      # OG=6
    ((2, 6, 5, 5), (3, 6, 3, 3), (1, 1), (1, 1), (0, 1), (2, 0)),        # direct (OG=3)
]


@pytest.mark.parametrize("xs,ws,s,d,pb,pe", CASES)
def test_convolution_matches_reference(cl_env, xs, ws, s, d, pb, pe):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    out, _ = run_op(cl_env, "Convolution", attrs(s, d, pb, pe), [x, w])
    np.testing.assert_allclose(out, conv_ref(x, w, s, d, pb, pe), rtol=1e-4, atol=1e-4)


def test_convolution_uses_tiled_gemm_for_wide_layers(cl_env):
    x = np.ones((1, 8, 5, 5), np.float32)
    w = np.ones((32, 8, 3, 3), np.float32)
    out, launches = run_op(cl_env, "Convolution", attrs(pb=(1, 1), pe=(1, 1)), [x, w])
    assert launches[0].entry == "gemm_tiled" and launches[0].local_size is not None
    assert out[0, 0, 2, 2] == 72 and out[0, 0, 0, 0] == 32


@pytest.mark.parametrize("auto_pad", ["same_upper", "same_lower", "valid"])
def test_convolution_auto_pad(cl_env, auto_pad):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 3, 8, 7)).astype(np.float32)
    w = rng.standard_normal((16, 3, 4, 3)).astype(np.float32)
    # explicit pads in the model are ignored when auto_pad is set
    out, _ = run_op(cl_env, "Convolution", attrs((2, 2), (1, 1), (9, 9), (9, 9), auto_pad), [x, w])
    if auto_pad == "valid":
        pb, pe = (0, 0), (0, 0)
    else:  # out = ceil(in/s); total pad (o-1)*s + k - in: H: 3*2+4-8=2, W: 3*2+3-7=2
        pb, pe = ((1, 1), (1, 1))
    np.testing.assert_allclose(out, conv_ref(x, w, (2, 2), (1, 1), pb, pe), rtol=1e-4, atol=1e-4)
    if auto_pad != "valid":
        assert out.shape == (1, 16, 4, 4)


def test_same_lower_puts_the_odd_pad_first(cl_env):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    w = rng.standard_normal((16, 2, 2, 2)).astype(np.float32)
    out_u, _ = run_op(cl_env, "Convolution", attrs(auto_pad="same_upper"), [x, w])
    out_l, _ = run_op(cl_env, "Convolution", attrs(auto_pad="same_lower"), [x, w])
    np.testing.assert_allclose(out_u, conv_ref(x, w, (1, 1), (1, 1), (0, 0), (1, 1)),
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out_l, conv_ref(x, w, (1, 1), (1, 1), (1, 1), (0, 0)),
                               rtol=1e-4, atol=1e-4)


def test_convolution_1d(cl_env):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 5, 19)).astype(np.float32)
    w = rng.standard_normal((24, 5, 3)).astype(np.float32)
    raw = {"strides": "2", "dilations": "2", "pads_begin": "1", "pads_end": "3",
           "auto_pad": "explicit"}
    out, _ = run_op(cl_env, "Convolution", raw, [x, w])
    ref = conv_ref(x[:, :, None, :], w[:, :, None, :], (1, 2), (1, 2), (0, 1), (0, 3))[:, :, 0]
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("xs,ws,s,pb,pe", [
    ((2, 6, 9, 8), (6, 1, 1, 3, 3), (1, 1), (1, 1), (1, 1)),    # depthwise -> direct kernel
    ((1, 8, 7, 7), (8, 1, 1, 3, 3), (2, 2), (1, 1), (1, 1)),    # depthwise, stride 2
    ((1, 12, 6, 5), (3, 8, 4, 1, 1), (1, 1), (0, 0), (0, 0)),   # grouped 1x1 -> GEMM per group
    ((2, 6, 7, 9), (2, 20, 3, 3, 3), (2, 1), (0, 1), (2, 1)),   # grouped 3x3, OG=20
])
def test_group_convolution(cl_env, xs, ws, s, pb, pe):
    rng = np.random.default_rng(5)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    out, _ = run_op(cl_env, "GroupConvolution", attrs(s, (1, 1), pb, pe), [x, w])
    g, og, cg = ws[:3]
    ref = conv_ref(x, w.reshape((g * og,) + ws[2:]), s, (1, 1), pb, pe, groups=g)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_matches_openvino_cpu(cl_env):
    ov = pytest.importorskip("openvino")
    ops = pytest.importorskip("openvino.opset13")
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 6, 10, 9)).astype(np.float32)
    w = rng.standard_normal((18, 6, 3, 3)).astype(np.float32)
    wg = rng.standard_normal((6, 1, 1, 3, 3)).astype(np.float32)
    p = ops.parameter(x.shape, np.float32)
    conv = ops.convolution(p, ops.constant(w), [2, 1], [1, 0], [0, 2], [1, 2])
    gconv = ops.group_convolution(p, ops.constant(wg), [1, 1], [1, 1], [1, 1], [1, 1])
    model = ov.Model([conv, gconv], [p])
    # f32 inference: the CPU plugin may otherwise compute in bf16 on CPUs that have it
    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    result = compiled([x])
    ref_c, ref_g = result[compiled.output(0)], result[compiled.output(1)]
    out_c, _ = run_op(cl_env, "Convolution", attrs((2, 1), (1, 2), (1, 0), (0, 2)), [x, w])
    out_g, _ = run_op(cl_env, "GroupConvolution", attrs(pb=(1, 1), pe=(1, 1)), [x, wg])
    np.testing.assert_allclose(out_c, ref_c, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out_g, ref_g, rtol=1e-4, atol=1e-4)


def test_bad_input_names_the_layer():
    op = get_op("Convolution")
    with pytest.raises(BindingError, match="layer 'c1' \\(Convolution\\): attribute 'auto_pad'"):
        op.parse_attributes({**attrs(), "auto_pad": "middle"}, "c1")
    a = op.parse_attributes(attrs(), "c2")
    with pytest.raises(BindingError, match="layer 'c2'.*input 0 has 4 channels.*expect 3"):
        op.infer_shapes(a, [TensorDesc((1, 4, 5, 5)), TensorDesc((8, 3, 3, 3))], {})
    with pytest.raises(BindingError, match="layer 'c2'.*does not fit"):
        op.infer_shapes(a, [TensorDesc((1, 3, 2, 2)), TensorDesc((8, 3, 3, 3))], {})
    with pytest.raises(BindingError, match="'strides' has 2 values, the input has 1"):
        op.infer_shapes(a, [TensorDesc((1, 3, 9)), TensorDesc((8, 3, 3))], {})
