"""ONNX Einsum -> IR: the patterns exporters emit for attention and projections (a batched
matrix product of two float32 operands, "bhqd,bhkd->bhqk", "bij,bjk->bik", "ij,jk->ik") become
Transpose + Reshape + MatMul (+ Reshape + Transpose), so that they run on the GEMM; a
permutation of one operand ("ij->ji") is a Transpose. Every other equation of one or two
operands runs on the Einsum built-in (ops/index/einsum.py: any element type, diagonals, sums);
three operands or more are refused, naming the equation."""
from __future__ import annotations

import numpy as np

from ..translate import dtype_of, intermediate, reshaped, text_attr, translates


def _explicit(equation: str, count: int):
    """(operand label strings, output labels) of an equation without '...' whose every term
    names each label once; None for any other."""
    text = equation.replace(" ", "")
    lhs, arrow, out = text.partition("->")
    terms = lhs.split(",")
    if not arrow or "." in text or len(terms) != count or \
            any(len(set(t)) != len(t) or not t.isalpha() for t in terms) or \
            len(set(out)) != len(out) or (out and not out.isalpha()):
        return None
    return terms, out


def _transposed(r, value: str, labels: str, order: str, name: str) -> str:
    if labels == order:
        return value
    perm = [labels.index(c) for c in order]
    shape = r.known_shape(value)
    return intermediate(r, "Transpose", [value, r.const(f"{name}/order", np.array(perm,
                                                                                   np.int64))],
                        name, tuple(shape[p] for p in perm))


def _as_matmul(r, node, name: str, terms, out: str) -> bool:
    """A batched product of two f32 operands of static shapes with nothing summed out of one
    operand alone: True once emitted."""
    a, b = terms
    shapes = [r.known_shape(v) for v in node.input[:2]]
    if any(s is None or None in s for s in shapes) or \
            any(dtype_of(r, v) != "f32" for v in node.input[:2]) or \
            not out or set(out) - set(a) - set(b) or (set(a) ^ set(b)) - set(out):
        return False
    size_a, size_b = dict(zip(a, shapes[0])), dict(zip(b, shapes[1]))
    if any(size_a[c] != size_b[c] for c in a if c in b):
        return False                            # broadcasting: the built-in's business
    size = {**size_b, **size_a}
    batch = [c for c in out if c in a and c in b]
    free_a = [c for c in out if c in a and c not in b]
    free_b = [c for c in out if c in b and c not in a]
    summed = [c for c in a if c in b and c not in out]
    dims = lambda labels: [size[c] for c in labels]  # noqa: E731
    count = lambda labels: int(np.prod(dims(labels), dtype=np.int64))  # noqa: E731
    lead = [count(batch)] if batch else []
    left = reshaped(r, _transposed(r, node.input[0], a, "".join(batch + free_a + summed),
                                   f"{name}/a_t"),
                    lead + [count(free_a), count(summed)], f"{name}/a")
    right = reshaped(r, _transposed(r, node.input[1], b, "".join(batch + summed + free_b),
                                    f"{name}/b_t"),
                     lead + [count(summed), count(free_b)], f"{name}/b")
    product = intermediate(r, "MatMul", [left, right], f"{name}/matmul",
                           tuple(lead + [count(free_a), count(free_b)]),
                           {"transpose_a": "false", "transpose_b": "false"})
    labels = "".join(batch + free_a + free_b)
    if labels == out:
        reshaped(r, product, dims(labels), node.output[0])
        return True
    shaped = reshaped(r, product, dims(labels), f"{name}/product")
    perm = [labels.index(c) for c in out]
    r.emit("Transpose", [shaped, r.const(f"{name}/order", np.array(perm, np.int64))],
           [node.output[0]], name)
    return True


@translates("Einsum")
def _einsum(r, node, name: str, attrs: dict) -> None:
    equation = text_attr(r, attrs, "equation", "")
    if len(node.input) > 2:
        r.refuse(f"Einsum '{equation}' of {len(node.input)} operands is not supported (one or "
                 f"two are)")
    parsed = _explicit(equation, len(node.input))
    if parsed is not None:
        terms, out = parsed
        if len(terms) == 1 and sorted(terms[0]) == sorted(out) and r.known_shape(
                node.input[0]) is not None:
            perm = [terms[0].index(c) for c in out]
            r.emit("Transpose", [node.input[0], r.const(f"{name}/order",
                                                        np.array(perm, np.int64))],
                   [node.output[0]], name)
            return
        if len(terms) == 2 and _as_matmul(r, node, name, terms, out):
            return
    r.emit("Einsum", list(node.input), [node.output[0]], name, {"equation": equation},
           version="opset7")
