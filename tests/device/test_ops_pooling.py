"""MaxPool / AvgPool built-ins on a real device against a numpy reference and OpenVINO CPU."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.errors import BindingError
from customlayers.jit.tensor import TensorDesc
from customlayers.jit.launch import DEFAULT_CONTEXT, CompileContext, DeviceTraits
from customlayers.ops import get_op
from launch_runner import run_launches


CPU = CompileContext(DeviceTraits("CPU", compute_units=2, max_work_group_size=4096))


@pytest.fixture(params=[DEFAULT_CONTEXT, CPU], ids=["any", "cpu"])
def ctx(request):
    """Every case runs pooling.cl and, with a CPU DeviceTraits, pool_cpu.cl."""
    return request.param


def run_op(cl_env, ctx, op_type, raw, x):
    op = get_op(op_type)
    attrs = op.parse_attributes(raw, "pool1")
    descs = [TensorDesc(x.shape)]
    out_descs = [TensorDesc(s, d) for s, d in op.infer_shapes(attrs, descs, {})]
    launches = op.launches(attrs, descs, out_descs, {}, ctx)
    if ctx is CPU:
        assert [l.entry for l in launches] == ["pool_cpu"]
    return run_launches(cl_env, launches, [x], descs, out_descs)


def j(v):
    return ", ".join(map(str, v))


def raw(kernel, strides, pb, pe, rounding="floor", auto_pad="explicit", **extra):
    return {"kernel": j(kernel), "strides": j(strides), "pads_begin": j(pb), "pads_end": j(pe),
            "rounding_type": rounding, "auto_pad": auto_pad, **extra}


def pool_ref(x, kind, kernel, strides, pb, out_hw, dilations=(1, 1), count_pad=False):
    """Window over in-bounds cells; avg divides by the count or by the whole window."""
    n, c, h, w = x.shape
    oh, ow = out_hw
    out = np.zeros((n, c, oh, ow))
    idx = np.zeros((n, c, oh, ow), np.int64)
    for oy in range(oh):
        for ox in range(ow):
            ys = [oy * strides[0] - pb[0] + k * dilations[0] for k in range(kernel[0])]
            xs = [ox * strides[1] - pb[1] + k * dilations[1] for k in range(kernel[1])]
            ys = [y for y in ys if 0 <= y < h]
            xs = [v for v in xs if 0 <= v < w]
            if not ys or not xs:
                continue
            win = x[:, :, ys][:, :, :, xs].reshape(n, c, -1)
            if kind == "max":
                arg = win.argmax(-1)
                out[:, :, oy, ox] = win.max(-1)
                flat = np.array([ys[a // len(xs)] * w + xs[a % len(xs)] for a in arg.ravel()])
                idx[:, :, oy, ox] = flat.reshape(n, c)
            else:
                div = kernel[0] * kernel[1] if count_pad else win.shape[-1]
                out[:, :, oy, ox] = win.sum(-1) / div
    return out, idx


MAX_CASES = [
    # kernel, strides, pads_begin, pads_end, rounding, expected output H,W for a 9x8 input
    ((3, 3), (2, 2), (0, 0), (0, 0), "floor", (4, 3)),
    ((3, 3), (1, 1), (1, 1), (1, 1), "floor", (9, 8)),
    ((2, 2), (2, 2), (0, 0), (0, 0), "ceil", (5, 4)),
    ((3, 3), (2, 2), (0, 0), (1, 1), "floor", (4, 4)),
    ((3, 2), (3, 2), (1, 0), (2, 1), "ceil", (4, 5)),
]


@pytest.mark.parametrize("kernel,strides,pb,pe,rounding,out_hw", MAX_CASES)
def test_maxpool(cl_env, ctx, kernel, strides, pb, pe, rounding, out_hw):
    x = np.random.default_rng(9).standard_normal((2, 3, 9, 8)).astype(np.float32)
    (out,) = run_op(cl_env, ctx, "MaxPool", raw(kernel, strides, pb, pe, rounding), x)
    ref, _ = pool_ref(x, "max", kernel, strides, pb, out_hw)
    assert out.shape == (2, 3) + out_hw
    np.testing.assert_allclose(out, ref, rtol=1e-6)


def test_maxpool8_dilations_and_indices(cl_env, ctx):
    x = np.random.default_rng(10).standard_normal((2, 3, 10, 9)).astype(np.float32)
    r = raw((3, 2), (2, 1), (1, 0), (1, 1), dilations="2, 3", index_element_type="i64", axis="0")
    out, idx = run_op(cl_env, ctx, "MaxPool", r, x)
    # H: (10+2-5)//2+1 = 4; W: (9+1-4)//1+1 = 7
    ref, ref_idx = pool_ref(x, "max", (3, 2), (2, 1), (1, 0), (4, 7), dilations=(2, 3))
    np.testing.assert_allclose(out, ref, rtol=1e-6)
    # axis=0: indices flat over the whole input tensor
    plane = (np.arange(2)[:, None] * 3 + np.arange(3)[None, :]) * 90
    assert idx.dtype == np.int64
    np.testing.assert_array_equal(idx, ref_idx + plane[:, :, None, None])
    r["axis"] = "1"
    r["index_element_type"] = "i32"
    _, idx1 = run_op(cl_env, ctx, "MaxPool", r, x)
    assert idx1.dtype == np.int32
    np.testing.assert_array_equal(idx1, ref_idx + (np.arange(3) * 90)[None, :, None, None])


@pytest.mark.parametrize("exclude", [True, False])
@pytest.mark.parametrize("kernel,strides,pb,pe,rounding,out_hw", MAX_CASES)
def test_avgpool(cl_env, ctx, exclude, kernel, strides, pb, pe, rounding, out_hw):
    x = np.random.default_rng(11).standard_normal((1, 4, 9, 8)).astype(np.float32)
    r = raw(kernel, strides, pb, pe, rounding, **{"exclude-pad": str(exclude).lower()})
    (out,) = run_op(cl_env, ctx, "AvgPool", r, x)
    count_pad = not exclude and (any(pb) or any(pe))
    ref, _ = pool_ref(x, "avg", kernel, strides, pb, out_hw, count_pad=count_pad)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("auto_pad,pb,out_hw", [
    ("same_upper", (0, 0), (5, 4)),     # total pad 1: begin 0, end 1
    ("same_lower", (1, 0), (5, 4)),     # H: begin 1; W needs no pad
    ("valid", (0, 0), (4, 4)),
])
def test_pool_auto_pad(cl_env, ctx, auto_pad, pb, out_hw):
    x = np.random.default_rng(12).standard_normal((1, 2, 9, 8)).astype(np.float32)
    r = raw((2, 2), (2, 2), (5, 5), (5, 5), auto_pad=auto_pad)
    (out,) = run_op(cl_env, ctx, "MaxPool", r, x)
    ref, _ = pool_ref(x, "max", (2, 2), (2, 2), pb, out_hw)
    np.testing.assert_allclose(out, ref, rtol=1e-6)


def test_pool_1d(cl_env, ctx):
    x = np.random.default_rng(13).standard_normal((2, 3, 11)).astype(np.float32)
    r = {"kernel": "3", "strides": "2", "pads_begin": "1", "pads_end": "1",
         "exclude-pad": "true", "auto_pad": "explicit", "rounding_type": "floor"}
    (out,) = run_op(cl_env, ctx, "AvgPool", r, x)
    ref, _ = pool_ref(x[:, :, None, :], "avg", (1, 3), (1, 2), (0, 1), (1, 6))
    np.testing.assert_allclose(out, ref[:, :, 0], rtol=1e-5)


@pytest.mark.parametrize("kernel,strides,pb,pe,rounding,exclude", [
    ((3, 3), (2, 2), (1, 1), (1, 1), "ceil", False),
    ((3, 3), (2, 2), (0, 0), (0, 0), "ceil", False),
    ((3, 3), (1, 1), (1, 1), (1, 1), "floor", True),
    ((2, 2), (2, 2), (0, 1), (1, 0), "floor", False),
    ((7, 7), (1, 1), (0, 0), (1, 1), "floor", True),
])
def test_matches_openvino_cpu(cl_env, ctx, kernel, strides, pb, pe, rounding, exclude):
    ov = pytest.importorskip("openvino")
    ops = pytest.importorskip("openvino.opset8")
    x = np.random.default_rng(14).standard_normal((1, 3, 8, 9)).astype(np.float32)
    p = ops.parameter(x.shape, np.float32)
    avg = ops.avg_pool(p, list(strides), list(pb), list(pe), list(kernel), exclude, rounding)
    mx = ops.max_pool(p, list(strides), [1, 1], list(pb), list(pe), list(kernel), rounding)
    model = ov.Model([avg.output(0), mx.output(0), mx.output(1)], [p])
    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    res = compiled([x])
    r = raw(kernel, strides, pb, pe, rounding, **{"exclude-pad": str(exclude).lower()})
    (out_avg,) = run_op(cl_env, ctx, "AvgPool", r, x)
    out_max, out_idx = run_op(cl_env, ctx, "MaxPool", {**r, "index_element_type": "i64"}, x)
    np.testing.assert_allclose(out_avg, res[compiled.output(0)], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out_max, res[compiled.output(1)], rtol=1e-6)
    np.testing.assert_array_equal(out_idx, res[compiled.output(2)])


WIDE_CASES = [
    # kernel, strides, pads_begin, pads_end, input H x W: rows wide enough for pool_cpu.cl's
    # float8 runs, with edge outputs on both sides (ShuffleNet's and ResNet's first MaxPool)
    ((3, 3), (2, 2), (1, 1), (1, 1), (23, 45)),
    ((3, 3), (1, 1), (1, 1), (1, 1), (13, 27)),
    ((2, 2), (2, 2), (0, 0), (0, 0), (9, 34)),
    ((3, 2), (1, 2), (0, 1), (2, 0), (11, 40)),
    # Inception's: a row's last run moved back over the one before it (13: inside 1..11)
    ((3, 3), (1, 1), (1, 1), (1, 1), (13, 13)),
    ((3, 3), (2, 2), (0, 0), (1, 1), (27, 27)),
    # 4 to 7 inside outputs a row: float4 runs (Inception's 6x6 planes), stride 1 and 2, the
    # second run moved back over the first; windows past the bottom and the right edge
    ((3, 3), (1, 1), (1, 1), (1, 1), (6, 6)),
    ((3, 3), (1, 1), (1, 1), (1, 1), (9, 9)),
    ((3, 3), (2, 2), (0, 0), (0, 0), (13, 13)),
    ((2, 2), (1, 1), (0, 0), (1, 1), (5, 6)),
    # 3x3, stride 1, pads 1: a row's edges as runs too, whose outside column is the edge one
    # again (5 wide: a left and a right float4 run over each other; 10 wide: float8 runs)
    ((3, 3), (1, 1), (1, 1), (1, 1), (7, 5)),
    ((3, 3), (1, 1), (1, 1), (1, 1), (5, 10)),
    # narrower than a run: every output on the clamped path (MaxPool), and ceil-mode-like ends
    ((3, 3), (2, 2), (0, 0), (1, 1), (7, 7)),
    # a float4 run of stride 2 between scalar edge windows
    ((2, 2), (2, 2), (1, 1), (1, 1), (5, 9)),
]


def scalar_rule(x, kind, kernel, strides, pb, pe):
    """A 2-D pooling of x [N, C, H, W] by the scalar path's rule, over each window's inside
    taps in row-major order: max keeps the first tap, then a strictly greater one (a NaN first
    stays, a later one is skipped; of equal zeros the first's sign); avg their mean."""
    hw = x.shape[2:]
    out_hw = tuple((n + b + e - k) // s + 1 for n, b, e, k, s in zip(hw, pb, pe, kernel, strides))
    want = np.empty(x.shape[:2] + out_hw, np.float32)
    for oy in range(out_hw[0]):
        for ox in range(out_hw[1]):
            ys = [y for y in range(oy * strides[0] - pb[0], oy * strides[0] - pb[0] + kernel[0])
                  if 0 <= y < hw[0]]
            xs = [v for v in range(ox * strides[1] - pb[1], ox * strides[1] - pb[1] + kernel[1])
                  if 0 <= v < hw[1]]
            win = x[:, :, ys][:, :, :, xs].reshape(x.shape[:2] + (-1,))
            if kind == "avg":
                want[:, :, oy, ox] = win.sum(-1) / win.shape[-1]
                continue
            best = win[:, :, 0].copy()
            for t in range(1, win.shape[-1]):
                best = np.where(win[:, :, t] > best, win[:, :, t], best)
            want[:, :, oy, ox] = best
    return want


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("kernel,strides,pb,pe,hw", WIDE_CASES)
def test_wide_rows(cl_env, ctx, kind, kernel, strides, pb, pe, hw):
    """Every output of a row, float8 and float4 runs and scalar edges alike, and the top and
    bottom rows (a MaxPool's runs there clamp their rows into the input), equals the
    reference; a NaN first in a window stays (MaxPool), one later is skipped, as in the scalar
    path."""
    x = np.random.default_rng(15).standard_normal((2, 3) + hw).astype(np.float32)
    x[0, 0, 4, :] = np.nan                    # a row of NaNs: first in some windows, later in some
    # at the edges, where a window's first inside tap is not its first tap (MaxPool's clamped
    # taps repeat inside ones: a NaN first must stay, one later must not win)
    x[1, 0, :, 0] = np.nan                    # the first column
    x[1, 1, 0, :] = np.nan                    # the top row
    x[1, 2, -1, -1] = np.nan                  # the last corner
    x[1, 2, 2, -1] = np.nan                   # the last column
    op_type = "MaxPool" if kind == "max" else "AvgPool"
    r = raw(kernel, strides, pb, pe, **({} if kind == "max" else {"exclude-pad": "true"}))
    (out,) = run_op(cl_env, ctx, op_type, r, x)
    want = scalar_rule(x, kind, kernel, strides, pb, pe)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6, equal_nan=True)


def test_errors_name_the_layer():
    op = get_op("MaxPool")
    with pytest.raises(BindingError, match="layer 'p' \\(MaxPool\\): attribute 'rounding_type'="
                                           "'round' is not one of floor, ceil, ceil_torch"):
        op.parse_attributes(raw((2, 2), (2, 2), (0, 0), (0, 0), "round"), "p")
    with pytest.raises(BindingError, match="attribute 'kernel' is required"):
        op.parse_attributes({"strides": "1, 1", "pads_begin": "0,0", "pads_end": "0,0"}, "p")
    a = op.parse_attributes(raw((5, 5), (1, 1), (0, 0), (0, 0)), "p")
    with pytest.raises(BindingError, match="layer 'p'.*does not fit"):
        op.infer_shapes(a, [TensorDesc((1, 2, 3, 3))], {})
    with pytest.raises(BindingError, match="expected rank 3 \\(N,C,W\\) or 4"):
        op.infer_shapes(a, [TensorDesc((4, 4))], {})


@pytest.mark.parametrize("exclude", [True, False])
@pytest.mark.parametrize("kernel,strides,dil,pb,pe,out_hw", [
    # 8x9 input; ceil_torch drops a window that would start in pads_end (H of the 1st, both
    # axes of the 4th), others run past pads_end (H of the 2nd)
    ((2, 2), (2, 2), (1, 1), (0, 0), (1, 1), (4, 5)),
    ((3, 3), (2, 2), (1, 1), (1, 1), (1, 1), (5, 5)),
    ((3, 2), (2, 3), (2, 3), (2, 1), (2, 2), (5, 4)),
    ((2, 2), (3, 3), (2, 1), (0, 0), (2, 2), (3, 3)),
])
def test_avgpool_ceil_torch_with_dilations_counts_padding_up_to_pads_end(
        cl_env, ctx, exclude, kernel, strides, dil, pb, pe, out_hw):
    """ONNX's AveragePool (ceil_mode, dilations): with padding counted, a window that runs past
    pads_end divides by its taps inside the padded input only (as ONNX Runtime and PyTorch)."""
    x = np.random.default_rng(16).standard_normal((1, 2, 8, 9)).astype(np.float32)
    r = raw(kernel, strides, pb, pe, "ceil_torch", dilations=j(dil),
            **{"exclude-pad": str(exclude).lower()})
    (out,) = run_op(cl_env, ctx, "AvgPool", r, x)
    want = np.zeros((1, 2) + out_hw)
    size = x.shape[2:]
    for oy in range(out_hw[0]):
        for ox in range(out_hw[1]):
            taps = [[o * s - b + k * d for k in range(kk)]
                    for o, s, b, d, kk in zip((oy, ox), strides, pb, dil, kernel)]
            inside = [[t for t in ts if 0 <= t < n] for ts, n in zip(taps, size)]
            padded = [[t for t in ts if -b <= t < n + e] for ts, n, b, e in zip(taps, size, pb, pe)]
            total = x[:, :, inside[0]][:, :, :, inside[1]].sum((-2, -1))
            count = len(inside[0]) * len(inside[1]) if exclude else \
                len(padded[0]) * len(padded[1])
            want[:, :, oy, ox] = total / count
    assert out.shape == want.shape
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("kernel,strides,pb,pe,w", [
    ((1, 2, 2), (1, 2, 2), (1, 0, 0), (0, 0, 0), 4),     # scalar windows
    ((1, 1, 2), (1, 1, 1), (1, 0, 0), (0, 0, 0), 6),     # float4 runs
    ((1, 1, 2), (1, 1, 1), (1, 0, 0), (1, 0, 0), 12),    # float8 runs, a pad at each end
    ((1, 3, 3), (1, 1, 1), (1, 1, 1), (0, 1, 1), 10),    # 3x3 stride 1 pads 1: edge runs
])
def test_a_depth_of_one_padded_is_pooled_as_padding(cl_env, kind, kernel, strides, pb, pe, w):
    """A 3-D input of depth 1 with a pad along depth: the output slices whose window lies in
    the padding are pool_one's (nothing inside: 0), not the input's plane pooled as 2-D (the
    review found pool_cpu.cl's runs taking them; pooling.cl is the reference here)."""
    x = np.arange(1, 2 * 5 * w + 1, dtype=np.float32).reshape(1, 2, 1, 5, w)
    op_type = "MaxPool" if kind == "max" else "AvgPool"
    r = raw(kernel, strides, pb, pe, **({} if kind == "max" else {"exclude-pad": "true"}))
    (want,) = run_op(cl_env, DEFAULT_CONTEXT, op_type, r, x)
    (got,) = run_op(cl_env, CPU, op_type, r, x)
    assert want.shape[2] == 1 + pb[0] + pe[0]
    assert not want[:, :, 0].any()                # the slice in the front padding
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kernel,strides,pb,pe,hw", WIDE_CASES)
def test_max_of_signed_zeros_keeps_the_first(cl_env, kernel, strides, pb, pe, hw):
    """Among equal values the window's first tap wins (row-major, inside taps only): with
    -0.0 and +0.0 mixed, the sign of every output zero is the scalar rule's, bit for bit, in
    the runs (clamped rows, float8/float4, the edge runs) as in the scalar windows."""
    rng = np.random.default_rng(7)
    x = np.where(rng.random((2, 3) + hw) < 0.5, np.float32(-0.0), np.float32(0.0))
    x[rng.random(x.shape) < 0.1] = -1.0
    x[0, 1, 2, 3] = np.nan                    # a NaN first in some windows, later in others
    (got,) = run_op(cl_env, CPU, "MaxPool", raw(kernel, strides, pb, pe), x)
    want = scalar_rule(x, "max", kernel, strides, pb, pe)
    np.testing.assert_array_equal(got, want)      # (NaNs equal; zeros by value: the sign next)
    assert np.array_equal(np.signbit(got), np.signbit(want)), "the sign of a zero differs"
