"""MatMul reading its operands through folded views and storing through a folded output view
(ops/view_steps.py's OperandViews, the fact passes/view_folding.py hands it): every kernel the
MatMul has (the GPU's tiled GEMM in each tiling, split-K, the matrix-vector kernel; the CPU's
register-blocked kernels) against numpy's float64 product of the copies the folded layers would
have made."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.jit.launch import CompileContext, DeviceTraits, FusedEpilogue
from customlayers.jit.tensor import TensorDesc
from customlayers.ops import get_op
from customlayers.ops.nn.matmul import matmul_variants
from customlayers.ops.view_steps import OperandViews, dense_view
from launch_runner import kernel_sample, run_launches

CPU = DeviceTraits("CPU", compute_units=2, max_work_group_size=4096, float_vector_width=8)
GPU = DeviceTraits("GPU", compute_units=4, max_work_group_size=256)


def _head_split(s: int, b: int, h: int, d: int, which: int):
    """torch's MultiheadAttention export: [S, B, 3D] -> Reshape [S, B, 3, D] -> Unsqueeze 0 ->
    Transpose (3, 1, 2, 0, 4) -> Squeeze 3 -> Gather `which` -> Reshape [S, B*H, d] ->
    Transpose (1, 0, 2) -> Reshape [B, H, S, d], as a view of the [S, B, 3D] tensor and as the
    numpy function the layers compute."""
    view = dense_view((s, b, 3 * h * d)).reshape((s, b, 3, h * d)).reshape((1, s, b, 3, h * d))
    view = view.transpose((3, 1, 2, 0, 4)).reshape((3, s, b, h * d)).select(0, which)
    view = view.reshape((s, b * h, d)).transpose((1, 0, 2)).reshape((b, h, s, d))

    def copy(x):
        y = x.reshape(s, b, 3, h * d)[None].transpose(3, 1, 2, 0, 4)[:, :, :, 0][which]
        return y.reshape(s, b * h, d).transpose(1, 0, 2).reshape(b, h, s, d)
    return view, copy


def _run(cl_env, attrs, roots, views, scale=1.0, out=None, out_shape=None, device=None,
         variant=None, epilogue=None, extra=()):
    op = get_op("MatMul")
    a = op.parse_attributes(attrs, "mm")
    fact = OperandViews(tuple(views), tuple(r.shape if v is not None else None
                                           for r, v in zip(roots, views)), scale, out, out_shape)
    descs = [TensorDesc(r.shape) for r in roots] + [TensorDesc(e.shape) for e in extra]
    ctx = CompileContext(device=device, facts=(fact,), variant=variant, epilogue=epilogue)
    shape = op.infer_shapes(a, descs, {}, ctx)[0][0]
    launches = op.launches(a, descs, [TensorDesc(shape)], {}, ctx)
    got = run_launches(cl_env, launches, list(roots) + list(extra), descs,
                       [TensorDesc(shape)], shaped_for=ctx)[0]
    return got, launches


def _variants(attrs, roots, views, device, out=None, out_shape=None):
    op = get_op("MatMul")
    a = op.parse_attributes(attrs, "mm")
    fact = OperandViews(tuple(views), tuple(r.shape if v is not None else None
                                           for r, v in zip(roots, views)), 1.0, out, out_shape)
    ctx = CompileContext(device=device, facts=(fact,))
    descs = [TensorDesc(r.shape) for r in roots]
    shape = op.infer_shapes(a, descs, {}, ctx)[0][0]
    return matmul_variants(op.plan(a, descs, [TensorDesc(shape)], ctx))


@pytest.mark.parametrize("device", [None, CPU], ids=["gpu-kernels", "cpu-kernels"])
def test_attention_scores_read_through_the_head_split(cl_env, device):
    s, b, h, d = 7, 3, 2, 5
    rng = np.random.default_rng(0)
    qkv = rng.standard_normal((s, b, 3 * h * d)).astype(np.float32)
    vq, q = _head_split(s, b, h, d, 0)
    vk, k = _head_split(s, b, h, d, 1)
    vk = vk.transpose((0, 1, 3, 2))                  # K^T: [B, H, d, S]
    want = (q(qkv).astype(np.float64) * 0.5) @ (k(qkv).astype(np.float64).transpose(0, 1, 3, 2)
                                                  * 0.25)
    views = (vq, vk)
    for variant in kernel_sample(_variants({}, (qkv, qkv), views, device)):
        got, _ = _run(cl_env, {}, (qkv, qkv), views, scale=0.125, device=device,
                      variant=variant)
        assert got.shape == (b, h, s, s)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=str(variant))


@pytest.mark.parametrize("device", [None, CPU], ids=["gpu-kernels", "cpu-kernels"])
def test_probabilities_times_values_stored_with_the_heads_merged(cl_env, device):
    """P [B, H, S, S] x V (a head-split view) written where Transpose (2, 0, 1, 3) puts it:
    [S, B, H, d]."""
    s, b, h, d = 6, 2, 3, 4
    rng = np.random.default_rng(1)
    p = rng.standard_normal((b, h, s, s)).astype(np.float32)
    qkv = rng.standard_normal((s, b, 3 * h * d)).astype(np.float32)
    vv, v = _head_split(s, b, h, d, 2)
    out_shape = (s, b, h, d)
    out = dense_view(out_shape).transpose((1, 2, 0, 3))        # the inverse of (2, 0, 1, 3)
    want = (p.astype(np.float64) @ v(qkv)).transpose(2, 0, 1, 3)
    views = (None, vv)
    for variant in kernel_sample(_variants({}, (p, qkv), views, device, out, out_shape)):
        got, _ = _run(cl_env, {}, (p, qkv), views, out=out, out_shape=out_shape, device=device,
                      variant=variant)
        assert got.shape == out_shape
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=str(variant))


@pytest.mark.parametrize("device", [None, CPU], ids=["gpu-kernels", "cpu-kernels"])
def test_linear_rows_in_two_levels_in_and_out(cl_env, device):
    """torch's batch_first MHA: x [B, S, D] read as [S, B, D] (Transpose (1, 0, 2)) by a
    Linear, and the output projection's [S*B, N] stored as [B, S, N] (Reshape, Transpose), with
    the bias and the residual fused."""
    bsz, s, dim, n = 3, 5, 8, 6
    rng = np.random.default_rng(2)
    x = rng.standard_normal((bsz, s, dim)).astype(np.float32)
    w = rng.standard_normal((dim, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    residual = rng.standard_normal((bsz, s, n)).astype(np.float32)
    va = dense_view(x.shape).transpose((1, 0, 2))                      # [S, B, D]
    out_shape = (bsz, s, n)
    # the MatMul computes [S, B, N]; Transpose (1, 0, 2) makes [B, S, N]
    out = dense_view(out_shape).transpose((1, 0, 2))
    want = (x.transpose(1, 0, 2).astype(np.float64) @ w + bias).transpose(1, 0, 2) + residual
    ep = FusedEpilogue(bias=True, residual=True)
    for variant in kernel_sample(_variants({}, (x, w), (va, None), device, out, out_shape)):
        got, _ = _run(cl_env, {}, (x, w), (va, None), out=out, out_shape=out_shape,
                      device=device, variant=variant, epilogue=ep, extra=(bias, residual))
        assert got.shape == out_shape
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=str(variant))


@pytest.mark.parametrize("device", [None, CPU], ids=["gpu-kernels", "cpu-kernels"])
def test_single_row_and_transposed_operands(cl_env, device):
    """M == 1 (the matrix-vector kernels) with A read along a strided column, and B read
    transposed through a view."""
    k, n = 37, 11
    rng = np.random.default_rng(3)
    a_root = rng.standard_normal((k, 4)).astype(np.float32)
    b_root = rng.standard_normal((n, k)).astype(np.float32)
    va = dense_view(a_root.shape).select(1, 2).reshape((1, k))      # column 2 as a row
    vb = dense_view(b_root.shape).transpose((1, 0))                 # [K, N], N strided
    want = a_root[:, 2].astype(np.float64)[None] @ b_root.T
    for variant in kernel_sample(_variants({}, (a_root, b_root), (va, vb), device)):
        got, _ = _run(cl_env, {}, (a_root, b_root), (va, vb), device=device, variant=variant)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=str(variant))


def test_a_view_the_kernels_cannot_read_is_refused(cl_env):
    x = np.zeros((4, 5, 6), np.float32)
    w = np.zeros((5, 3), np.float32)
    va = dense_view(x.shape).transpose((2, 0, 1)).select(0, 1)      # [4, 5]: strides 30, 6
    from customlayers.errors import BindingError
    with pytest.raises(BindingError, match="contiguous"):
        _run(cl_env, {}, (x, w), (va, None))


@pytest.mark.parametrize("device", [None, CPU], ids=["gpu-kernels", "cpu-kernels"])
@pytest.mark.parametrize("a_shape,b_shape,res_shape", [
    ((2, 3, 5, 4), (2, 3, 4, 5), (2, 1, 1, 5)),     # an attention mask over the heads, queries
    ((2, 3, 5, 4), (2, 3, 4, 5), (2, 3, 1, 5)),
    ((2, 3, 5, 4), (2, 3, 4, 5), (5, 5)),           # one [S, S] bias for every batch and head
    ((2, 3, 5, 4), (2, 3, 4, 1), (2, 3, 5, 1)),     # one column
    ((3, 6, 8), (8, 7), (1, 6, 7)),                 # batches folded into rows, bias per row
    ((2, 3, 6, 8), (8, 7), (3, 1, 7)),              # two batch axes folded into rows
])
def test_a_broadcast_residual_in_every_kernel(cl_env, device, a_shape, b_shape, res_shape):
    rng = np.random.default_rng(4)
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    res = rng.standard_normal(res_shape).astype(np.float32)
    want = a.astype(np.float64) @ b + res
    op = get_op("MatMul")
    at = op.parse_attributes({}, "mm")
    descs = [TensorDesc(a.shape), TensorDesc(b.shape), TensorDesc(res.shape)]
    out = [TensorDesc(want.shape)]
    ep = FusedEpilogue(residual=True)
    plan = op.plan(at, descs, out, CompileContext(device=device, epilogue=ep))
    for variant in kernel_sample(matmul_variants(plan)):
        ctx = CompileContext(device=device, epilogue=ep, variant=variant)
        launches = op.launches(at, descs, out, {}, ctx)
        got = run_launches(cl_env, launches, [a, b, res], descs, out, shaped_for=ctx)[0]
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=str(variant))


@pytest.mark.parametrize("shape", [(2, 4, 4, 8), (2, 3, 4, 8)], ids=["equal_axes", "unequal"])
def test_a_transpose_stored_through_is_not_read_through_again(tmp_path, test_device, shape):
    """MatMul, Transpose (0, 2, 1, 3), MatMul: view_folding folded the Transpose both into where
    the first stores and into the second's reads, so the second read the permuted buffer
    permuted again: wrong numbers where the swapped axes are equal, a BindingError where they
    are not. Against ONNX Runtime."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper
    from customlayers.api import Network
    from customlayers.graph.onnx.reader import read_onnx
    from customlayers.runtime.device.device import Engine
    b, h, s, d = shape
    rng = np.random.default_rng(3)
    feeds = {"x": rng.standard_normal(shape), "w1": rng.standard_normal((b, h, d, 6)),
             "w2": rng.standard_normal((b, s, 6, 5))}
    feeds = {k: v.astype(np.float32) for k, v in feeds.items()}
    f = TensorProto.FLOAT
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["a"]),
         helper.make_node("Transpose", ["a"], ["t"], perm=[0, 2, 1, 3]),
         helper.make_node("MatMul", ["t", "w2"], ["y"])], "mm",
        [helper.make_tensor_value_info(k, f, v.shape) for k, v in feeds.items()],
        [helper.make_tensor_value_info("y", f, (b, s, h, 5))])
    path = tmp_path / "mm.onnx"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8            # what every onnxruntime of opset 17 reads (the GPU machine's)
    onnx.save(model, str(path))
    net = Network(read_onnx(path), engine=Engine(test_device))
    assert any("stores" in note for note in net.rewrites)
    (want,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(net.infer(feeds)["y"], want, rtol=1e-5, atol=1e-5)
