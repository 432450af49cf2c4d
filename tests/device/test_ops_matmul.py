"""MatMul built-in on a real device against numpy's matmul."""
from __future__ import annotations

import numpy as np
import pytest

from customlayers.errors import BindingError
from customlayers.jit.tensor import TensorDesc
from customlayers.jit.launch import DEFAULT_CONTEXT, CompileContext, DeviceTraits, FusedEpilogue
from customlayers.ops import get_op
from launch_runner import run_launches


def run_op(cl_env, raw, arrays, ctx=DEFAULT_CONTEXT):
    op = get_op("MatMul")
    attrs = op.parse_attributes(raw, "mm")
    descs = [TensorDesc(a.shape) for a in arrays]
    out_descs = [TensorDesc(s, d) for s, d in op.infer_shapes(attrs, descs, {}, ctx)]
    launches = op.launches(attrs, descs, out_descs, {}, ctx)
    return run_launches(cl_env, launches, arrays, descs, out_descs, shaped_for=ctx)[0], launches


def reference(a, b, ta, tb):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if ta and a.ndim > 1:
        a64 = np.swapaxes(a64, -1, -2)
    if tb and b.ndim > 1:
        b64 = np.swapaxes(b64, -1, -2)
    return np.matmul(a64, b64)


@pytest.mark.parametrize("ashape,bshape,ta,tb", [
    ((1, 300), (70, 300), False, True),          # fc layer as in the models: gemv, B [N][K]
    ((1, 37), (37, 130), False, False),          # gemv, B [K][N]
    ((2, 3, 1, 20), (20, 9), False, False),      # gemv, batched A, broadcast B
    ((5, 7), (7, 3), False, False),              # tiny
    ((33, 65), (65, 17), False, False),          # edges everywhere
    ((70, 40), (70, 90), True, False),           # transposes: A stored [K][M]
    ((70, 40), (90, 70), True, True),
    ((3, 18, 19), (3, 19, 21), False, False),    # batched
    ((2, 1, 9, 10), (1, 4, 33, 10), False, True),  # broadcast both ways, 2 batch dims
    ((2, 4, 17, 6), (6, 20), False, False),      # broadcast B to 2 batch dims
    ((12,), (12, 34), False, False),             # 1-D A: row vector, dim dropped
    ((8, 13), (13,), False, True),               # 1-D B: column; transpose_b ignored
    ((4, 13, 8), (13,), True, False),            # 1-D B with batched, transposed A
])
def test_matmul_matches_numpy(cl_env, ashape, bshape, ta, tb):
    rng = np.random.default_rng(7)
    a = rng.standard_normal(ashape).astype(np.float32)
    b = rng.standard_normal(bshape).astype(np.float32)
    raw = {"transpose_a": str(ta).lower(), "transpose_b": str(tb).lower()}
    out, _ = run_op(cl_env, raw, [a, b])
    ref = reference(a, b, ta, tb)
    assert out.shape == ref.shape
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


GEMV_CASES = [      # (A, B, transpose_b, a fused bias + ReLU: the 2-D cases, whose channel
    ((1, 300), (70, 300), True, False),       # is the output's last axis) fc layer: B [N][K],
    ((1, 300), (70, 300), True, True),        # K % 8 == 4, N % 8 == 6
    ((1, 544), (1000, 544), True, True),      # ShuffleNet's
    ((1, 5), (3, 5), True, False),            # K and N below one float8
    ((1, 37), (37, 130), False, False),       # B [K][N], a partial last run
    ((1, 37), (37, 130), False, True),
    ((1, 20), (20, 16), False, False),        # whole runs
]


