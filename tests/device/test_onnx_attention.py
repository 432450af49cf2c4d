"""Issue 20 item 2, attention: ONNX Attention (opsets 23 and 24) and RotaryEmbedding (opset 23)
as built-in ops (ops/attention/, graph/onnx/ops/attention.py), on small onnx.helper models,
against ONNX Runtime and a float64 numpy reference written here from the ONNX spec: masks
(bool and float, broadcast, shorter than the keys), GQA, causal with a past, nonpad_kv_seqlen,
softcap, 3-D inputs, the optional outputs each omitted or asked for; bad shapes refused naming
the node."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

from customlayers.api import Network  # noqa: E402
from customlayers.errors import BindingError, ModelError  # noqa: E402
from customlayers.graph.onnx.reader import read_onnx  # noqa: E402
from customlayers.jit.launch import CompileContext, DeviceTraits  # noqa: E402
from op_harness import CPU_CONTEXT, run_op  # noqa: E402

RNG = np.random.default_rng(20)
ONNX_TYPE = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE,
             np.bool_: TensorProto.BOOL, np.int64: TensorProto.INT64}


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def _model(path: Path, op: str, feeds: dict, inputs: list[str], outputs: list[str],
           opset: int, **attrs) -> Path:
    """One `op` node reading `inputs` ('' for an omitted one) from graph inputs `feeds`."""
    node = helper.make_node(op, inputs, outputs, name="attn", **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, ONNX_TYPE[a.dtype.type], a.shape)
         for n, a in feeds.items()],
        [helper.make_tensor_value_info(o, ONNX_TYPE[feeds["q" if "q" in feeds else "x"]
                                                    .dtype.type], None)
         for o in outputs if o])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    onnx.save(model, str(path))
    return path


# -- the float64 reference ---------------------------------------------------------------------
def _heads(x, heads):
    """(B, S, H*D) -> (B, H, S, D)."""
    b, s, hidden = x.shape
    return x.reshape(b, s, heads, hidden // heads).transpose(0, 2, 1, 3)


def reference(q, k, v, mask=None, past_key=None, past_value=None, nonpad=None, *,
              is_causal=0, scale=None, softcap=0.0, q_num_heads=0, kv_num_heads=0,
              qk_matmul_output_mode=0, left_window_size=-1, right_window_size=-1):
    """(Y, present_key, present_value, qk_matmul_output) in float64, as the ONNX spec says."""
    q, k, v = (np.asarray(t, np.float64) for t in (q, k, v))
    three_d = q.ndim == 3
    if three_d:
        q, k, v = _heads(q, q_num_heads), _heads(k, kv_num_heads), _heads(v, kv_num_heads)
    past = 0
    if past_key is not None:
        past = past_key.shape[2]
        k = np.concatenate([past_key.astype(np.float64), k], axis=2)
        v = np.concatenate([past_value.astype(np.float64), v], axis=2)
    present_k, present_v = k, v
    b, qh, s, d = q.shape
    total = k.shape[2]
    bias = np.zeros((b, qh, s, total))
    if mask is not None:
        m = np.where(mask, 0.0, -np.inf) if mask.dtype == np.bool_ else mask.astype(np.float64)
        pad = [(0, 0)] * (m.ndim - 1) + [(0, total - m.shape[-1])]
        bias = bias + np.pad(m, pad, constant_values=-np.inf)
    i = np.arange(s)[:, None]
    j = np.arange(total)[None, :]
    offset = (nonpad - s).reshape(b, 1, 1, 1) if nonpad is not None and past_key is None \
        else past
    if is_causal:
        bias = np.where(j > i + offset, -np.inf, bias)
    if left_window_size >= 0:         # opset 25's sliding window
        bias = np.where(i + offset - j > left_window_size, -np.inf, bias)
    if right_window_size >= 0:
        bias = np.where(j - i - offset > right_window_size, -np.inf, bias)
    if nonpad is not None:
        bias = np.where(j >= nonpad.reshape(b, 1, 1, 1), -np.inf, bias)
    group = qh // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    raw = q @ k.transpose(0, 1, 3, 2) * (scale if scale is not None else 1 / np.sqrt(d))
    capped = softcap * np.tanh(raw / softcap) if softcap else raw
    scores = capped + bias
    top = scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - np.where(np.isneginf(top), 0, top))
    probs = e / np.where(e.sum(-1, keepdims=True) == 0, 1, e.sum(-1, keepdims=True))
    probs = np.where(np.isneginf(bias.max(-1, keepdims=True)), 0, probs)  # fully masked rows
    y = probs @ v
    if three_d:
        y = y.transpose(0, 2, 1, 3).reshape(b, s, -1)
    qk = (raw, capped, scores, probs)[qk_matmul_output_mode]
    return y, present_k, present_v, qk


def _run(path, feeds, engine):
    return Network(read_onnx(path), engine=engine).infer(feeds)


def _ort(path, feeds):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feeds)))


def _rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# -- Attention ---------------------------------------------------------------------------------
# (name, shapes of q/k/v, mask (shape, bool?) or None, past length, attributes); a mask shorter
# than the keys (which ONNX allows: the keys past it are masked) is compared with the onnx
# package's reference evaluator instead, as ONNX Runtime 1.32 refuses it
CASES = [
    ("mha", (2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8), None, 0, {}),
    ("float_mask_short", (1, 2, 4, 8), (1, 2, 6, 8), (1, 2, 6, 5), ((4, 5), False), 0, {}),
    ("bool_mask_4d", (2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 4), ((2, 1, 3, 5), True), 0, {}),
    ("gqa_causal", (1, 6, 5, 8), (1, 2, 5, 8), (1, 2, 5, 8), None, 0, {"is_causal": 1}),
    ("causal_past", (1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 6), ((3, 7), False), 4,
     {"is_causal": 1}),
    ("softcap_scale", (2, 2, 3, 8), (2, 2, 4, 8), (2, 2, 4, 8), ((2, 2, 3, 4), True), 0,
     {"softcap": 1.5, "scale": 0.3}),
    ("gqa_3d_past", (2, 5, 6 * 4), (2, 5, 2 * 4), (2, 5, 2 * 3), ((5, 8), True), 3,
     {"q_num_heads": 6, "kv_num_heads": 2, "is_causal": 1}),
    ("mha_3d", (1, 7, 3 * 8), (1, 9, 3 * 8), (1, 9, 3 * 8), None, 0,
     {"q_num_heads": 3, "kv_num_heads": 3}),
]


def _feeds(q, k, v, mask, past, dtype=np.float32):
    feeds = {"q": _rand(*q, dtype=dtype), "k": _rand(*k, dtype=dtype),
             "v": _rand(*v, dtype=dtype)}
    if mask is not None:
        shape, boolean = mask
        feeds["m"] = RNG.random(shape) > 0.3 if boolean else _rand(*shape, dtype=dtype)
    if past:
        b, kvh = k[0], (k[1] if len(k) == 4 else None)
        heads = kvh or 2
        d = k[3] if len(k) == 4 else k[2] // heads
        dv = v[3] if len(v) == 4 else v[2] // heads
        feeds["pk"] = _rand(b, heads, past, d, dtype=dtype)
        feeds["pv"] = _rand(b, heads, past, dv, dtype=dtype)
    return feeds


@pytest.mark.parametrize("name,q,k,v,mask,past,attrs", CASES, ids=[c[0] for c in CASES])
def test_attention_matches_onnx_runtime_and_numpy(tmp_path, engine, name, q, k, v, mask, past,
                                                  attrs):
    """Y, present_key/value (with a past) and qk_matmul_output (mode 3, the probabilities),
    against ONNX Runtime and the float64 reference."""
    feeds = _feeds(q, k, v, mask, past)
    inputs = ["q", "k", "v", "m" if mask else "", "pk" if past else "", "pv" if past else ""]
    outputs = ["y", "present_k" if past else "", "present_v" if past else "", "qk"]
    path = _model(tmp_path / f"{name}.onnx", "Attention", feeds, inputs, outputs, 23,
                  qk_matmul_output_mode=3, **attrs)
    got = _run(path, feeds, engine)
    if mask is None or mask[0][-1] == k[-2] + past:
        want = _ort(path, feeds)
    else:
        from onnx.reference import ReferenceEvaluator
        want = dict(zip([o for o in outputs if o],
                        ReferenceEvaluator(str(path)).run(None, feeds)))
    ref = reference(feeds["q"], feeds["k"], feeds["v"], feeds.get("m"), feeds.get("pk"),
                    feeds.get("pv"), qk_matmul_output_mode=3, **attrs)
    for out, r in zip(outputs, ref):
        if out:
            np.testing.assert_allclose(got[out], r, rtol=1e-4, atol=1e-5, err_msg=out)
            np.testing.assert_allclose(got[out], want[out], rtol=1e-4, atol=1e-5, err_msg=out)


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_qk_matmul_output_modes(tmp_path, engine, mode):
    """The four modes of qk_matmul_output with a softcap and a mask: the scaled scores, after
    the softcap, with the mask, the probabilities (as the schema and ONNX Runtime say)."""
    feeds = _feeds((1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4), ((3, 5), False), 0)
    path = _model(tmp_path / "modes.onnx", "Attention", feeds, ["q", "k", "v", "m"],
                  ["y", "", "", "qk"], 23, qk_matmul_output_mode=mode, softcap=2.0)
    got = _run(path, feeds, engine)
    want = _ort(path, feeds)
    ref = reference(feeds["q"], feeds["k"], feeds["v"], feeds["m"], softcap=2.0,
                    qk_matmul_output_mode=mode)
    for out, r in (("y", ref[0]), ("qk", ref[3])):
        np.testing.assert_allclose(got[out], r, rtol=1e-4, atol=1e-5, err_msg=out)
        np.testing.assert_allclose(got[out], want[out], rtol=1e-4, atol=1e-5, err_msg=out)


def test_nonpad_kv_seqlen_causal_opset24(tmp_path, engine):
    """Opset 24's nonpad_kv_seqlen: keys from nonpad[b] on are padding, and the causal diagonal
    sits at nonpad[b] - q length (an external cache)."""
    feeds = _feeds((2, 4, 2, 8), (2, 2, 6, 8), (2, 2, 6, 8), None, 0)
    feeds["n"] = np.array([3, 6], np.int64)
    path = _model(tmp_path / "nonpad.onnx", "Attention", feeds,
                  ["q", "k", "v", "", "", "", "n"], ["y"], 24, is_causal=1)
    got = _run(path, feeds, engine)["y"]
    ref = reference(feeds["q"], feeds["k"], feeds["v"], nonpad=feeds["n"], is_causal=1)[0]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got, _ort(path, feeds)["y"], rtol=1e-4, atol=1e-5)


def test_fully_masked_rows_are_zero_in_double(tmp_path, engine):
    """A query row whose mask allows no key gives Y = 0 and probabilities 0 (the spec), here on
    float64 tensors; the other rows match the reference to double precision."""
    feeds = _feeds((1, 2, 3, 4), (1, 2, 4, 4), (1, 2, 4, 4), None, 0, dtype=np.float64)
    feeds["m"] = np.array([[True, False, True, True], [False] * 4, [True] * 4])
    path = _model(tmp_path / "masked.onnx", "Attention", feeds, ["q", "k", "v", "m"],
                  ["y", "", "", "qk"], 23, qk_matmul_output_mode=3)
    got = _run(path, feeds, engine)
    ref = reference(feeds["q"], feeds["k"], feeds["v"], feeds["m"], qk_matmul_output_mode=3)
    assert got["y"].dtype == np.float64
    assert not np.any(got["y"][:, :, 1]) and not np.any(got["qk"][:, :, 1])
    np.testing.assert_allclose(got["y"], ref[0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got["qk"], ref[3], rtol=1e-12, atol=1e-12)


def test_present_outputs_without_past_and_y_alone_with_past(tmp_path, engine):
    """Each optional output stands alone: present_key/value of 3-D K/V without a past are K
    and V as (batch, heads, seq, size); with a past, Y alone (no present) is still right."""
    for q, attrs in (((1, 4, 2 * 4), {"q_num_heads": 2, "kv_num_heads": 2}),
                     ((1, 2, 4, 4), {})):
        feeds = _feeds(q, q, q, None, 0)
        path = _model(tmp_path / "present.onnx", "Attention", feeds, ["q", "k", "v"],
                      ["y", "pk_out", "pv_out"], 23, **attrs)
        got = _run(path, feeds, engine)
        ref = reference(feeds["q"], feeds["k"], feeds["v"], **attrs)
        for out, r in zip(("y", "pk_out", "pv_out"), ref):
            np.testing.assert_allclose(got[out], r, rtol=1e-5, atol=1e-6, err_msg=out)

    feeds = _feeds((1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4), None, 2)
    path = _model(tmp_path / "y_only.onnx", "Attention", feeds,
                  ["q", "k", "v", "", "pk", "pv"], ["y"], 23, is_causal=1)
    got = _run(path, feeds, engine)
    ref = reference(feeds["q"], feeds["k"], feeds["v"], None, feeds["pk"], feeds["pv"],
                    is_causal=1)
    assert set(got) == {"y"}
    np.testing.assert_allclose(got["y"], ref[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("q,k,v,attrs,words", [
    ((1, 3, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8), {}, "3 query heads need a whole number"),
    ((1, 4, 10), (1, 4, 10), (1, 4, 10), {"q_num_heads": 4, "kv_num_heads": 2},
     "hidden size 10 does not split into 4 heads"),
    ((1, 4, 8), (1, 4, 8), (1, 4, 8), {}, "need the q_num_heads and kv_num_heads"),
    ((1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4), {}, "must all be 3-D or all 4-D"),
])
def test_bad_shapes_are_refused_naming_the_node(tmp_path, q, k, v, attrs, words):
    feeds = {"q": _rand(*q), "k": _rand(*k), "v": _rand(*v)}
    path = _model(tmp_path / "bad.onnx", "Attention", feeds, ["q", "k", "v"], ["y"], 23,
                  **attrs)
    with pytest.raises(ModelError) as info:
        read_onnx(path)
    assert "'attn' (Attention)" in str(info.value) and words in str(info.value)


def test_a_mask_longer_than_the_keys_is_refused_naming_the_node(tmp_path, engine):
    feeds = _feeds((1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4), ((3, 6), False), 0)
    path = _model(tmp_path / "long_mask.onnx", "Attention", feeds, ["q", "k", "v", "m"],
                  ["y"], 23)
    with pytest.raises(BindingError) as info:
        _run(path, feeds, engine)
    assert "'attn'" in str(info.value) and "attn_mask" in str(info.value)


GPU_SHAPED = CompileContext(DeviceTraits("GPU", compute_units=16, max_work_group_size=256))


@pytest.mark.parametrize("ctx", [GPU_SHAPED, CPU_CONTEXT], ids=["64_items_a_row", "one_a_row"])
@pytest.mark.parametrize("dtype,extra,attrs", [
    # a past, a bool mask shorter than the 100 keys, causal, softcap, qk with the bias
    (np.float32, "past_mask", {"is_causal": 1, "softcap": 1.0, "qk_matmul_output_mode": 2}),
    # double, nonpad_kv_seqlen, a float mask, opset 25's window, the probabilities
    (np.float64, "nonpad_mask", {"is_causal": 1, "left_window_size": 20,
                                 "qk_matmul_output_mode": 3}),
])
def test_the_op_on_both_kernel_shapes(cl_env, ctx, dtype, extra, attrs):
    """The built-in op alone, as a GPU runs it (a work-group of 64 per query row, reductions in
    __local memory) and as a CPU does (one item per row), on rows of more keys than items and
    head sizes that are not multiples of 4 (the float4 loops' tails)."""
    q, k, v = _rand(2, 4, 5, 6, dtype=dtype), _rand(2, 2, 70, 6, dtype=dtype), \
        _rand(2, 2, 70, 7, dtype=dtype)
    ir = {"qk_output": "true", **{key: str(val) for key, val in attrs.items()}}
    if extra == "past_mask":
        pk, pv = _rand(2, 2, 30, 6, dtype=dtype), _rand(2, 2, 30, 7, dtype=dtype)
        mask = RNG.random((2, 1, 5, 90)) > 0.2
        inputs = [q, k, v, pk, pv, mask.astype(np.uint8)]
        ir.update(has_past="true", has_mask="true")
        want = reference(q, k, v, mask, pk, pv, **attrs)
    else:
        mask = _rand(4, 1, 70, dtype=dtype)
        nonpad = np.array([40, 70], np.int64)
        inputs = [q, k, v, mask, nonpad]
        ir.update(has_mask="true", has_nonpad="true")
        want = reference(q, k, v, mask, nonpad=nonpad, **attrs)
    y, qk = run_op(cl_env, "Attention", inputs, ir, ctx=ctx)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(y, want[0], rtol=tol, atol=tol)
    np.testing.assert_allclose(qk, want[3], rtol=tol, atol=tol)


# -- RotaryEmbedding ---------------------------------------------------------------------------
def rotary_reference(x, cos, sin, positions=None, interleaved=0, rotary_embedding_dim=0,
                     num_heads=0):
    """The rotation in float64, in (batch, seq, heads, size) order."""
    x = np.asarray(x, np.float64)
    shape = x.shape
    x = x.transpose(0, 2, 1, 3) if x.ndim == 4 else x.reshape(*shape[:2], num_heads, -1)
    rd = rotary_embedding_dim or x.shape[-1]
    if positions is not None:
        cos, sin = cos[positions], sin[positions]
    cos, sin = cos[:, :, None, :].astype(np.float64), sin[:, :, None, :].astype(np.float64)
    rot = x[..., :rd]
    x1, x2 = (rot[..., 0::2], rot[..., 1::2]) if interleaved else np.split(rot, 2, axis=-1)
    real, imag = cos * x1 - sin * x2, sin * x1 + cos * x2
    rot = np.stack([real, imag], -1).reshape(rot.shape) if interleaved else \
        np.concatenate([real, imag], -1)
    out = np.concatenate([rot, x[..., rd:]], -1)
    return out.transpose(0, 2, 1, 3) if len(shape) == 4 else out.reshape(shape)


@pytest.mark.parametrize("shape,positions,attrs", [
    ((2, 3, 5, 8), True, {}),
    ((2, 3, 5, 8), True, {"interleaved": 1, "rotary_embedding_dim": 4}),
    ((2, 5, 4 * 6), False, {"num_heads": 4}),
    ((1, 5, 2 * 8), True, {"num_heads": 2, "interleaved": 1}),
    ((2, 2, 5, 8), False, {"rotary_embedding_dim": 6}),
])
def test_rotary_embedding_matches_onnx_runtime_or_numpy(tmp_path, engine, shape, positions,
                                                        attrs):
    hd = shape[3] if len(shape) == 4 else shape[2] // attrs["num_heads"]
    half = (attrs.get("rotary_embedding_dim") or hd) // 2
    b, s = shape[0], shape[2] if len(shape) == 4 else shape[1]
    feeds = {"x": _rand(*shape)}
    if positions:
        feeds["cos"], feeds["sin"] = _rand(9, half), _rand(9, half)
        feeds["p"] = RNG.integers(0, 9, (b, s)).astype(np.int64)
    else:
        feeds["cos"], feeds["sin"] = _rand(b, s, half), _rand(b, s, half)
    inputs = ["x", "cos", "sin"] + (["p"] if positions else [])
    path = _model(tmp_path / "rope.onnx", "RotaryEmbedding", feeds, inputs, ["y"], 23, **attrs)
    got = _run(path, feeds, engine)["y"]
    ref = rotary_reference(feeds["x"], feeds["cos"], feeds["sin"], feeds.get("p"), **attrs)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    try:
        want = _ort(path, feeds)["y"]
    except Exception:              # noqa: BLE001 - an ONNX Runtime without RotaryEmbedding-23
        return
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
