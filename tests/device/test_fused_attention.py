"""FusedAttention (ops/attention/fused.py, attention_tiled.cl) and the pass that makes it
(passes/attention_folding.py): the kernel, in each tile the op chooses (a CPU's, and a GPU's
three by the device's __local memory), against a float64 softmax(Q K^T * scale + mask) V, with
ragged rows and keys, every mask broadcast, -inf masks (a row masked for a whole block of keys,
a row masked everywhere: NaN, as Softmax then MatMul give), NaN and +inf scores; then whole
transformers with the pass asked for, against ONNX Runtime, on whichever device runs the suite
(on PoCL the pass is off by default: Network's fuse_attention). On NVIDIA the GPU tiles use
shfl.sync where the device traits say cp.async (sm_80+): the suite's GPU run tests that form."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from customlayers.errors import BindingError, ConfigError
from customlayers.jit.launch import CompileContext, DeviceTraits
from customlayers.jit.tensor import TensorDesc
from customlayers.ops import get_op
from customlayers.ops.attention.fused import CPU_TILE, GPU_TILES
from launch_runner import run_launches

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import transformer_models as tm  # noqa: E402


def attention_ref(q, k, v, scale, mask=None):
    s = np.einsum("...sd,...td->...st", q.astype(np.float64), k.astype(np.float64)) * scale
    if mask is not None:
        s = s + mask.astype(np.float64)
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        p = e / e.sum(axis=-1, keepdims=True)
    return p @ v.astype(np.float64)


def _traits(kind: str, local: int, nvidia: bool = False) -> CompileContext:
    return CompileContext(DeviceTraits(kind, local_mem_size=local, async_copy=nvidia))


# each tile the op chooses: a CPU's; a GPU's by its __local memory (48 KB: the largest; 40 KB:
# the next; 28 KB: the smallest)
TILES = {"cpu": _traits("CPU", 1 << 20), "gpu48k": _traits("GPU", 48 * 1024),
         "gpu40k": _traits("GPU", 40 * 1024), "gpu28k": _traits("GPU", 28 * 1024)}


def _tile_on(test_device, name: str) -> CompileContext:
    """TILES[name] with the shuffle the device running the suite has (NVIDIA sm_80+); skipped
    where it has less __local memory than the tile asks for."""
    from customlayers.runtime.device.limits import device_traits
    ctx, real = TILES[name], device_traits(test_device)
    if real.local_mem_size < ctx.device.local_mem_size and ctx.device.kind == "GPU":
        pytest.skip(f"the device has {real.local_mem_size} bytes of __local memory")
    return CompileContext(DeviceTraits(ctx.device.kind, local_mem_size=ctx.device.local_mem_size,
                                       async_copy=real.async_copy))


@pytest.fixture(params=list(TILES))
def tile(request, test_device):
    """Every tile (each program a PoCL compile: the cases that need them all)."""
    return _tile_on(test_device, request.param)


@pytest.fixture(params=["cpu", "gpu48k"])
def two_tiles(request, test_device):
    """A CPU's tile and the largest GPU tile."""
    return _tile_on(test_device, request.param)


def run_fused(cl_env, q, k, v, scale=0.125, mask=None, out_scale=1.0, ctx=None):
    op = get_op("FusedAttention")
    attrs = op.parse_attributes({"scale": repr(scale), "out_scale": repr(out_scale),
                                 "has_mask": "true" if mask is not None else "false"}, "attn")
    arrays = [q, k, v] + ([mask] if mask is not None else [])
    descs = [TensorDesc(a.shape) for a in arrays]
    outs = [TensorDesc(s, d) for s, d in op.infer_shapes(attrs, descs, {})]
    ctx = ctx if ctx is not None else TILES["gpu48k"]
    launches = op.launches(attrs, descs, outs, {}, ctx)
    return run_launches(cl_env, launches, arrays, descs, outs, shaped_for=ctx)[0]


def test_each_tile_is_the_one_its_device_gets():
    op = get_op("FusedAttention")
    attrs = op.parse_attributes({}, "attn")
    picks = {name: op._tile(attrs, 64, 64, ctx)[0] for name, ctx in TILES.items()}
    assert [(p["TR"], p["TC"], p["KC"]) for p in picks.values()] == \
        [CPU_TILE[:3]] + [t[:3] for t in GPU_TILES]
    with pytest.raises(BindingError, match="__local memory"):
        op._tile(attrs, 64, 64, _traits("GPU", 16 * 1024))