@pytest.mark.parametrize("ashape,bshape,tb,bias", GEMV_CASES)
def test_cpu_gemv_matches_numpy(cl_env, ashape, bshape, tb, bias):
    """M == 1 on a CPU device runs matmul_gemv_cpu.cl (float8 per work item, no __local)."""
    rng = np.random.default_rng(9)
    arrays = [rng.standard_normal(ashape).astype(np.float32),
              rng.standard_normal(bshape).astype(np.float32)]
    ref = reference(arrays[0], arrays[1], False, tb)
    if bias:
        arrays.append(rng.standard_normal(ref.shape[-1]).astype(np.float32))
        ref = np.maximum(ref + arrays[2], 0)
    ctx = CompileContext(DeviceTraits("CPU", compute_units=2, max_work_group_size=4096),
                         FusedEpilogue(bias=True, relu=True) if bias else None)
    out, launches = run_op(cl_env, {"transpose_b": str(tb).lower()}, arrays, ctx)
    assert [l.entry for l in launches] == ["matmul_gemv_cpu"]
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


CPU_GEMM_CASES = [     # (A, B, transpose_a, transpose_b): M > 1, every edge of the tiles
    ((5, 7), (7, 3), False, False),             # one partial tile each way
    ((33, 65), (65, 17), False, False),
    ((70, 40), (70, 90), True, False),          # A stored [K][M]
    ((70, 40), (90, 70), True, True),
    ((9, 16), (11, 16), False, True),           # B [N][K], K a whole float8 run
    ((13, 21), (30, 21), False, True),          # ... and K % 8 == 5
    ((3, 18, 19), (3, 19, 40), False, False),   # batched, N a whole 32-column run + 8
    ((2, 1, 9, 10), (1, 4, 33, 10), False, True),   # broadcast both ways
    ((2, 4, 17, 6), (6, 20), False, False),     # broadcast B to 2 batch dims
    ((7, 43), (19, 43), False, True),           # K % 16 == 11: a float8 and a scalar tail
    ((20, 24), (24, 50), False, False),         # N: a 32-column run and a partial one
]


def _cpu_gemm(name: str):
    """CpuGemmVariant from its name: cpu_gemm{MR}x{NB}[v{VW}]."""
    from customlayers.ops.nn.matmul import CpuGemmVariant
    blocking, _, vw = name[len("cpu_gemm"):].partition("v")
    mr, nb = map(int, blocking.split("x"))
    return CpuGemmVariant(mr, nb, int(vw or 8))


# float8 (AVX2) and float16 (AVX-512) accumulators
@pytest.mark.parametrize("variant", ["cpu_gemm6x4", "cpu_gemm6x2", "cpu_gemm3x4",
                                     "cpu_gemm2x4", "cpu_gemm12x2v16", "cpu_gemm6x4v16",
                                     "cpu_gemm3x4v16", "cpu_gemm6x1v16"])
@pytest.mark.parametrize("ashape,bshape,ta,tb", CPU_GEMM_CASES)
def test_cpu_gemm_matches_numpy(cl_env, ashape, bshape, ta, tb, variant):
    """M > 1 on a CPU device runs matmul_cpu.cl under each register blocking (a fused bias and
    ReLU on the 2-D cases, whose channel is the output's last axis)."""
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(ashape).astype(np.float32),
              rng.standard_normal(bshape).astype(np.float32)]
    ref = reference(arrays[0], arrays[1], ta, tb)
    fused = len(ashape) == 2
    if fused:
        arrays.append(rng.standard_normal(ref.shape[-1]).astype(np.float32))
        ref = np.maximum(ref + arrays[2], 0)
    ctx = CompileContext(DeviceTraits("CPU", compute_units=2, max_work_group_size=4096),
                         FusedEpilogue(bias=True, relu=True) if fused else None,
                         variant=_cpu_gemm(variant))
    out, launches = run_op(cl_env, {"transpose_a": str(ta).lower(),
                                    "transpose_b": str(tb).lower()}, arrays, ctx)
    assert [l.entry for l in launches] == ["matmul_cpu"]
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("ashape,bshape", [((2, 3, 1, 20), (20, 16)), ((2, 5, 7), (7, 9)),
                                           ((3, 4, 6, 10), (10, 13))])
