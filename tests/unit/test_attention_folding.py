"""passes/attention_folding.py: the exporters' MatMul, scale, mask Add, Softmax, MatMul chain
becomes one FusedAttention layer, only where the layers are exactly that chain and the kernel
takes its shapes (device-free: the graph read from ONNX, then the passes before it and it).
Its numbers are checked on a device: tests/device/test_fused_attention.py."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from customlayers.graph.onnx.reader import read_onnx  # noqa: E402
from customlayers.ops.attention.fused import AttentionViews  # noqa: E402
from customlayers.passes import PASSES, fold_attention, passes_for  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import transformer_models as tm  # noqa: E402


def _rewritten(graph, builtin=lambda n: True):
    notes = []
    for rewrite in PASSES:
        graph, said = rewrite(graph, builtin)
        notes += said
    return graph, notes


def _types(graph) -> list[str]:
    return [n.type for n in graph]


@pytest.mark.parametrize("make", [tm.vit, lambda: tm.bert(pad_from=5), tm.torch_mha_encoder,
                                  lambda: tm.torch_mha_encoder(dynamo=True)],
                         ids=["vit", "bert", "mha", "mha_dynamo"])
def test_each_exported_attention_becomes_one_layer(tmp_path, make):
    model, _ = make()
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    graph, notes = _rewritten(read_onnx(path))
    types = _types(graph)
    assert types.count("FusedAttention") == 2 and "SoftMax" not in types
    assert sum("FusedAttention" in n for n in notes) == 2
    for node in graph:
        if node.type == "FusedAttention":
            views = next(f for f in node.facts if isinstance(f, AttentionViews))
            # Q, K, V are read where the projections wrote them: no Transpose copies them
            assert views.q.shape[2:] == (views.out.shape[2], views.k.shape[3])
            assert len(node.inputs) == 3 + (node.attrs["has_mask"] == "true")


def test_a_where_mask_is_left_to_the_layers(tmp_path):
    """GPT-2's causal mask is a Where of a constant, not an Add: the chain stays as it is."""
    model, _ = tm.gpt2_block()
    path = tmp_path / "gpt2.onnx"
    onnx.save(model, str(path))
    assert "FusedAttention" not in _types(_rewritten(read_onnx(path))[0])


def _attention(tmp_path: Path, *, head=8, axis=-1, scale_after_mask=False, probs_out=False,
               scores_read=False, mask_shape=(2, 1, 1, 5)):
    """Q [2, 3, 4, head], K [2, 3, 5, head], V [2, 3, 5, head], a mask input; the chain with
    the knobs turned."""
    f = TensorProto.FLOAT
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s"])]
    if scale_after_mask:
        nodes += [helper.make_node("Add", ["s", "mask"], ["a"]),
                  helper.make_node("Div", ["a", "c"], ["z"])]
    else:
        nodes += [helper.make_node("Div", ["s", "c"], ["d"]),
                  helper.make_node("Add", ["d", "mask"], ["z"])]
    nodes += [helper.make_node("Softmax", ["z"], ["p"], axis=axis),
              helper.make_node("MatMul", ["p", "v"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", f, [2, 3, 4, head])]
    if probs_out:
        outputs.append(helper.make_tensor_value_info("p", f, [2, 3, 4, 5]))
    if scores_read:
        nodes.append(helper.make_node("Neg", ["s"], ["n"]))
        outputs.append(helper.make_tensor_value_info("n", f, [2, 3, 4, 5]))
    inputs = [helper.make_tensor_value_info("q", f, [2, 3, 4, head]),
              helper.make_tensor_value_info("k", f, [2, 3, 5, head]),
              helper.make_tensor_value_info("v", f, [2, 3, 5, head]),
              helper.make_tensor_value_info("mask", f, list(mask_shape))]
    graph = helper.make_graph(nodes, "attn", inputs, outputs,
                              [numpy_helper.from_array(np.array(np.sqrt(head), np.float32), "c")])
    path = tmp_path / "attn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return read_onnx(path)


@pytest.mark.parametrize("mask_shape", [(2, 1, 1, 5), (2, 3, 4, 1), (5,), (2, 3, 4, 5)])
def test_the_plain_chain_folds_with_its_scale_and_mask(tmp_path, mask_shape):
    graph, _ = _rewritten(_attention(tmp_path, mask_shape=mask_shape))
    (node,) = [n for n in graph if n.type == "FusedAttention"]
    assert float(node.attrs["scale"]) == pytest.approx(1 / np.sqrt(8), rel=1e-7)
    assert node.attrs["has_mask"] == "true"
    assert _types(graph).count("MatMul") == 0


@pytest.mark.parametrize("knob", [dict(head=128), dict(axis=2), dict(scale_after_mask=True),
                                  dict(probs_out=True), dict(scores_read=True)],
                         ids=["head_128", "softmax_axis_2", "scale_after_mask", "probs_output",
                              "scores_read_elsewhere"])
def test_what_the_kernel_cannot_take_stays_as_layers(tmp_path, knob):
    graph, _ = _rewritten(_attention(tmp_path, **knob))
    assert "FusedAttention" not in _types(graph)


def test_a_custom_layer_in_the_chain_is_not_folded(tmp_path):
    graph, _ = _rewritten(_attention(tmp_path), builtin=lambda n: n.type != "SoftMax")
    assert "FusedAttention" not in _types(graph)


def test_the_pass_is_left_out_where_asked():
    assert fold_attention in passes_for() and fold_attention not in passes_for(attention=False)
