"""ArgMax/ArgMin (ONNX semantics: axis, keep_dims, select_last_index) and TopK (OpenVINO TopK-11
with stable ordering, which is ONNX's: among equal values the lower index first). Kernels:
index_select.cl; the axis splits the input into [outer, n, inner]."""
from __future__ import annotations

from ...jit.launch import Arg, DEFAULT_CONTEXT
from .._program import numel, program_text, shape_of
from ..base import Attr, Op, register_op
from ._launch import axis_of, const_scalar, launch, refuse, scalar

_INDEX_TYPES = {"i64": "long", "i32": "int"}


def _split(shape, axis: int) -> tuple[int, int, int]:
    return numel(shape[:axis]), shape[axis], numel(shape[axis + 1:])


def _program(label: str, data, index_type: str) -> str:
    return program_text(label, {"DATA_TYPE": data.cl_type, "INDEX_TYPE": index_type},
                        "index_select.cl")


class _ArgReduce(Op):
    """The index (i64) of the largest / smallest value along `axis`."""
    input_count = (1, 1)
    attributes = (Attr("axis", "int", 0), Attr("keep_dims", "bool", True),
                  Attr("select_last_index", "bool", False))
    largest = True

    def infer_shapes(self, attrs, inputs, consts):
        shape = shape_of(inputs[0])
        axis = axis_of(self.type, attrs, attrs["axis"], len(shape))
        out = shape[:axis] + ((1,) if attrs["keep_dims"] else ()) + shape[axis + 1:]
        return [(out, "i64")]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        shape = shape_of(inputs[0])
        outer, n, inner = _split(shape, axis_of(self.type, attrs, attrs["axis"], len(shape)))
        src = _program("arg_reduce", inputs[0], "long")
        return [launch(src, "arg_reduce",
                       (Arg.input(0), Arg.output(0), scalar(outer * inner), scalar(n),
                        scalar(inner), scalar(self.largest),
                        scalar(attrs["select_last_index"])), outer * inner, self.type.lower())]


@register_op
class ArgMax(_ArgReduce):
    type = "ArgMax"


@register_op
class ArgMin(_ArgReduce):
    type = "ArgMin"
    largest = False


@register_op
class TopK(Op):
    """Outputs: the k largest (mode max) or smallest (min) values along `axis`, sorted, and
    their indices (index_element_type); k: the constant input 1 (a graph input is compiled in
    by value)."""
    input_count = (2, 2)
    type = "TopK"
    const_inputs = (1,)
    attributes = (Attr("axis", "int", -1), Attr("mode", "str", "max"),
                  Attr("sort", "str", "value"), Attr("index_element_type", "str", "i32"),
                  Attr("stable", "bool", True))
    # up to this k, one work-item per line picks k times (a vocabulary's top 5: 5 passes
    # over 50,000 values, not 50,000 ranks of 50,000 comparisons each)
    LINE_K = 16

    def parse_attributes(self, raw, layer):
        attrs = super().parse_attributes(raw, layer)
        checks = (("mode", ("max", "min")), ("sort", ("value", "none")),
                  ("index_element_type", tuple(_INDEX_TYPES)))
        for key, allowed in checks:
            if attrs[key] not in allowed:
                raise refuse(self.type, attrs, f"{key}='{attrs[key]}' is not supported; "
                                               f"supported: {', '.join(allowed)}")
        return attrs

    def _geometry(self, attrs, inputs, consts):
        shape = shape_of(inputs[0])
        axis = axis_of(self.type, attrs, attrs["axis"], len(shape))
        k = int(const_scalar(self.type, attrs, consts, 1, "k"))
        if not 1 <= k <= shape[axis]:
            raise refuse(self.type, attrs, f"k={k} is not within 1..{shape[axis]} (axis {axis} "
                                           f"of {list(shape)}; an empty result is not "
                                           f"supported)")
        return shape, axis, k

    def infer_shapes(self, attrs, inputs, consts):
        shape, axis, k = self._geometry(attrs, inputs, consts)
        out = shape[:axis] + (k,) + shape[axis + 1:]
        return [(out, inputs[0].dtype), (out, attrs["index_element_type"])]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        shape, axis, k = self._geometry(attrs, inputs, consts)
        outer, n, inner = _split(shape, axis)
        src = _program("top_k", inputs[0], _INDEX_TYPES[attrs["index_element_type"]])
        largest = scalar(attrs["mode"] == "max")
        if k <= self.LINE_K:            # k passes over each line: O(k n) per line
            lines = outer * inner
            return [launch(src, "top_k_lines",
                           (Arg.input(0), Arg.output(0), Arg.output(1), scalar(lines),
                            scalar(n), scalar(inner), scalar(k), largest), lines,
                           "top_k_lines")]
        count = numel(shape)            # each element ranked in its line: O(n n), parallel
        return [launch(src, "top_k",
                       (Arg.input(0), Arg.output(0), Arg.output(1), scalar(count), scalar(n),
                        scalar(inner), scalar(k), largest), count, "top_k")]