@pytest.mark.parametrize("device", ["CPU", "GPU"])
def test_batches_of_a_under_one_b_are_rows_of_one_gemm(cl_env, ashape, bshape, device):
    """[B.., M, K] x [K, N]: the batches are rows of one GEMM (M = B * M), one launch; a fused
    bias lies along the output's last axis (a transformer's Linear)."""
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(ashape).astype(np.float32),
              rng.standard_normal(bshape).astype(np.float32)]
    ref = reference(arrays[0], arrays[1], False, False)
    arrays.append(rng.standard_normal(ref.shape[-1]).astype(np.float32))
    ref = np.maximum(ref + arrays[2], 0)
    ctx = CompileContext(DeviceTraits(device, compute_units=2, max_work_group_size=256),
                         FusedEpilogue(bias=True, relu=True))
    out, launches = run_op(cl_env, {}, arrays, ctx)
    assert len([l for l in launches if "reduce" not in l.entry]) == 1
    assert f"matmul_{int(np.prod(ashape[:-1]))}x" in launches[0].label
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("variant", ["cpu_gemm6x4", "cpu_gemm6x2", "cpu_gemm12x2v16",
                                     "cpu_gemm6x1v16"])
@pytest.mark.parametrize("ashape,bshape", [((5, 7), (7, 3)), ((2, 13, 19), (19, 70)),
                                           ((3, 9, 40), (40, 64))])
