"""Einsum (OpenVINO Einsum-7, numpy's notation) of one or two operands of any element type:
transposes, diagonals ("...ii->...i"), sums over labels, inner, outer and batched matrix
products. One kernel (index_einsum.cl) takes the labels' sizes and strides as arguments.
An equation it cannot take (three operands or more, a label of two sizes) is refused, naming
the equation."""
from __future__ import annotations

from ...jit.launch import Arg, DEFAULT_CONTEXT
from .._program import numel, program_text, shape_of
from ..base import Attr, Op, register_op
from ._launch import dense_strides, ints, launch, refuse, scalar


def _terms(op, attrs, equation: str, ranks) -> tuple[list[list[str]], list[str]]:
    """The labels of each operand's axes (ellipsis axes as '0', '1', ... aligned at the end)
    and of the output's."""
    text = equation.replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise refuse(op, attrs, f"equation '{equation}' names {len(terms)} operands, the node "
                                f"has {len(ranks)}")
    ellipsis = 0
    for term, rank in zip(terms, ranks):
        if term.count("...") > 1 or not term.replace("...", "").isalpha() and term.replace(
                "...", ""):
            raise refuse(op, attrs, f"equation '{equation}': term '{term}' is not letters with "
                                    f"at most one '...'")
        named = len(term.replace("...", ""))
        if ("..." in term and named > rank) or ("..." not in term and named != rank):
            raise refuse(op, attrs, f"equation '{equation}': term '{term}' does not fit an "
                                    f"operand of rank {rank}")
        if "..." in term:
            ellipsis = max(ellipsis, rank - named)
    spread = lambda n: [str(k) for k in range(ellipsis - n, ellipsis)]  # noqa: E731
    labels = []
    for term, rank in zip(terms, ranks):
        head, dots, tail = term.partition("...")
        labels.append(list(head) + (spread(rank - len(head) - len(tail)) if dots else [])
                      + list(tail))
    if arrow:
        head, dots, tail = rhs.partition("...")
        if not (head + tail).isalpha() and head + tail or "..." in tail:
            raise refuse(op, attrs, f"equation '{equation}': output term '{rhs}' is not "
                                    f"letters with at most one '...'")
        out = list(head) + (spread(ellipsis) if dots else []) + list(tail)
    else:                                      # implicit: the labels seen once, sorted
        seen = [lab for ls in labels for lab in ls]
        out = spread(ellipsis) + sorted(lab for lab in set(seen)
                                        if lab.isalpha() and seen.count(lab) == 1)
    every = {lab for ls in labels for lab in ls}
    if len(set(out)) != len(out) or not set(out) <= every:
        raise refuse(op, attrs, f"equation '{equation}': the output labels {''.join(out)} "
                                f"repeat one or name one no operand has")
    return labels, out


@register_op
class Einsum(Op):
    input_count = (1, 2)
    type = "Einsum"
    attributes = (Attr("equation", "str", required=True),)

    def _plan(self, attrs, inputs):
        """(output shape, meta rows [size, stride a, stride b] per label, outputs first,
        the number of output labels)."""
        equation = attrs["equation"]
        shapes = [shape_of(t) for t in inputs]
        if len({t.dtype for t in inputs}) != 1:
            raise refuse(self.type, attrs, f"equation '{equation}': the operands are of "
                                           f"different types {[t.dtype for t in inputs]}")
        labels, out = _terms(self.type, attrs, equation, [len(s) for s in shapes])
        sizes: dict[str, int] = {}
        for ls, shape in zip(labels, shapes):
            for lab, d in zip(ls, shape):
                if d != 1 and sizes.get(lab, 1) not in (1, d):
                    raise refuse(self.type, attrs, f"equation '{equation}': label '{lab}' has "
                                                   f"sizes {sizes[lab]} and {d}")
                sizes[lab] = max(sizes.get(lab, 1), d)
        order = out + sorted(set(sizes) - set(out))
        rows = []
        for lab in order:
            row = [sizes[lab]]
            for k in range(2):
                stride = 0
                if k < len(shapes):
                    steps = dense_strides(shapes[k])
                    stride = sum(st for lb, d, st in zip(labels[k], shapes[k], steps)
                                 if lb == lab and d != 1)
                row.append(stride)
            rows.append(row)
        return tuple(sizes[lab] for lab in out), rows, len(out)

    def infer_shapes(self, attrs, inputs, consts):
        shape, _, _ = self._plan(attrs, inputs)
        return [(shape, inputs[0].dtype)]

    def launches(self, attrs, inputs, outputs, consts, ctx=DEFAULT_CONTEXT):
        shape, rows, n_out = self._plan(attrs, inputs)
        count = numel(shape)
        contracted = numel([r[0] for r in rows[n_out:]])
        src = program_text("einsum", {"DATA_TYPE": inputs[0].cl_type}, "index_einsum.cl")
        b = Arg.input(1) if len(inputs) > 1 else Arg.input(0)
        return [launch(src, "einsum",
                       (Arg.input(0), b, Arg.output(0), ints([v for r in rows for v in r]),
                        scalar(count), scalar(n_out), scalar(len(rows)), scalar(contracted),
                        scalar(len(inputs) > 1)), count, "einsum")]
