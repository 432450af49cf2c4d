"""passes/concrete_shapes.py: a plan's input shapes written onto every port of a model with
dynamic dims, so that the rewrites that need shapes fold it per plan (device-free: the layers'
own shape inference on the built-ins)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx")

from customlayers.errors import CustomLayersError  # noqa: E402
from customlayers.graph.onnx.reader import read_onnx  # noqa: E402
from customlayers.jit.launch import DeviceTraits  # noqa: E402
from customlayers.ops import get_op  # noqa: E402
from customlayers.passes import PASSES  # noqa: E402
from customlayers.passes.concrete_shapes import with_concrete_shapes  # noqa: E402
from customlayers.passes.shape_folding import fold_for_shapes  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import transformer_models as tm  # noqa: E402


def _builtin(node):
    try:
        return get_op(node.type)
    except CustomLayersError:
        return None


def _dynamic_bert(tmp_path):
    model, _ = tm.bert(dynamic=True, pad_from=5)
    path = tmp_path / "bert.onnx"
    onnx.save(model, str(path))
    shapes = {"input_ids": (3, 9), "attention_mask": (3, 9)}
    return fold_for_shapes(read_onnx(path), shapes), shapes


def _unknown(graph) -> int:
    return sum(p.shape is None or None in p.shape
               for n in graph.nodes.values() for p in n.inputs + n.outputs)


def test_every_port_gets_the_plans_shapes(tmp_path):
    graph, shapes = _dynamic_bert(tmp_path)
    assert _unknown(graph) > 0
    known = with_concrete_shapes(graph, _builtin, DeviceTraits(), shapes)
    assert _unknown(known) == 0
    out = next(n for n in known.nodes.values() if n.type == "Result")
    assert tuple(out.inputs[0].shape) == (3, 9, 64)


def _fused_after_rewrites(graph) -> int:
    for rewrite in PASSES[1:]:
        graph, _ = rewrite(graph, lambda n: True)
    return [n.type for n in graph].count("FusedAttention")


def test_the_rewrites_then_fold_the_attention(tmp_path):
    graph, shapes = _dynamic_bert(tmp_path)
    assert _fused_after_rewrites(graph) == 0          # the symbolic sequence: nothing known
    known = with_concrete_shapes(graph, _builtin, DeviceTraits(), shapes)
    assert _fused_after_rewrites(known) == 2


def test_a_layer_that_cannot_say_leaves_the_graph_as_it_was(tmp_path):
    graph, shapes = _dynamic_bert(tmp_path)
    silent = lambda n: None if n.type == "SoftMax" else _builtin(n)  # noqa: E731
    assert with_concrete_shapes(graph, silent, DeviceTraits(), shapes) is graph
    # an input the plan does not give: as it was
    assert with_concrete_shapes(graph, _builtin, DeviceTraits(), {"input_ids": (3, 9)}) is graph
