"""The losses of ONNX (opset 12/13/22): NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss,
on loss.cl, f32 and f64.

Inputs: scores (N, C) or (N, C, d1..dk), an integer target (N) or (N, d1..dk), an optional
per-class weight (C). reduction 'none' gives the target's shape; 'sum' and 'mean' one value,
reduced on the device by one work-group (mean: divided by the sum of the weights of the targets
that are not ignore_index, as the spec says). SoftmaxCrossEntropyLoss first takes the
log-softmax over the class axis, into its second output (log_prob) when the model asks for it
(attribute log_prob), else into a scratch buffer.
"""
from __future__ import annotations

import numpy as np

from ...dtypes import BY_NAME
from ..base import Attr, register_op
from .._nn import NamedOp
from .._program import global_1d, numel, program_text, shape_of
from ...jit.launch import Arg, DEFAULT_CONTEXT, KernelLaunch

REDUCTIONS = ("none", "sum", "mean")
_WG = 64            # work items of the one work-group that sums a loss
_FLOATS = ("f32", "f64")
_TARGETS = ("i32", "i64")


@register_op
class NegativeLogLikelihoodLoss(NamedOp):
    input_count = (2, 3)
    type = "NegativeLogLikelihoodLoss"
    # ignore_index: ONNX has no default (no target is ignored); absent here means the same
    attributes = (Attr("reduction", "str", "mean"), Attr("ignore_index", "int", None))

    def check(self, attrs):
        self.check_choice(attrs, "reduction", REDUCTIONS)

    def _dims(self, attrs, inputs) -> tuple[int, int, int]:
        """(N, C, D): the scores viewed as [N, C, D]; checks the target and the weight."""
        x = shape_of(inputs[0])
        if inputs[0].dtype not in _FLOATS:
            raise self.fail(attrs, f"input 0 (scores) is {inputs[0].dtype}; expected one of "
                                   f"{', '.join(_FLOATS)}")
        if len(x) < 2:
            raise self.fail(attrs, f"input 0 (scores) has shape {list(x)}; expected (N, C) or "
                                   f"(N, C, d1, ..., dk)")
        target = shape_of(inputs[1])
        if inputs[1].dtype not in _TARGETS:
            raise self.fail(attrs, f"input 1 (target) is {inputs[1].dtype}; expected one of "
                                   f"{', '.join(_TARGETS)}")
        if target != (x[0],) + x[2:]:
            raise self.fail(attrs, f"input 1 (target) has shape {list(target)}; the scores of "
                                   f"shape {list(x)} need {[x[0], *x[2:]]}")
        if len(inputs) > 2:
            if shape_of(inputs[2]) != (x[1],) or inputs[2].dtype != inputs[0].dtype:
                raise self.fail(attrs, f"input 2 (weight) is {inputs[2].dtype} of shape "
                                       f"{list(shape_of(inputs[2]))}; expected "
                                       f"{inputs[0].dtype} of shape [{x[1]}] (one per class)")
        return x[0], x[1], numel(x[2:])

    def infer_shapes(self, attrs, inputs, consts):
        n, _, _ = self._dims(attrs, inputs)
        x = shape_of(inputs[0])
        shape = (n,) + x[2:] if attrs["reduction"].lower() == "none" else ()
        return [(shape, inputs[0].dtype)]

    def nll_launch(self, attrs, inputs, scores: Arg, out: Arg) -> KernelLaunch:
        """The NLL of `scores` (an argument: the input, or the log-softmax written before)."""
        n, c, d = self._dims(attrs, inputs)
        reduction = attrs["reduction"].lower()
        weighted = len(inputs) > 2
        ignore = attrs["ignore_index"]
        t = inputs[0].cl_type
        values = {"T": t, "T2": f"{t}2", "TARGET_T": inputs[1].cl_type, "WG": _WG,
                  "HAS_WEIGHT": int(weighted), "USE_IGNORE": int(ignore is not None),
                  "REDUCE_MEAN": int(reduction == "mean")}
        label = f"{self.type.lower()}_{reduction}"
        args = (scores, Arg.input(1)) + ((Arg.input(2),) if weighted else ()) + (
            out, Arg.scalar(np.int32(c)), Arg.scalar(np.int32(d)),
            Arg.scalar(np.int64(ignore if ignore is not None else 0)),
            Arg.scalar(np.int32(n * d)))
        src = program_text(label, values, "loss.cl")
        if reduction == "none":
            return KernelLaunch(src, "nll_none", args, global_1d(n * d), label=label)
        return KernelLaunch(src, "nll_reduce", args, (_WG,), (_WG,), label=label)

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        return [self.nll_launch(attrs, inputs, Arg.input(0), Arg.output(0))]


@register_op
class SoftmaxCrossEntropyLoss(NegativeLogLikelihoodLoss):
    type = "SoftmaxCrossEntropyLoss"
    attributes = NegativeLogLikelihoodLoss.attributes + (Attr("log_prob", "bool", False),)

    def infer_shapes(self, attrs, inputs, consts):
        loss = super().infer_shapes(attrs, inputs, consts)
        if attrs["log_prob"]:
            loss.append((shape_of(inputs[0]), inputs[0].dtype))
        return loss

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        n, c, d = self._dims(attrs, inputs)
        log_prob = Arg.output(1) if attrs["log_prob"] else \
            Arg.scratch(0, n * c * d * BY_NAME[inputs[0].dtype].itemsize)
        t = inputs[0].cl_type
        label = "log_softmax_classes"
        src = program_text(label, {"T": t, "T2": f"{t}2", "TARGET_T": inputs[1].cl_type,
                                   "WG": _WG, "HAS_WEIGHT": 0, "USE_IGNORE": 0,
                                   "REDUCE_MEAN": 0}, "loss.cl")
        softmax = KernelLaunch(src, "log_softmax_classes",
                               (Arg.input(0), log_prob, Arg.scalar(np.int32(c)),
                                Arg.scalar(np.int32(d)), Arg.scalar(np.int32(n * d))),
                               global_1d(n * d), label=label)
        return [softmax, self.nll_launch(attrs, inputs, log_prob, Arg.output(0))]
