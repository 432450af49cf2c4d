"""The layers that only re-index their input (Reshape, Squeeze, Unsqueeze, Transpose, a Gather of
one constant index) composed into one strided view of the buffer they start from: where a chain
of them feeds a MatMul, the MatMul reads the chain's first tensor through the view and no layer
of the chain copies anything (passes/view_folding.py; the MatMul's fact ops/nn/matmul.py's
OperandViews).

An axis of a ComposedView is a list of parts, (size, stride) pairs in mixed radix, outermost
first: a Reshape that merges axes the buffer does not walk evenly (torch's head split merges the
batch with the heads, [S, B, 3D] to [S, B*H, d]) still has a view, which a later Reshape or
Transpose can split back into axes of one stride each. Only the view the MatMul finally reads
must give every axis one stride (`linear`). Pure: no device, no graph.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ._program import LinearView, batch_strides

Part = tuple[int, int]                  # (size, stride)


@dataclass(frozen=True)
class ComposedView:
    axes: tuple[tuple[Part, ...], ...]  # per axis its parts, outermost first; () for size 1
    offset: int = 0

    @staticmethod
    def of(view: LinearView) -> "ComposedView":
        return ComposedView(tuple(((d, s),) if d != 1 else () for d, s in
                                  zip(view.shape, view.strides)), view.offset)

    @property
    def shape(self) -> tuple[int, ...]:
        out = []
        for parts in self.axes:
            size = 1
            for n, _ in parts:
                size *= n
            out.append(size)
        return tuple(out)

    def transpose(self, order: Sequence[int]) -> "ComposedView":
        return ComposedView(tuple(self.axes[a] for a in order), self.offset)

    def reshape(self, shape: Sequence[int]) -> "ComposedView | None":
        """Read as `shape` (same count, row-major order); None where a new axis would need part
        of an old part that its size does not divide."""
        parts = [p for axis in self.axes for p in axis]
        axes: list[tuple[Part, ...]] = []
        for d in (int(v) for v in shape):
            taken: list[Part] = []
            need = d
            while need > 1:
                if not parts:
                    return None
                n, s = parts[0]
                if need % n == 0:
                    taken.append(parts.pop(0))
                    need //= n
                elif n % need == 0:
                    taken.append((need, s * (n // need)))
                    parts[0] = (n // need, s)
                    need = 1
                else:
                    return None
            if d == 0:
                return None             # an empty tensor has no view worth folding
            axes.append(tuple(taken))
        return None if parts else ComposedView(tuple(axes), self.offset)

    def select(self, axis: int, index: int) -> "ComposedView":
        """Element `index` of `axis` (a Gather of one scalar index): that axis dropped."""
        offset = self.offset
        for n, s in reversed(self.axes[axis]):
            offset += (index % n) * s
            index //= n
        return ComposedView(self.axes[:axis] + self.axes[axis + 1:], offset)

    def merged(self) -> "ComposedView":
        """The same view with the neighbouring parts of an axis that are evenly spaced merged
        into one."""
        axes = []
        for parts in self.axes:
            out: list[Part] = []
            for n, s in parts:
                if out and out[-1][1] == n * s:
                    out[-1] = (out[-1][0] * n, s)
                else:
                    out.append((n, s))
            axes.append(tuple(out))
        return ComposedView(tuple(axes), self.offset)

    def matrix(self, rows: int, cols: int) -> tuple[tuple[Part, ...], int] | None:
        """The view as `rows` x `cols` whose columns are contiguous: (the row axis's parts,
        merged, outermost first; the column stride, 1 or 0 for one column), or None where the
        columns are not contiguous."""
        flat = self.reshape((rows, cols))
        if flat is None:
            return None
        row_parts, col_parts = flat.merged().axes
        if len(col_parts) > 1 or (col_parts and col_parts[0][1] != 1):
            return None
        return row_parts, 1 if col_parts else 0

    def linear(self) -> LinearView | None:
        """The view with one stride per axis, or None where an axis's parts are not evenly
        spaced."""
        strides = []
        for parts in self.axes:
            for (n1, s1), (n2, s2) in zip(parts, parts[1:]):
                if s1 != n2 * s2:
                    return None
            strides.append(parts[-1][1] if parts else 0)
        return LinearView(self.shape, tuple(strides), self.offset)


# -- a MatMul's folded views ---------------------------------------------------------------
@dataclass(frozen=True)
class OperandViews:
    """A fact passes/view_folding.py hands a MatMul (Node.facts): layers that only re-index
    (Transpose, Reshape, Squeeze, Unsqueeze, a Gather of one index) and Multiplys by one
    constant were folded into its reads and its store.
    - views[port] (port 0: A, 1: B): input `port` is now the first tensor of its chain, of shape
      sources[port], read through this view (None: the input as it is);
    - scale: the folded factors' product, applied to the sum (matmul.cl's MATMUL_ALPHA);
    - out: where each element of the MatMul's own output goes in the tensor of shape out_shape
      that the folded layers after it made (None: its output as it is)."""
    views: tuple = (None, None)
    sources: tuple = (None, None)
    scale: float = 1.0
    out: ComposedView | None = None
    out_shape: tuple | None = None


def operand_views(op, attrs, inputs, fact: OperandViews | None) -> OperandViews | None:
    """The fact, checked against the inputs the MatMul is given (the folded chains' first
    tensors)."""
    if fact is None:
        return None
    for port, (view, source) in enumerate(zip(fact.views, fact.sources)):
        if view is not None and tuple(inputs[port].shape) != tuple(source):
            raise op.fail(attrs, f"input {port} has shape {list(inputs[port].shape)} where "
                                 f"the folded layers read {list(source)}")
    return fact


def dense_view(shape) -> ComposedView:
    return ComposedView.of(LinearView.dense(tuple(shape)))


class GemmLayout:
    """The sizes matmul.cl reads an operand and writes the output with (ops/nn/_sizes.py's
    MATMUL), from the folded views or for dense tensors. `op` and `attrs` name the layer in a
    BindingError where a view cannot be read (passes/view_folding.py folds only views it can)."""

    def __init__(self, op, attrs, views: OperandViews | None):
        self.op, self.attrs, self.views = op, attrs, views

    def _fail(self, what: str):
        return self.op.fail(self.attrs, what)

    def operand(self, which: str, view, shape: tuple, transposed: bool, outer_size: int,
                k: int) -> dict:
        """A ("A") or B ("B") as batched matrices: transpose flag, row stride, offset, batch
        strides. `outer_size` is M for A, N for B."""
        linear = LinearView.dense(shape) if view is None else view.linear()
        if linear is None:
            raise self._fail(f"operand {which} is read through a view without one stride per "
                             f"axis")
        st = linear.strides
        if len(shape) == 1:
            k_stride, outer = st[-1], 0
        else:
            k_last = (which == "A") != transposed
            k_stride, outer = (st[-1], st[-2]) if k_last else (st[-2], st[-1])
        # the contiguous axis is read fastest: along K for A, along N for B (TRANSPOSE_* 0)
        inner, inner_size, other, other_size = (k_stride, k, outer, outer_size) \
            if which == "A" else (outer, outer_size, k_stride, k)
        if inner == 1 or inner_size == 1:
            flag, ld = 0, other if other_size > 1 else inner_size
        elif other == 1 or other_size == 1:
            flag, ld = 1, inner
        else:
            raise self._fail(f"operand {which} is read with strides {inner} and {other}: one of "
                             f"its two matrix axes must be contiguous")
        bs = batch_strides(shape[:-2] if len(shape) > 1 else (), st)
        out = {f"TRANSPOSE_{which}": flag, f"LD{which}": ld, f"{which}_OFF": linear.offset,
               f"{which}_BS0": bs[0], f"{which}_BS1": bs[1]}
        if which == "A":
            out.update(A_SPLIT_ROWS=0, A_R0=1, A_RS1=0)
        return out

    def rows(self, which: str, view, rows: int, cols: int) -> dict | None:
        """A whose batches are more rows of one GEMM: its sizes, or None where its rows are
        not in at most two levels of even spacing with contiguous columns (the MatMul then runs
        its batches apart)."""
        split = self.split_rows(view, rows, cols)
        if split is None:
            return None
        r0, ld, rs1 = split
        return dict(TRANSPOSE_A=0, LDA=ld, A_OFF=view.offset if view is not None else 0,
                    A_BS0=0, A_BS1=0, A_SPLIT_ROWS=int(rs1 is not None), A_R0=r0,
                    A_RS1=rs1 or 0)

    @staticmethod
    def rows_folded(a: tuple, b: tuple, transpose_a: bool) -> bool:
        """Whether MatMul reads A's batches as more rows of one GEMM (`a`, `b`: the operands'
        shapes as it reads them): A an untransposed matrix with batch axes, B's batch axes all
        1 or none. It does where A's rows lie in two levels (`rows`); the view folding keeps
        to the same rule (passes/view_folding.py), or a folded output would be read one way
        and written another."""
        if len(a) < 2 or transpose_a:
            return False
        b2 = tuple(b) + (1,) if len(b) == 1 else tuple(b)
        return max(len(a), len(b2)) > 2 and all(d == 1 for d in b2[:-2])

    @staticmethod
    def split_rows(view, rows: int, cols: int):
        """(rows per level-0 run, their stride, the stride of the runs or None) of `view` read
        as `rows` x `cols` with contiguous columns (None: the dense matrix); None where its
        rows do not lie in at most two levels of even spacing."""
        if view is None:
            return rows, cols, None
        found = view.matrix(rows, cols)
        if found is None:
            return None
        parts, _ = found
        if len(parts) <= 1:
            return rows, parts[0][1] if parts else cols, None
        if len(parts) == 2:
            (_, s1), (n0, s0) = parts
            return n0, s0, s1
        return None

    def output_rows(self, rows: int, n: int) -> dict:
        """Where a GEMM of `rows` x `n` (A's batches folded into its rows) stores."""
        out = self.views.out if self.views is not None else None
        split = self.split_rows(out, rows, n)
        if split is None:
            raise self._fail("the folded layers after the MatMul do not keep its rows in two "
                             "levels with contiguous columns")
        r0, ld, rs1 = split
        return dict(O_BS0=0, O_BS1=0, LDO=ld, O_SPLIT_ROWS=int(rs1 is not None), O_R0=r0,
                    O_RS1=rs1 or 0)

    def output(self, batch: tuple, m: int, n: int) -> dict:
        """Where batched GEMMs of m x n store (`batch`: at most two batch dims)."""
        out = self.views.out if self.views is not None else None
        pad = (1,) * (2 - len(batch)) + tuple(batch)
        if out is not None and not batch:       # one GEMM: its rows may land in two levels
            return self.output_rows(m, n)
        if out is None:
            return dict(O_BS0=pad[1] * m * n, O_BS1=m * n, LDO=n, O_SPLIT_ROWS=0, O_R0=1,
                        O_RS1=0)
        linear = out.linear()
        if linear is None or len(linear.shape) != len(batch) + 2 or \
                (linear.strides[-1] != 1 and n > 1):
            raise self._fail("the folded layers after the MatMul do not keep its output "
                             "strided with contiguous rows")
        bs = batch_strides(batch, linear.strides)
        return dict(O_BS0=bs[0], O_BS1=bs[1], LDO=linear.strides[-2], O_SPLIT_ROWS=0, O_R0=1,
                    O_RS1=0)

    def final(self, out: tuple) -> tuple:
        """The MatMul's output shape as the graph sees it (the folded layers' result)."""
        if self.views is None or self.views.out is None:
            return out
        if tuple(self.views.out.shape) != tuple(out):
            raise self._fail(f"the folded layers after the MatMul read a {list(self.views.out.shape)}"
                             f" output, it computes {list(out)}")
        return tuple(self.views.out_shape)

    @staticmethod
    def vector_reads(sizes: dict) -> dict:
        """gemm.cl's GEMM_VEC_A and GEMM_VEC_B: 1 where every float4 group along the operand's
        contiguous index starts on a multiple of 4 floats and lies wholly inside or outside
        it (extent, row strides, offsets and batch strides multiples of 4; A not picked).
        Only for GPU devices, whose buffers are allocated aligned (a CPU device may read a
        host array in place, aligned to its element only)."""
        s = sizes
        a_extent = s["M"] if s["TRANSPOSE_A"] else s["K"]
        b_extent = s["K"] if s["TRANSPOSE_B"] else s["N"]
        a = s["A_STEP"] == 1 and all(v % 4 == 0 for v in (
            a_extent, s["LDA"], s["A_OFF"], s["A_BS0"], s["A_BS1"], s["A_RS1"]))
        b = all(v % 4 == 0 for v in (b_extent, s["LDB"], s["B_OFF"], s["B_BS0"], s["B_BS1"]))
        return {"GEMM_VEC_A": int(a), "GEMM_VEC_B": int(b)}

    @staticmethod
    def alpha(views: OperandViews | None) -> dict:
        """MATMUL_ALPHA, the folded factors' product as a float32 value (no define where there
        is none)."""
        if views is None or views.scale == 1.0:
            return {}
        return {"MATMUL_ALPHA": float(np.float32(views.scale))}
