"""Transpose's GPU kernels (transpose.cl: row copies `transpose_runs`, 32x32 local-memory tiles
`transpose_tiled`; ops/tensor/transpose.py) on the test device, through ONNX models that
customlayers' Network runs, bit for bit against numpy.transpose.

A CPU device takes the map kernel (unary_map.cl) by default; here the network is given a
GPU's traits (runtime/compile/network.device_traits), so PoCL runs the kernels a GPU gets, and
each test checks which kernel its steps ran (tuning off: the heuristic's; `copies_only` also
where a GPU's heuristic would take the map kernel, tiles_mostly_idle). Sizes are odd (not
multiples of 32 or 4: the tiles' and the float4 rows' edges), with size-1 axes, plus rows of a
multiple of 4 and 16 (vectors) and rows long enough to be cut into pieces."""
from __future__ import annotations

import itertools

import numpy as np
import onnx
import pytest
from onnx import helper

from customlayers.graph.onnx.reader import read_onnx
from customlayers.jit.launch import CompileContext, DeviceTraits
from customlayers.jit.tensor import TensorDesc
from customlayers.ops import get_op
from customlayers.ops.tensor.transpose import TransposePlan
from customlayers.runtime.compile import network as network_module
from customlayers.runtime.compile.network import Network

GPU = DeviceTraits("GPU", compute_units=16, max_work_group_size=256)
CPU = DeviceTraits("CPU", compute_units=2, max_work_group_size=4096)
COPIES = ("transpose_runs", "transpose_tiled")
RNG = np.random.default_rng(23)


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


@pytest.fixture
def as_gpu(monkeypatch):
    monkeypatch.setattr(network_module, "device_traits", lambda device: GPU)


@pytest.fixture
def copies_only(as_gpu, monkeypatch):
    """The copy kernels first even where the tiles would be mostly idle (an axis under 8: the
    map kernel's by default), so that every permutation runs them."""
    monkeypatch.setattr(TransposePlan, "tiles_mostly_idle", False)