def test_a_constant_b_is_read_packed_in_panels(cl_env, ashape, bshape, variant):
    """A constant B [K][N] (a Linear's weights) reaches the CPU kernel packed into panels of
    its columns, zero-padded past N; the result is the unpacked one's."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal(ashape).astype(np.float32)
    b = rng.standard_normal(bshape).astype(np.float32)
    bias = rng.standard_normal(bshape[-1]).astype(np.float32)
    v = _cpu_gemm(variant)
    ctx = CompileContext(DeviceTraits("CPU", compute_units=2), FusedEpilogue(bias=True),
                         variant=v)
    op = get_op("MatMul")
    attrs = op.parse_attributes({}, "mm")
    descs = [TensorDesc(a.shape), TensorDesc(b.shape), TensorDesc(bias.shape)]
    outs = [TensorDesc(s, d) for s, d in op.infer_shapes(attrs, descs, {}, ctx)]
    launches = op.launches(attrs, descs, outs, {1: b}, ctx)
    assert launches[0].args[1].kind == "const"            # the packed panels
    cols = v.vw * v.nb
    assert launches[0].args[1].value.size == b.shape[0] * -(-b.shape[1] // cols) * cols
    out = run_launches(cl_env, launches, [a, b, bias], descs, outs, shaped_for=ctx)[0]
    np.testing.assert_allclose(out, reference(a, b, False, False) + bias, rtol=1e-4, atol=1e-4)


def test_a_cpu_device_runs_the_register_blocked_gemm_first(cl_env):
    from customlayers.ops.nn.matmul import CpuGemmVariant
    # AVX-512 (16 lanes): float16 accumulators, 24 of its 32 registers; AVX2: float8, 12 of 16
    for width, tb, first in ((8, False, (6, 2)), (16, False, (6, 4, 16)), (8, True, (3, 4)),
                             (16, True, (6, 4, 16))):
        ctx = CompileContext(DeviceTraits("CPU", compute_units=2, float_vector_width=width))
        op = get_op("MatMul")
        attrs = op.parse_attributes({"transpose_b": str(tb).lower()}, "mm")
        descs = [TensorDesc((40, 30)), TensorDesc((20, 30) if tb else (30, 20))]
        outs = [TensorDesc(s, d) for s, d in op.infer_shapes(attrs, descs, {}, ctx)]
        listed = op.kernel_variants(attrs, descs, outs, {}, ctx)
        assert listed[0] == CpuGemmVariant(*first)
        assert any(v.name.startswith("gemm") for v in listed)    # the tuner may still pick


def test_wide_matmul_is_tiled(cl_env):
    a = np.ones((64, 20), np.float32)
    b = np.ones((20, 100), np.float32)
    out, launches = run_op(cl_env, {}, [a, b])
    assert launches[0].entry == "gemm_tiled"
    assert launches[0].local_size == (16, 16, 1)
    assert (out == 20).all()


def test_matches_openvino_cpu(cl_env):
    ov = pytest.importorskip("openvino")
    ops = pytest.importorskip("openvino.opset13")
    rng = np.random.default_rng(8)
    a = rng.standard_normal((2, 19, 23)).astype(np.float32)
    b = rng.standard_normal((31, 23)).astype(np.float32)
    pa = ops.parameter(a.shape, np.float32)
    model = ov.Model([ops.matmul(pa, ops.constant(b), False, True)], [pa])
    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    ref = compiled([a])[compiled.output(0)]
    out, _ = run_op(cl_env, {"transpose_b": "true"}, [a, b])
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_errors_name_the_layer():
    op = get_op("MatMul")
    attrs = op.parse_attributes({"transpose_b": "true"}, "fc1")
    with pytest.raises(BindingError, match="layer 'fc1' \\(MatMul\\): inner dimensions differ"):
        op.infer_shapes(attrs, [TensorDesc((1, 8)), TensorDesc((8, 4))], {})
    with pytest.raises(BindingError, match="do not broadcast"):
        op.infer_shapes(attrs, [TensorDesc((2, 3, 4)), TensorDesc((3, 5, 4))], {})
    with pytest.raises(BindingError, match="'transpose_a'='maybe' is not a valid bool"):
        op.parse_attributes({"transpose_a": "maybe"}, "fc1")


@pytest.mark.parametrize("device", ["CPU", "GPU"])
@pytest.mark.parametrize("ashape,bshape,tb", [
    ((1, 21, 9), (21, 13), False),        # M == 1: matrix-vector, B [K][N]
    ((1, 21, 9), (13, 21), True),         # M == 1, B [N][K] (K past one float8, a tail)
    ((2, 5, 21, 9), (21, 13), False),     # batched A: the tiled GEMM
    ((6, 21, 9), (13, 21), True),         # M == 6: the tiled GEMM
])
def test_a_picked_from_a_longer_last_axis(cl_env, device, ashape, bshape, tb):
    """MatMul's PickLast fact (a folded Gather, passes/pick_folding.py): A is element 4 of
    input 0's last axis, on each kernel (matrix-vector on a CPU and a GPU, and the tiled
    GEMM)."""
    from customlayers.ops.nn.matmul import PickLast
    rng = np.random.default_rng(11)
    arrays = [rng.standard_normal(ashape).astype(np.float32),
              rng.standard_normal(bshape).astype(np.float32)]
    ref = reference(arrays[0][..., 4], arrays[1], False, tb)
    ctx = CompileContext(DeviceTraits(device, compute_units=2, max_work_group_size=256),
                         facts=(PickLast(4),))
    out, launches = run_op(cl_env, {"transpose_b": str(tb).lower()}, arrays, ctx)
    assert out.shape == ref.shape
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", ["CPU", "GPU"])
@pytest.mark.parametrize("kind", ["softmax", "logsoftmax"])
@pytest.mark.parametrize("ashape,bshape,tb", [((7, 40), (200, 40), True),    # rows of 200
                                              ((1, 40), (40, 10), False)])   # the TCN's head
def test_row_softmax_fused_into_the_matmul(cl_env, device, kind, ashape, bshape, tb):
    """matmul_softmax.cl: MatMul + bias + ReLU, then each row's SoftMax or LogSoftmax of the last
    axis, one work-group per row on a GPU (a row of 200 takes 4 passes of 64 items) and one work
    item per row on a CPU, against float64 numpy."""
    rng = np.random.default_rng(12)
    a = rng.standard_normal(ashape).astype(np.float32)
    b = (rng.standard_normal(bshape) * 0.3).astype(np.float32)
    bias = rng.standard_normal(bshape[0] if tb else bshape[1]).astype(np.float32)
    fc = np.maximum(reference(a, b, False, tb) + bias, 0)
    shifted = fc - fc.max(axis=-1, keepdims=True)
    logsum = np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    want = shifted - logsum if kind == "logsoftmax" else np.exp(shifted - logsum)
    ctx = CompileContext(DeviceTraits(device, compute_units=2, max_work_group_size=256),
                         FusedEpilogue(bias=True, relu=True, row_softmax=kind))
    out, launches = run_op(cl_env, {"transpose_b": str(tb).lower()}, [a, b, bias], ctx)
    assert [l.entry for l in launches] == ["matmul_softmax"]
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
