"""ONNX -> IR translations of the losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss
(opset 12/13/22), each one built-in op (ops/reduce/loss.py) of the same name; the optional
log_prob output of SoftmaxCrossEntropyLoss is the op's second output, computed only when the
model names it."""
from __future__ import annotations

from ..translate import dtype_of, optional_input, text_attr, translates

_REDUCTIONS = ("none", "sum", "mean")


@translates("NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss")
def _loss(r, node, name: str, attrs: dict) -> None:
    reduction = text_attr(r, attrs, "reduction", "mean", _REDUCTIONS)
    ir = {"reduction": reduction}
    if "ignore_index" in attrs:
        ir["ignore_index"] = str(int(attrs["ignore_index"]))
    for k, what, allowed in ((0, "scores", ("f32", "f64")), (1, "target", ("i32", "i64")),
                             (2, "weight", ("f32", "f64"))):
        value = optional_input(node, k)
        dtype = dtype_of(r, value) if value else ""
        if dtype and dtype not in allowed:
            r.refuse(f"input {k} ({what}) is {dtype}; {node.op_type} takes "
                     f"{' or '.join(allowed)} here")
    weight = optional_input(node, 2)
    _check_shapes(r, node.input[0], node.input[1], weight)
    inputs = list(node.input[:2]) + ([weight] if weight else [])
    outputs = [node.output[0]]
    if node.op_type == "SoftmaxCrossEntropyLoss" and len(node.output) > 1 and node.output[1]:
        ir["log_prob"] = "true"
        outputs.append(node.output[1])
    r.emit(node.op_type, inputs, outputs, name, ir)


def _check_shapes(r, scores: str, target: str, weight: str | None) -> None:
    """Where shapes are known at load: scores (N, C, d1..dk), target (N, d1..dk), weight (C)."""
    x, t = r.known_shape(scores), r.known_shape(target)
    if x is not None and len(x) < 2:
        r.refuse(f"input 0 (scores) has shape {list(x)}; expected (N, C) or (N, C, d1, ..., dk)")
    if x is None or None in x:
        return
    if t is not None and None not in t and tuple(t) != (x[0], *x[2:]):
        r.refuse(f"input 1 (target) has shape {list(t)}; the scores of shape {list(x)} need "
                 f"{[x[0], *x[2:]]}")
    w = r.known_shape(weight) if weight else None
    if w is not None and None not in w and tuple(w) != (x[1],):
        r.refuse(f"input 2 (weight) has shape {list(w)}; expected [{x[1]}] (one per class)")