def _data(shape, dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return RNG.integers(0, 2, shape).astype(np.bool_)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return RNG.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    return RNG.standard_normal(shape).astype(dtype)


def _transposes(engine, tmp_path, x: np.ndarray, perms) -> tuple[list[np.ndarray], list[str]]:
    """An ONNX model of one Transpose of `x` per permutation (one output each), run by a
    Network with tuning off (the device's default kernel): the outputs and the entries of the
    steps' kernels."""
    code = helper.np_dtype_to_tensor_dtype(x.dtype)
    nodes = [helper.make_node("Transpose", ["x"], [f"y{i}"], perm=list(p))
             for i, p in enumerate(perms)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", code, x.shape)],
                              [helper.make_tensor_value_info(f"y{i}", code, None)
                               for i in range(len(perms))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "transpose.onnx"
    onnx.save(model, str(path))
    net = Network(read_onnx(path), engine=engine, tuning="off")
    got = net.infer({"x": x})
    entries = [launch.entry for step in net.plan.steps for launch in step.launches]
    return [got[f"y{i}"] for i in range(len(perms))], entries


def _check(engine, tmp_path, x, perms):
    got, entries = _transposes(engine, tmp_path, x, perms)
    for perm, y in zip(perms, got):
        want = np.transpose(x, perm)
        assert y.shape == want.shape and y.dtype == want.dtype, perm
        assert y.tobytes() == want.tobytes(), f"{x.dtype} {x.shape} perm {perm}"
    return entries


@pytest.mark.parametrize("shape", [
    (37, 45), (1, 37), (5, 33, 37), (33, 1, 12), (3, 35, 5, 33), (2, 9, 1, 8),
    (2, 3, 1, 35, 33), (3, 5, 7, 2, 12)])
def test_every_permutation(engine, tmp_path, copies_only, shape):
    x = _data(shape, np.float32)
    perms = list(itertools.permutations(range(len(shape))))
    entries = _check(engine, tmp_path, x, perms)
    assert "unary_map" not in entries
    if shape != (1, 37):          # its only moves are of a size-1 axis: row copies
        assert set(entries) == set(COPIES), entries


@pytest.mark.parametrize("dtype", [np.int64, np.uint8, np.float16, np.int32, np.float64,
                                   np.bool_, np.int16])
def test_element_types(engine, tmp_path, copies_only, dtype):
    """Every element size (1, 2, 4, 8 bytes) moves as its bits: half and double included;
    rows of 36 and 48 elements move 4 and 16 bytes a step (uchar4 .. uchar16, ulong2)."""
    x = _data((3, 35, 36), dtype)
    perms = [(0, 2, 1), (1, 0, 2), (2, 1, 0), (2, 0, 1)]
    entries = _check(engine, tmp_path, x, perms)
    assert set(entries) == set(COPIES), entries
    assert _check(engine, tmp_path, _data((3, 5, 48), dtype), [(1, 0, 2)]) == ["transpose_runs"]


@pytest.mark.parametrize("shape,perm,entry", [
    ((20, 12, 64), (1, 0, 2), "transpose_runs"),             # attention heads [S, B*H, 64]
    ((2, 3, 20, 64), (0, 2, 1, 3), "transpose_runs"),        # [B, H, S, 64]
    ((2, 3, 20, 64), (2, 0, 1, 3), "transpose_runs"),
    ((1, 20, 2, 3, 96), (3, 1, 2, 0, 4), "transpose_runs"),  # q, k, v of [1, S, B, 3, D]
    ((2, 96, 37), (0, 2, 1), "transpose_tiled"),            # ViT's patch tokens [B, D, S]
    ((20, 2, 96), (1, 0, 2), "transpose_runs"),              # [S, B, D]
    ((2, 3, 3001), (1, 0, 2), "transpose_runs"),             # long rows cut into pieces
    ((2, 3, 3000), (1, 0, 2), "transpose_runs"),             # ... of float4
    ((3, 1, 4099), (1, 0, 2), "transpose_runs"),             # a copy (one row) in pieces
])
def test_transformer_shapes(engine, tmp_path, as_gpu, shape, perm, entry):
    entries = _check(engine, tmp_path, _data(shape, np.float32), [perm])
    assert entries == [entry]


def test_a_cpu_device_keeps_the_map_kernel(engine, tmp_path, monkeypatch):
    """On a CPU the map kernel is the default (faster on PoCL); the copy kernel is listed
    after it for the tuner, and the GPU order is the reverse."""
    monkeypatch.setattr(network_module, "device_traits", lambda device: CPU)
    x = _data((5, 33, 37), np.float32)
    assert _check(engine, tmp_path, x, [(0, 2, 1), (1, 0, 2)]) == ["unary_map", "unary_map"]
    op = get_op("Transpose")
    desc, consts = TensorDesc(x.shape), {1: np.array([0, 2, 1])}
    out = [TensorDesc(s, t) for s, t in op.infer_shapes({}, [desc], consts)]
    names = lambda dev: [v.name for v in op.kernel_variants(  # noqa: E731
        {}, [desc], out, consts, CompileContext(dev))]
    assert names(CPU) == ["map", "tiled"] and names(GPU) == ["tiled", "map"]
    small = DeviceTraits("GPU", max_work_group_size=128)    # no groups of 256: map alone
    assert names(small) == [] and \
        [ln.entry for ln in op.launches({}, [desc], out, consts, CompileContext(small))] == \
        ["unary_map"]


def test_an_empty_tensor(engine, tmp_path, as_gpu):
    x = np.zeros((3, 0, 5), np.float32)
    got, _ = _transposes(engine, tmp_path, x, [(2, 1, 0)])
    assert got[0].shape == (5, 0, 3)


def test_tiles_mostly_idle_put_the_map_kernel_first(engine, tmp_path, as_gpu):
    """NCHW -> NHWC of 3 channels: 3 of each tile's 32 rows would hold data; the map kernel
    is the default there, both stay listed for the tuner."""
    x = _data((2, 3, 5, 7), np.float32)
    assert _check(engine, tmp_path, x, [(0, 2, 3, 1)]) == ["unary_map"]
    op = get_op("Transpose")
    desc, consts = TensorDesc(x.shape), {1: np.array([0, 2, 3, 1])}
    out = [TensorDesc(s, t) for s, t in op.infer_shapes({}, [desc], consts)]
    assert [v.name for v in op.kernel_variants({}, [desc], out, consts,
                                               CompileContext(GPU))] == ["map", "tiled"]


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8])
def test_an_input_aligned_only_to_its_elements(engine, tmp_path, as_gpu, dtype):
    """A numpy input a CPU device reads where it lies (runtime/device/host_memory.py) may be
    aligned to its element size only: the rows move as vectors only where both tensors'
    addresses are aligned to the vector, else element by element."""
    x = _data((3 * 5 * 48 + 1,), dtype)[1:].reshape(3, 5, 48)
    assert x.ctypes.data % 16 and x.flags.c_contiguous
    for _ in range(3):
        assert _check(engine, tmp_path, x, [(1, 0, 2)]) == ["transpose_runs"]
