"""Issue 20 item 2: whole transformers run and match ONNX Runtime to 1e-4 relative: a ViT, a
BERT encoder (static, and with a dynamic batch and sequence run at two lengths in one Network,
padded rows masked) and a GPT-2 decoder block with its causal mask, written with onnx.helper in
the patterns torch.onnx.export emits (tests/transformer_models.py), small enough for PoCL."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import transformer_models as tm  # noqa: E402

from customlayers.api import Network  # noqa: E402
from customlayers.graph.onnx.reader import read_onnx  # noqa: E402

REL = 1e-4


@pytest.fixture(scope="module")
def engine(test_device):
    from customlayers.runtime.device.device import Engine
    return Engine(test_device)


def _saved(tmp_path: Path, model, name: str) -> Path:
    onnx.checker.check_model(model, full_check=True)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    return path


def _check(net, path: Path, feeds: dict) -> None:
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = net.infer(feeds)
    assert len(got) == len(want)
    for value, ref in zip(got.values(), want):
        assert value.shape == ref.shape
        err = float(np.abs(value - ref).max() / np.abs(ref).max())
        assert err <= REL, err


def test_a_vit_matches_onnx_runtime(tmp_path, engine):
    model, feeds = tm.vit()
    path = _saved(tmp_path, model, "vit")
    _check(Network(read_onnx(path), engine=engine), path, feeds)


def test_a_vit_with_a_dynamic_batch_runs_at_two_batches(tmp_path, engine):
    model, feeds = tm.vit(batch_dim="batch")
    path = _saved(tmp_path, model, "vit_dyn")
    net = Network(read_onnx(path), engine=engine)
    _check(net, path, feeds)
    _check(net, path, {"x": np.concatenate([feeds["x"]] * 2 + [feeds["x"][:1]])})


def test_a_bert_encoder_with_padding_matches_onnx_runtime(tmp_path, engine):
    model, feeds = tm.bert(seq=16, pad_from=10)
    path = _saved(tmp_path, model, "bert")
    _check(Network(read_onnx(path), engine=engine), path, feeds)


def test_a_bert_encoder_with_a_dynamic_sequence_runs_at_two_lengths(tmp_path, engine):
    model, feeds = tm.bert(dynamic=True, pad_from=10)
    path = _saved(tmp_path, model, "bert_dyn")
    net = Network(read_onnx(path), engine=engine)
    _check(net, path, feeds)
    _check(net, path, tm.bert_inputs(batch=3, seq=9, pad_from=5))


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_gpt2_block_with_a_causal_mask_matches_onnx_runtime(tmp_path, engine, dynamic):
    model, feeds = tm.gpt2_block(dynamic=dynamic)
    path = _saved(tmp_path, model, "gpt2")
    net = Network(read_onnx(path), engine=engine)
    _check(net, path, feeds)
    if dynamic:                                  # a shorter prompt: the mask is sliced again
        _check(net, path, {"x": feeds["x"][:1, :5]})


@pytest.mark.parametrize("dynamo", [False, True], ids=["torchscript", "dynamo"])
@pytest.mark.parametrize("batch", [1, 3])
def test_torch_multihead_attention_runs_without_copying_its_heads(tmp_path, engine, dynamo,
                                                                  batch):
    """torch's nn.MultiheadAttention pattern (eight Transposes, three Gathers and two Multiplys
    a layer between its projections) runs with none of them: passes/view_folding.py folds them
    into the MatMuls' reads and stores. Padded positions masked."""
    model, feeds = tm.torch_mha_encoder(batch=batch, dynamo=dynamo, pad_from=4)
    path = _saved(tmp_path, model, "mha")
    net = Network(read_onnx(path), engine=engine)
    _check(net, path, feeds)
    left = [s.type for s in net.plan.steps if s.type in ("Transpose", "Gather", "Multiply",
                                                         "Gelu")]
    assert left == [], left          # the Gelu runs in its Linear's epilogue (fusion.py)
    assert sum(s.type == "MatMul+bias+gelu" for s in net.plan.steps) == 2
    # the mask is expanded once (common_nodes.py) and added where the scores are stored (a
    # broadcast residual), in every layer whose scores come after it
    types = [s.type for s in net.plan.steps]
    assert types.count("Broadcast") == 1 and types.count("Add") <= 1, types
    assert sum("into the reads of MatMul" in m for m in net.messages) == 2 * 4   # q k, k, v, x
    assert sum("into where MatMul" in m for m in net.messages) == 2 * 2