def _qkv(batch, s, t, d, dv, seed=0):
    rng = np.random.default_rng(seed)
    f = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    return f(*batch, s, d), f(*batch, t, d), f(*batch, t, dv)


# rows and keys that fill no whole group or block of the largest tile, and ones that do
ROWS, KEYS = 4 * GPU_TILES[0][0], 4 * GPU_TILES[0][1] * GPU_TILES[0][2]
ODD_S, ODD_T = ROWS + 5, 2 * KEYS + 3


def test_ragged_rows_and_keys_in_every_tile(cl_env, tile):
    q, k, v = _qkv((2, 3), ODD_S, ODD_T, 64, 64)
    got = run_fused(cl_env, q, k, v, scale=0.125, ctx=tile)
    np.testing.assert_allclose(got, attention_ref(q, k, v, 0.125), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("batch,s,t,d,dv", [
    ((2, 3), ROWS, 2 * KEYS, 64, 64),
    ((5,), 7, 1, 16, 8),                 # one key; 3-D
    ((1, 2), 3, ODD_T, 13, 6),           # head sizes not a multiple of 4
    ((), 40, 9, 32, 64),                 # no batch axes
])
def test_the_kernel_matches_float64(cl_env, two_tiles, batch, s, t, d, dv):
    q, k, v = _qkv(batch, s, t, d, dv)
    got = run_fused(cl_env, q, k, v, scale=d ** -0.5, out_scale=1.0, ctx=two_tiles)
    np.testing.assert_allclose(got, attention_ref(q, k, v, d ** -0.5), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("mask_shape", [(2, 1, 1, ODD_T), (1, 3, ODD_S, ODD_T),
                                        (ODD_S, ODD_T), (ODD_T,), (2, 3, ODD_S, ODD_T),
                                        (2, 3, ODD_S, 1)])
def test_every_mask_broadcast_is_added(cl_env, two_tiles, mask_shape):
    q, k, v = _qkv((2, 3), ODD_S, ODD_T, 64, 64, seed=1)
    mask = (np.random.default_rng(2).standard_normal(mask_shape) * 3).astype(np.float32)
    got = run_fused(cl_env, q, k, v, 0.125, mask, ctx=two_tiles)
    np.testing.assert_allclose(got, attention_ref(q, k, v, 0.125, mask), rtol=2e-5, atol=2e-6)


def test_out_scale_multiplies_the_output(cl_env):
    q, k, v = _qkv((2,), 9, 11, 8, 8, seed=3)
    got = run_fused(cl_env, q, k, v, 0.5, out_scale=-3.0)
    np.testing.assert_allclose(got, -3.0 * attention_ref(q, k, v, 0.5), rtol=2e-5, atol=5e-6)


def test_infinite_masks_give_what_softmax_then_matmul_give(cl_env, tile):
    """-inf over the first whole block of keys of one row (the running max starts at -inf and
    must not poison the row), everywhere in another (NaN, as numpy's softmax gives), a large
    finite negative mask (BERT's -10000), and float32's lowest (Hugging Face's masks): over a
    whole row it leaves the row uniform, not NaN (the kernel scales only differences to the
    max by log2 e, never the masked scores, which would overflow to -inf)."""
    q, k, v = _qkv((1, 2), 6, ODD_T, 16, 16, seed=4)
    lowest = np.finfo(np.float32).min
    mask = np.zeros((1, 2, 6, ODD_T), np.float32)
    mask[0, 0, 1, :KEYS + 2] = -np.inf
    mask[0, 1, 2, :] = -np.inf
    mask[0, 1, 3, 5:] = -10000.0
    mask[0, 0, 4, :] = lowest
    mask[0, 0, 5, 3:] = lowest
    got = run_fused(cl_env, q, k, v, 0.25, mask, ctx=tile)
    want = attention_ref(q, k, v, 0.25, mask)
    assert np.isnan(got[0, 1, 2]).all() and np.isnan(want[0, 1, 2]).all()
    np.testing.assert_allclose(want[0, 0, 4], v[0, 0].astype(np.float64).mean(axis=0),
                               rtol=1e-6, atol=1e-7)     # uniform, as softmax gives
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=2e-5, atol=2e-6)
    assert not np.isnan(got[ok]).any()


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_nan_or_inf_score_makes_its_row_nan(cl_env, tile, bad):
    q, k, v = _qkv((1,), 4, 20, 8, 8, seed=5)
    q[0, 2, 0] = bad
    k[0, :, 0] = 1.0                     # the bad q element reaches every score of row 2
    got = run_fused(cl_env, q, k, v, 1.0, ctx=tile)
    want = attention_ref(q, k, v, 1.0)
    assert np.isnan(got[0, 2]).all() and np.isnan(want[0, 2]).all()
    np.testing.assert_allclose(np.delete(got, 2, axis=1), np.delete(want, 2, axis=1),
                               rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("shapes,what", [
    (((2, 4, 8), (2, 5, 8), (2, 6, 8)), "share their"),
    (((2, 4, 80), (2, 5, 80), (2, 5, 8)), "at most 64"),
    (((2, 4, 8), (2, 5, 8), (2, 5, 8), (3, 1, 5)), "does not broadcast"),
    (((2, 4, 8), (2, 0, 8), (2, 0, 8)), "must not be empty"),
])
def test_shapes_the_kernel_cannot_run_are_refused(shapes, what):
    op = get_op("FusedAttention")
    attrs = op.parse_attributes({"has_mask": "true" if len(shapes) == 4 else "false"}, "attn")
    with pytest.raises(BindingError, match=what) as err:
        op.infer_shapes(attrs, [TensorDesc(s) for s in shapes], {})
    assert "'attn'" in str(err.value)


def test_sizes_at_the_32_bit_limit_launch_and_past_it_are_refused():
    """Q [1, 2^25, 64] spans 2^31 - 1 elements, the most the kernel indexes, but its size-1 batch
    axis has a dense stride of 2^31 (an OverflowError as an int32 argument, a traceback); one
    more row is refused by name. Nothing runs: these would be 8 GB."""
    op = get_op("FusedAttention")
    attrs = op.parse_attributes({}, "attn")
    for rows, fits in ((2 ** 25, True), (2 ** 25 + 1, False)):
        descs = [TensorDesc((1, rows, 64)), TensorDesc((1, 4, 64)), TensorDesc((1, 4, 64))]
        if not fits:
            with pytest.raises(BindingError, match="2\\^31") as err:
                op.infer_shapes(attrs, descs, {})
            assert "'attn'" in str(err.value)
            continue
        outs = [TensorDesc(s, d) for s, d in op.infer_shapes(attrs, descs, {})]
        (launch,) = op.launches(attrs, descs, outs, {}, TILES["gpu48k"])
        assert {type(a.value) for a in launch.args if a.kind == "scalar"} == \
            {np.int32, np.float32}


# -- whole models, the pass asked for --------------------------------------------------------
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from customlayers.api import Network  # noqa: E402
from customlayers.graph.onnx.reader import read_onnx  # noqa: E402


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def _check(net, path: Path, feeds: dict) -> None:
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = net.infer(feeds)
    for value, ref in zip(got.values(), want):
        assert value.shape == ref.shape
        assert float(np.abs(value - ref).max() / np.abs(ref).max()) <= 1e-4


def _fused_count(net) -> int:
    return sum(s.type == "FusedAttention" for s in net.plan.steps)


@pytest.mark.parametrize("name,make", [
    ("vit", lambda: tm.vit()),
    ("bert", lambda: tm.bert(seq=ODD_T, max_len=2 * ODD_T, pad_from=10)),
    ("mha", lambda: tm.torch_mha_encoder(seq=ODD_T, pad_from=3)),
    ("mha_dynamo", lambda: tm.torch_mha_encoder(dynamo=True, pad_from=3)),
])
def test_transformers_run_fused_and_match_onnx_runtime(tmp_path, engine, name, make):
    model, feeds = make()
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    net = Network(read_onnx(path), engine=engine, fuse_attention=True)
    _check(net, path, feeds)
    assert _fused_count(net) == 2                       # one per encoder layer
    assert not any(s.type == "SoftMax" for s in net.plan.steps)
    assert any("FusedAttention" in m for m in net.messages)


def test_a_dynamic_sequence_is_fused_at_each_length(tmp_path, engine):
    """The ports keep the symbolic sequence; each plan's graph gets its shapes
    (passes/concrete_shapes.py) before the rewrites run again for it."""
    model, feeds = tm.bert(dynamic=True, max_len=2 * ODD_S, pad_from=10)
    path = tmp_path / "bert_dyn.onnx"
    onnx.save(model, str(path))
    net = Network(read_onnx(path), engine=engine, fuse_attention=True)
    # (fused per plan: no "nothing matched" note at load)
    assert not any(m.startswith("note: fuse_attention:") for m in net.messages)
    for feed in (feeds, tm.bert_inputs(batch=3, seq=ODD_S, pad_from=5)):
        _check(net, path, feed)
        plan = net.plan_for({n: a.shape for n, a in feed.items()})
        assert sum(s.type == "FusedAttention" for s in plan.steps) == 2


def test_the_default_fuses_where_the_device_is_not_a_cpu(tmp_path, engine):
    model, feeds = tm.vit()
    path = tmp_path / "vit.onnx"
    onnx.save(model, str(path))
    default = Network(read_onnx(path), engine=engine)
    off = Network(read_onnx(path), engine=engine, fuse_attention=False)
    on_cpu = engine.device.type & 2 != 0                # CL_DEVICE_TYPE_CPU
    assert _fused_count(default) == (0 if on_cpu else 2)
    assert _fused_count(off) == 0
    _check(default, path, feeds)


@pytest.mark.parametrize("switch,value", [
    ("fuse_attention", "False"), ("fuse_attention", 1), ("fuse_temporal_blocks", "no"),
    ("fuse", None), ("concat_in_place", "yes"), ("profiling", 0)])
def test_a_switch_that_is_not_a_bool_is_a_config_error_naming_it(tmp_path, engine, switch,
                                                                  value):
    """A string is truthy: fuse_attention="False" would turn the pass on. Refused before the
    model is read, naming the argument and what it takes (None only where it means a
    default)."""
    model, _ = tm.vit()
    path = tmp_path / "vit.onnx"
    onnx.save(model, str(path))
    takes = "True, False or None" if switch.startswith("fuse_") else "True or False"
    with pytest.raises(ConfigError, match=rf"^Network\({switch}={value!r}\): expected {takes}"):
        Network(str(path), engine=engine, **{switch: value})


def test_numpy_bools_are_bools(tmp_path, engine):
    model, feeds = tm.vit()
    path = tmp_path / "vit.onnx"
    onnx.save(model, str(path))
    net = Network(str(path), engine=engine, fuse_attention=np.True_, fuse=np.bool_(True))
    assert _fused_count(net) == 2


@pytest.mark.parametrize("switch,fused", [("on", True), ("off", False)])
def test_the_cli_asks_for_the_pass_and_matches_onnx_runtime(tmp_path, capsys, switch, fused):
    """`run --fuse-attention on|off` (benchmark and compile take it too): --verbose says the
    rewrite, -o's outputs match ONNX Runtime either way."""
    from customlayers.cli import main
    model, feeds = tm.bert(pad_from=10)
    path = tmp_path / "bert.onnx"
    onnx.save(model, str(path))
    device = os.environ.get("CUSTOMLAYERS_TEST_DEVICE", "CPU")     # as conftest.py reads it
    argv = ["run", "-m", str(path), "-d", device, "--verbose", "--fuse-attention", switch,
            "-o", str(tmp_path / "out.npz")]
    for name, value in feeds.items():
        np.save(tmp_path / f"{name}.npy", value)
        argv += ["-i", f"{name}={tmp_path / name}.npy"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert ("into one FusedAttention layer" in err) == fused
    (want,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    (got,) = np.load(tmp_path / "out.npz").values()
    assert float(np.abs(got - want).max() / np.abs(want).max()) <= 1e-4


def test_asking_for_the_pass_where_nothing_matches_says_so(tmp_path, engine):
    """A head of 80 (over the kernel's 64): the layers run as before, and the network says
    that nothing was fused and what the pass takes, rather than leave the user guessing."""
    model, feeds = tm.vit(dim=160, heads=2)
    path = tmp_path / "vit80.onnx"
    onnx.save(model, str(path))
    net = Network(str(path), engine=engine, fuse_attention=True)
    assert _fused_count(net) == 0
    _check(net, path, feeds)
    notes = [m for m in net.messages if m.startswith("note: fuse_attention:")]
    assert notes == ["note: fuse_attention: no attention matched (float32, known shapes, a "
                     "Softmax over the last axis, head size up to 64); nothing fused"]
    small, _ = tm.vit()
    onnx.save(small, str(path))
    asked = Network(str(path), engine=engine, fuse_attention=True)
    assert not any(m.startswith("note: fuse_attention:") for m in asked.messages)

# -- graphs the pass must rewrite without breaking them --------------------------------------
def _chain_model(consts: tuple = (), chained: bool = False):
    """softmax(Q K^T * 0.3) V on Q [1, 3, 4, 8], K^T [1, 3, 8, 5], V [1, 3, 5, 6], the tensors
    named in `consts` initializers (a learned query or key memory); `chained`: the result is
    the scores of a second attention, softmax(Y * 0.7) W with W [1, 3, 6, 7] (its Q the first
    one's probabilities, its K^T the first one's V)."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(7)
    arrays = {"q": (1, 3, 4, 8), "kt": (1, 3, 8, 5), "v": (1, 3, 5, 6), "w": (1, 3, 6, 7)}
    arrays = {n: rng.standard_normal(s).astype(np.float32) for n, s in arrays.items()}
    if not chained:
        del arrays["w"]
    nodes = [helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node("Mul", ["s", "c"], ["z"]),
             helper.make_node("Softmax", ["z"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    out = ("y", (1, 3, 4, 6))
    if chained:
        nodes += [helper.make_node("Mul", ["y", "c2"], ["z2"]),
                  helper.make_node("Softmax", ["z2"], ["p2"], axis=-1),
                  helper.make_node("MatMul", ["p2", "w"], ["y2"])]
        out = ("y2", (1, 3, 4, 7))
    inits = [numpy_helper.from_array(np.array(0.3, np.float32), "c"),
             numpy_helper.from_array(np.array(0.7, np.float32), "c2")]
    inits += [numpy_helper.from_array(arrays[n], n) for n in consts]
    f = TensorProto.FLOAT
    graph = helper.make_graph(
        nodes, "attn", [helper.make_tensor_value_info(n, f, a.shape)
                        for n, a in arrays.items() if n not in consts],
        [helper.make_tensor_value_info(out[0], f, out[1])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8            # what every onnxruntime of opset 17 reads (the GPU machine's)
    return model, {n: a for n, a in arrays.items() if n not in consts}


@pytest.mark.parametrize("consts,chained", [(("q",), False), (("kt",), False),
                                            (("q", "kt", "v"), False), ((), True)],
                         ids=["q_const", "kt_const", "qkv_const", "chained"])
def test_constant_operands_and_chained_attentions_fold_and_match(tmp_path, engine, consts,
                                                                   chained):
    """A constant Q or K^T (learned queries, a key memory) is read by the fused layer once the
    MatMul that read it is gone; where one attention's P V is the next one's scores, the first
    folds and the second stays layers (each was a dangling edge: a ModelError at load)."""
    model, feeds = _chain_model(consts, chained)
    path = tmp_path / "attn.onnx"
    onnx.save(model, str(path))
    net = Network(read_onnx(path), engine=engine, fuse_attention=True)
    _check(net, path, feeds)
    assert _fused_count(net) == 1


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
def test_a_single_head_attention_runs(tmp_path, engine, fuse):
    """One head: the head split keeps the projection's last axis, so view_folding could fold it
    both into where the projection stores and into the reads of the attention MatMul; folded
    both ways it was a BindingError at compile, with the pass or without."""
    model, feeds = tm.bert(seq=ODD_S, dim=48, heads=1, layers=1, max_len=ODD_S, pad_from=3)
    path = tmp_path / "bert1.onnx"
    onnx.save(model, str(path))
    net = Network(read_onnx(path), engine=engine, fuse_attention=fuse)
    _check(net, path, feeds)
    assert _fused_count(net) == int(fuse)
